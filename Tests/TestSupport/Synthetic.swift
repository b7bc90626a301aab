public import Foundation
public import TileCore

/// Test inputs made here: a deterministic picture (gradients, edges and noise, so every DCT
/// coefficient matters) encoded with libjpeg through the shim.
public enum Synthetic {
    public struct Spec: CustomStringConvertible, Sendable {
        public var width: Int
        public var height: Int
        public var grayscale = false
        public var subsampling = JPEGEncoder.Subsampling.s420
        public var progressive = false
        public var restartRows = 0
        public var quality = 90
        public var arithmetic = false

        public init(
            width: Int, height: Int, grayscale: Bool = false, subsampling: JPEGEncoder.Subsampling = .s420,
            progressive: Bool = false, restartRows: Int = 0, quality: Int = 90, arithmetic: Bool = false
        ) {
            self.width = width
            self.height = height
            self.grayscale = grayscale
            self.subsampling = subsampling
            self.progressive = progressive
            self.restartRows = restartRows
            self.quality = quality
            self.arithmetic = arithmetic
        }

        public var description: String {
            let kind = grayscale ? "gray" : "\(subsampling)"
            return
                "\(width)x\(height) \(kind)\(progressive ? " progressive" : "")\(arithmetic ? " arithmetic" : "")\(restartRows > 0 ? " rst\(restartRows)" : "")"
        }
    }

    public static func pixels(width: Int, height: Int, seed: UInt32 = 1) -> [UInt8] {
        var out = [UInt8](repeating: 255, count: width * height * 4)
        var state = seed &* 2_654_435_761 | 1
        for y in 0..<height {
            for x in 0..<width {
                state ^= state << 13
                state ^= state >> 17
                state ^= state << 5
                let noise = Int(state & 31)
                let i = (y * width + x) * 4
                out[i] = UInt8((x * 255 / max(width - 1, 1) + noise) & 255)
                out[i + 1] = UInt8(((y * 255 / max(height - 1, 1)) ^ (x / 8 % 2 == 0 ? 0 : 64)) & 255)
                out[i + 2] = UInt8(((x + y) * 3 + noise * 2) & 255)
            }
        }
        return out
    }

    /// A smooth picture (gradients and soft rings, no noise): for comparisons that lossy steps blur.
    public static func smooth(width: Int, height: Int) -> [UInt8] {
        var out = [UInt8](repeating: 255, count: width * height * 4)
        for y in 0..<height {
            for x in 0..<width {
                let i = (y * width + x) * 4
                let d = Double((x - width / 2) * (x - width / 2) + (y - height / 3) * (y - height / 3)).squareRoot()
                out[i] = UInt8(x * 255 / max(width - 1, 1))
                out[i + 1] = UInt8(y * 255 / max(height - 1, 1))
                out[i + 2] = UInt8(127.5 + 127.5 * (d / 40).truncatingRemainder(dividingBy: 6.283).sinValue)
            }
        }
        return out
    }

    public static func jpeg(_ spec: Spec, seed: UInt32 = 1) throws -> Data {
        var options = JPEGEncoder.Options()
        options.quality = spec.quality
        options.subsampling = spec.subsampling
        options.progressive = spec.progressive
        options.restartRows = spec.restartRows
        options.arithmeticCoding = spec.arithmetic
        var pixels = pixels(width: spec.width, height: spec.height, seed: seed)
        if spec.grayscale {
            pixels = stride(from: 0, to: pixels.count, by: 4).map { pixels[$0] / 2 &+ pixels[$0 + 1] / 2 }
        }
        return try JPEGEncoder.encode(
            pixels: pixels, width: spec.width, height: spec.height, input: spec.grayscale ? .grayscale : .rgba,
            options: options)
    }

    /// A JPEG of ``smooth(width:height:)`` at `quality` and `subsampling`: for checks that allow a
    /// lossy step's loss.
    public static func smoothJPEG(
        width: Int, height: Int, quality: Int = 90, subsampling: JPEGEncoder.Subsampling = .s420
    ) throws -> Data {
        var options = JPEGEncoder.Options()
        options.quality = quality
        options.subsampling = subsampling
        return try JPEGEncoder.encode(pixels: smooth(width: width, height: height), width: width, height: height, options: options)
    }

    /// Builds a pyramid feeding `data` in chunks of `chunk` bytes.
    public static func build(_ data: Data, chunk: Int, options: BuildOptions = BuildOptions()) throws -> TiledImage {
        let builder = try TileBuilder(options: options)
        var offset = 0
        while offset < data.count {
            let end = min(offset + chunk, data.count)
            try builder.append(data[offset..<end])
            offset = end
        }
        return try builder.finish()
    }
}

extension Double {
    public var sinValue: Double { Foundation.sin(self) }
}
