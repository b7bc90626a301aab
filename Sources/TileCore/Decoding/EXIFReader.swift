/// A value of an EXIF tag, typed as the TIFF field says.
public enum EXIFValue: Sendable, Hashable, CustomStringConvertible {
    /// ASCII (type 2), without the trailing NUL.
    case string(String)
    /// BYTE, SHORT, LONG, SBYTE, SSHORT, SLONG (types 1, 3, 4, 6, 8, 9).
    case integers([Int])
    /// RATIONAL, SRATIONAL (types 5, 10) as numerator/denominator pairs.
    case rationals([EXIFRational])
    /// UNDEFINED (type 7) and anything else, raw.
    case bytes([UInt8])

    public var description: String {
        switch self {
        case .string(let s): return s
        case .integers(let v): return v.count == 1 ? "\(v[0])" : "\(v)"
        case .rationals(let v): return v.count == 1 ? "\(v[0])" : "\(v)"
        case .bytes(let v): return "\(v.count) bytes"
        }
    }
}

/// A TIFF rational: `numerator / denominator`.
public struct EXIFRational: Sendable, Hashable, CustomStringConvertible {
    public var numerator: Int
    public var denominator: Int
    /// Creates a rational.
    public init(numerator: Int, denominator: Int) {
        self.numerator = numerator
        self.denominator = denominator
    }
    /// The value as a Double (`nil` when the denominator is 0).
    public var value: Double? { denominator == 0 ? nil : Double(numerator) / Double(denominator) }
    public var description: String { "\(numerator)/\(denominator)" }
}

/// Reads IFD0 and the Exif sub-IFD of an EXIF block (the TIFF structure after `Exif\0\0`).
///
/// Every offset and count is checked against the block; IFDs are visited at most once, so a malformed
/// block gives an error string, never a crash or a loop.
struct EXIFReader {
    /// Tags by name (names from the EXIF 2.32 specification; unknown tags as `Tag0xNNNN`).
    private(set) var tags: [String: EXIFValue] = [:]
    /// The Orientation tag (0x0112) of IFD0, whatever its value.
    private(set) var orientation: Int?
    /// Where the Orientation tag's SHORT value sits in the block, so a copy can be set upright.
    private(set) var orientationValueOffset: Int?
    private(set) var problem: String?

    private let bytes: [UInt8]
    private(set) var littleEndian = true
    private var visited: Set<Int> = []

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
        guard bytes.count >= 8 else { problem = "the EXIF block is too short for a TIFF header"; return }
        switch (bytes[0], bytes[1]) {
        case (0x49, 0x49): littleEndian = true
        case (0x4D, 0x4D): littleEndian = false
        default: problem = "the EXIF block has no TIFF byte order mark"; return
        }
        guard u16(2) == 42, let ifd0 = u32(4) else { problem = "the EXIF block's TIFF header is invalid"; return }
        readIFD(at: ifd0, isIFD0: true)
    }

    private func u16(_ at: Int) -> Int? {
        guard at >= 0, at + 2 <= bytes.count else { return nil }
        let a = Int(bytes[at]), b = Int(bytes[at + 1])
        return littleEndian ? a | b << 8 : a << 8 | b
    }

    private func u32(_ at: Int) -> Int? {
        guard let a = u16(at), let b = u16(at + 2) else { return nil }
        return littleEndian ? a | b << 16 : a << 16 | b
    }

    private mutating func readIFD(at offset: Int, isIFD0: Bool) {
        guard !visited.contains(offset) else { problem = "EXIF IFDs form a loop"; return }
        visited.insert(offset)
        guard let count = u16(offset), offset + 2 + count * 12 <= bytes.count else {
            problem = "an EXIF IFD at offset \(offset) lies outside the block"
            return
        }
        for entry in 0..<count {
            let at = offset + 2 + entry * 12
            guard let tag = u16(at), let type = u16(at + 2), let n = u32(at + 4) else { continue }
            if tag == 0x8769, let sub = u32(at + 8) {
                readIFD(at: sub, isIFD0: false)
                continue
            }
            guard let value = readValue(type: type, count: n, entry: at) else { continue }
            if tag == 0x0112, isIFD0, case .integers(let v) = value, let first = v.first {
                orientation = first
                if type == 3 && n == 1 { orientationValueOffset = at + 8 }
            }
            tags[Self.names[tag] ?? "Tag0x" + String(tag, radix: 16, uppercase: true)] = value
        }
    }

    private mutating func readValue(type: Int, count: Int, entry: Int) -> EXIFValue? {
        let sizes = [1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 2, 9: 4, 10: 8]
        guard let size = sizes[type], count >= 0, count <= bytes.count else {
            problem = "an EXIF entry has an unknown type or an impossible count"
            return nil
        }
        let total = size * count
        var start = entry + 8
        if total > 4 {
            guard let offset = u32(entry + 8) else { return nil }
            start = offset
        }
        guard start >= 0, start + total <= bytes.count else {
            problem = "an EXIF value lies outside the block"
            return nil
        }
        func signed(_ v: Int, bits: Int) -> Int { v >= 1 << (bits - 1) ? v - (1 << bits) : v }
        switch type {
        case 2:
            let raw = bytes[start..<(start + total)].prefix { $0 != 0 }
            return .string(String(decoding: raw, as: UTF8.self))
        case 1: return .integers((0..<count).map { Int(bytes[start + $0]) })
        case 6: return .integers((0..<count).map { signed(Int(bytes[start + $0]), bits: 8) })
        case 3: return .integers((0..<count).map { u16(start + $0 * 2)! })
        case 8: return .integers((0..<count).map { signed(u16(start + $0 * 2)!, bits: 16) })
        case 4: return .integers((0..<count).map { u32(start + $0 * 4)! })
        case 9: return .integers((0..<count).map { signed(u32(start + $0 * 4)!, bits: 32) })
        case 5, 10:
            return .rationals(
                (0..<count).map {
                    let n = u32(start + $0 * 8)!, d = u32(start + $0 * 8 + 4)!
                    return type == 5
                        ? EXIFRational(numerator: n, denominator: d)
                        : EXIFRational(numerator: signed(n, bits: 32), denominator: signed(d, bits: 32))
                })
        default: return .bytes(Array(bytes[start..<(start + total)]))
        }
    }

    /// A copy of `block` with its IFD0 Orientation set to 1 (upright), when it has one.
    static func uprightCopy(of block: [UInt8]) -> [UInt8] {
        let reader = EXIFReader(block)
        guard let offset = reader.orientationValueOffset, offset + 2 <= block.count else { return block }
        var copy = block
        (copy[offset], copy[offset + 1]) = reader.littleEndian ? (1, 0) : (0, 1)
        return copy
    }

    static let names: [Int: String] = [
        0x010E: "ImageDescription", 0x010F: "Make", 0x0110: "Model", 0x0112: "Orientation",
        0x011A: "XResolution", 0x011B: "YResolution", 0x0128: "ResolutionUnit", 0x0131: "Software",
        0x0132: "DateTime", 0x013B: "Artist", 0x0213: "YCbCrPositioning", 0x8298: "Copyright",
        0x8825: "GPSInfo", 0x829A: "ExposureTime", 0x829D: "FNumber", 0x8822: "ExposureProgram",
        0x8827: "ISOSpeedRatings", 0x9000: "ExifVersion", 0x9003: "DateTimeOriginal",
        0x9004: "DateTimeDigitized", 0x9101: "ComponentsConfiguration", 0x9201: "ShutterSpeedValue",
        0x9202: "ApertureValue", 0x9204: "ExposureBiasValue", 0x9205: "MaxApertureValue",
        0x9207: "MeteringMode", 0x9209: "Flash", 0x920A: "FocalLength", 0x927C: "MakerNote",
        0x9286: "UserComment", 0xA000: "FlashpixVersion", 0xA001: "ColorSpace",
        0xA002: "PixelXDimension", 0xA003: "PixelYDimension", 0xA005: "InteroperabilityIFD",
        0xA402: "ExposureMode", 0xA403: "WhiteBalance", 0xA405: "FocalLengthIn35mmFilm",
        0xA406: "SceneCaptureType", 0xA434: "LensModel", 0x0201: "JPEGInterchangeFormat",
        0x0202: "JPEGInterchangeFormatLength"
    ]
}
