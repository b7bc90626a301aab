import CJpegReference
public import Foundation
public import TileCore

/// An image as plain RGBA rows: the shape every reference in the tests works on.
public struct RGBAImage: Equatable, Sendable {
    public init(width: Int, height: Int, pixels: [UInt8]) {
        self.width = width
        self.height = height
        self.pixels = pixels
    }
    public var width: Int
    public var height: Int
    public var pixels: [UInt8]

    public subscript(x: Int, y: Int) -> ArraySlice<UInt8> { pixels[((y * width + x) * 4)..<((y * width + x) * 4 + 4)] }

    /// The RGB bytes (alpha dropped), as djpeg's PPM holds them.
    public var rgb: [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(width * height * 3)
        for i in stride(from: 0, to: pixels.count, by: 4) { out.append(contentsOf: pixels[i..<(i + 3)]) }
        return out
    }
}

public enum Reference {
    public struct DecodeFailure: Error { public var message: String }

    /// libjpeg's ordinary, non-suspending whole-image decode (jpeg_mem_src, one pass), at DCT scaling
    /// 1/`scale` (as `djpeg -scale 1/scale`).
    public static func decode(_ data: Data, scale: Int = 1) throws -> (image: RGBAImage, warnings: Int) {
        var result = cjs_reference_result()
        var out: UnsafeMutableRawPointer?
        let status = data.withUnsafeBytes {
            cjs_reference_decode_scaled($0.baseAddress, $0.count, UInt32(scale), &out, &result)
        }
        guard status == 0, let out else {
            let message = withUnsafeBytes(of: result.message) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            throw DecodeFailure(message: message)
        }
        defer { cjs_reference_free(out) }
        let count = Int(result.width) * Int(result.height) * 4
        let pixels = [UInt8](UnsafeRawBufferPointer(start: out, count: count))
        return (RGBAImage(width: Int(result.width), height: Int(result.height), pixels: pixels), Int(result.warnings))
    }

    /// libpng's whole-image decode of a PNG, to RGBA (alpha 255 for RGB files).
    public static func decodePNG(_ data: Data) throws -> RGBAImage {
        var result = cjs_reference_result()
        var out: UnsafeMutableRawPointer?
        let status = data.withUnsafeBytes { cjs_reference_decode_png($0.baseAddress, $0.count, &out, &result) }
        guard status == 0, let out else {
            let message = withUnsafeBytes(of: result.message) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            throw DecodeFailure(message: message)
        }
        defer { cjs_reference_free(out) }
        let count = Int(result.width) * Int(result.height) * 4
        return RGBAImage(
            width: Int(result.width), height: Int(result.height),
            pixels: [UInt8](UnsafeRawBufferPointer(start: out, count: count)))
    }

    /// A rectangle of an image.
    public static func crop(_ image: RGBAImage, x: Int, y: Int, width: Int, height: Int) -> RGBAImage {
        var out: [UInt8] = []
        out.reserveCapacity(width * height * 4)
        for row in y..<(y + height) {
            let start = (row * image.width + x) * 4
            out.append(contentsOf: image.pixels[start..<(start + width * 4)])
        }
        return RGBAImage(width: width, height: height, pixels: out)
    }

    /// Peak signal-to-noise ratio over the RGB channels, in dB (infinity for equal images).
    public static func psnr(_ a: RGBAImage, _ b: RGBAImage) -> Double {
        precondition(a.width == b.width && a.height == b.height, "images of different sizes")
        var squared = 0.0
        for p in stride(from: 0, to: a.pixels.count, by: 4) {
            for c in 0..<3 {
                let d = Double(a.pixels[p + c]) - Double(b.pixels[p + c])
                squared += d * d
            }
        }
        let mean = squared / Double(a.width * a.height * 3)
        return mean == 0 ? .infinity : 10 * log10(255 * 255 / mean)
    }

    /// Whether libjpeg's ordinary decode accepts `data`.
    public static func decodes(_ data: Data) -> Bool {
        do {
            _ = try decode(data)
            return true
        } catch { return false }
    }

    /// The 2x2 box average, written plainly: odd sizes round up, the last column/row is averaged with
    /// itself, each channel is (a + b + c + d + 2) / 4.
    public static func shrink(_ image: RGBAImage) -> RGBAImage {
        let w = (image.width + 1) / 2, h = (image.height + 1) / 2
        var out = [UInt8](repeating: 0, count: w * h * 4)
        for y in 0..<h {
            for x in 0..<w {
                let x0 = 2 * x, x1 = min(2 * x + 1, image.width - 1)
                let y0 = 2 * y, y1 = min(2 * y + 1, image.height - 1)
                for c in 0..<4 {
                    let sum =
                        Int(image[x0, y0][image[x0, y0].startIndex + c]) + Int(image[x1, y0][image[x1, y0].startIndex + c])
                        + Int(image[x0, y1][image[x0, y1].startIndex + c]) + Int(image[x1, y1][image[x1, y1].startIndex + c])
                    out[(y * w + x) * 4 + c] = UInt8((sum + 2) / 4)
                }
            }
        }
        return RGBAImage(width: w, height: h, pixels: out)
    }

    /// The EXIF orientation transform, as the corpus README tabulates it: output pixel (i, j) takes
    /// input pixel (x, y).
    public static func orient(_ image: RGBAImage, _ tag: Int) -> RGBAImage {
        let W = image.width, H = image.height
        let swapped = tag >= 5
        let ow = swapped ? H : W, oh = swapped ? W : H
        var out = [UInt8](repeating: 0, count: ow * oh * 4)
        for j in 0..<oh {
            for i in 0..<ow {
                let (x, y): (Int, Int)
                switch tag {
                case 2: (x, y) = (W - 1 - i, j)
                case 3: (x, y) = (W - 1 - i, H - 1 - j)
                case 4: (x, y) = (i, H - 1 - j)
                case 5: (x, y) = (j, i)
                case 6: (x, y) = (j, H - 1 - i)
                case 7: (x, y) = (W - 1 - j, H - 1 - i)
                case 8: (x, y) = (W - 1 - j, i)
                default: (x, y) = (i, j)
                }
                let s = (y * W + x) * 4, d = (j * ow + i) * 4
                out[d..<(d + 4)] = image.pixels[s..<(s + 4)]
            }
        }
        return RGBAImage(width: ow, height: oh, pixels: out)
    }
}

extension TiledImage {
    /// A whole level as one image, in display orientation (padding cut off).
    public func pixels(level: Int) throws -> RGBAImage {
        let l = try self.level(level)
        var pixels = [UInt8]()
        pixels.reserveCapacity(l.width * l.height * 4)
        try forEachRow(level: level) { _, row in pixels.append(contentsOf: row) }
        return RGBAImage(width: l.width, height: l.height, pixels: pixels)
    }

    /// Every tile of every level, raw (padding included), for exact comparisons.
    public func allTiles() throws -> [[UInt8]] {
        var tiles: [[UInt8]] = []
        for level in 0..<levelCount {
            for row in 0..<self.geometry.levels[level].rows {
                for column in 0..<self.geometry.levels[level].columns {
                    tiles.append(try readTile(level: level, column: column, row: row))
                }
            }
        }
        return tiles
    }
}

/// The code of the TileError `body` throws (nil when it throws nothing or another error).
public func thrownCode<T>(_ body: () throws -> T) -> TileError.Code? {
    do {
        _ = try body()
        return nil
    } catch let error as TileError {
        return error.code
    } catch {
        return nil
    }
}

/// The TileError `body` throws (nil when it throws nothing or another error).
public func thrownError<T>(_ body: () throws -> T) -> TileError? {
    do {
        _ = try body()
        return nil
    } catch {
        return error as? TileError
    }
}
