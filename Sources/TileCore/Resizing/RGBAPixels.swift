/// Decoded pixels in memory: rows of RGBA, 4 bytes a pixel, top row first, no padding.
public struct RGBAPixels: Sendable, Hashable {
    public var width: Int
    public var height: Int
    /// `width * height * 4` bytes.
    public var bytes: [UInt8]

    /// Creates pixels; `bytes` must hold `width * height * 4` bytes.
    public init(width: Int, height: Int, bytes: [UInt8]) {
        precondition(bytes.count == width * height * 4, "RGBAPixels: \(bytes.count) bytes for \(width)x\(height)")
        self.width = width
        self.height = height
        self.bytes = bytes
    }

    /// The pixels turned upright by an orientation (a plain copy for identity).
    public func oriented(_ orientation: ImageOrientation) -> RGBAPixels {
        if orientation == .identity { return self }
        let (w, h) = orientation.swapsAxes ? (height, width) : (width, height)
        var out = [UInt8](repeating: 0, count: bytes.count)
        bytes.withUnsafeBytes { src in
            out.withUnsafeMutableBytes { dst in
                let s = src.bindMemory(to: UInt32.self), d = dst.bindMemory(to: UInt32.self)
                for j in 0..<h {
                    for i in 0..<w {
                        let p = orientation.storedPosition(ofDisplay: i, j, width: width, height: height)
                        d[j &* w &+ i] = s[p.y &* width &+ p.x]
                    }
                }
            }
        }
        return RGBAPixels(width: w, height: h, bytes: out)
    }
}
