/// An ICC colour profile: the bytes a source carried (a JPEG's APP2 chunks joined, a PNG's `iCCP`, a
/// TIFF's InterColorProfile) and the header fields this package reads.
///
/// A pyramid keeps its source's profile (in a raw store's `profile.icc`, in a TIFF store's
/// InterColorProfile tag) and every output that the profile describes carries it: JPEG tiles and
/// regions as APP2 chunks (stored tiles too, spliced without decoding), PNGs as `iCCP`, exports' tiles
/// alike. An output whose colours the profile does not describe goes without it: a gray (one-channel)
/// output of an RGB profile's image, an RGB output of a gray profile's image, and every output of a
/// CMYK profile's image (this package turns CMYK into RGB itself); see ``describes(channels:)``.
public struct ColorProfile: Sendable, Hashable {
    /// The colour space the profile's data is in (header bytes 16 to 19).
    public enum ColorSpace: String, Sendable, Hashable {
        case rgb = "RGB"
        case gray = "GRAY"
        case cmyk = "CMYK"
        case other
    }

    /// The profile as the source carried it.
    public let bytes: [UInt8]
    public let colorSpace: ColorSpace
    /// The profile as JPEG APP2 `ICC_PROFILE` segments: chunks of at most 65,519 bytes, numbered from 1.
    public let jpegSegments: [UInt8]

    /// The largest profile kept: a JPEG can carry at most 255 APP2 chunks of 65,519 bytes.
    public static let maximumByteCount = 255 * 65_519

    /// Reads a profile's header: `nil` unless `bytes` is an ICC profile (at least the 128-byte header
    /// and a tag count, the `acsp` signature at byte 36, a declared size within the bytes), and at most
    /// ``maximumByteCount`` bytes. Bytes past the declared size are dropped.
    public init?(_ bytes: [UInt8]) {
        guard bytes.count >= 132, bytes.count <= Self.maximumByteCount, bytes[36...39].elementsEqual("acsp".utf8) else {
            return nil
        }
        let declared = bytes[0..<4].reduce(0) { $0 << 8 | Int($1) }
        guard declared >= 132, declared <= bytes.count else { return nil }
        // Bytes past the declared size are not the profile's (libpng refuses a profile with them).
        self.bytes = declared == bytes.count ? bytes : Array(bytes[..<declared])
        switch String(decoding: bytes[16..<20], as: UTF8.self) {
        case "RGB ": colorSpace = .rgb
        case "GRAY": colorSpace = .gray
        case "CMYK": colorSpace = .cmyk
        default: colorSpace = .other
        }
        jpegSegments = Self.segments(of: self.bytes)
    }

    /// Whether the profile describes an output of `channels` colour channels (alpha not counted): an RGB
    /// profile three, a gray one one, others none.
    public func describes(channels: Int) -> Bool {
        switch colorSpace {
        case .rgb: channels == 3
        case .gray: channels == 1
        case .cmyk, .other: false
        }
    }

    private static func segments(of bytes: [UInt8]) -> [UInt8] {
        let chunkSize = 65_519
        let count = (bytes.count + chunkSize - 1) / chunkSize
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count + count * 18)
        for index in 0..<count {
            let chunk = bytes[(index * chunkSize)..<min(bytes.count, (index + 1) * chunkSize)]
            let length = 2 + 12 + 2 + chunk.count
            out += [0xFF, 0xE2, UInt8(length >> 8), UInt8(length & 0xFF)]
            out += Array("ICC_PROFILE".utf8) + [0, UInt8(index + 1), UInt8(count)]
            out += chunk
        }
        return out
    }

    /// `jpeg` with ``jpegSegments`` after its start marker (and after a JFIF APP0 segment that follows it,
    /// which must come first). `jpeg` as it is when it does not start with SOI.
    public func inserted(into jpeg: [UInt8]) -> [UInt8] {
        guard jpeg.count >= 4, jpeg[0] == 0xFF, jpeg[1] == 0xD8 else { return jpeg }
        var at = 2
        if jpeg[2] == 0xFF, jpeg[3] == 0xE0, jpeg.count >= 6 {
            let length = Int(jpeg[4]) << 8 | Int(jpeg[5])
            if 2 + 2 + length <= jpeg.count { at = 2 + 2 + length }
        }
        return Array(jpeg[..<at]) + jpegSegments + jpeg[at...]
    }
}

extension ImageInfo {
    /// ``iccProfile`` read as a profile; `nil` when absent or not an ICC profile.
    public var colorProfile: ColorProfile? { iccProfile.flatMap(ColorProfile.init) }
}
