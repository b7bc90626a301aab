/// The marker segments of a JPEG header, walked in Swift up to the first SOS (never into scan data).
struct HeaderSegments: Sendable {
    struct Frame: Sendable {
        var marker: UInt8
        var precision: Int
        var width: Int
        var height: Int
        /// (id, horizontal, vertical) sampling per component.
        var components: [(id: UInt8, h: Int, v: Int)]
    }

    var frame: Frame?
    var restartInterval = 0
    var jfifDensity: (unit: Int, x: Int, y: Int)?
    var adobeTransform: Int?
    var exif: [UInt8]?
    var iccChunks: [(sequence: Int, count: Int, bytes: [UInt8])] = []
    /// Whether the walk reached the first SOS (the header is whole).
    var reachedScan = false
    /// Why the walk stopped early, if it did.
    var problem: String?
    /// Stray bytes skipped between segments.
    var extraneousBytes = 0
    /// Bytes up to and including the SOS marker.
    var headerByteCount = 0

    /// Walks the segments of `bytes` (the start of a JPEG).
    static func parse(_ bytes: [UInt8]) -> HeaderSegments {
        bytes.withUnsafeBytes { parse($0) }
    }

    static func parse(_ bytes: UnsafeRawBufferPointer) -> HeaderSegments {
        var s = HeaderSegments()
        guard bytes.count >= 2, bytes[0] == 0xFF, bytes[1] == 0xD8 else {
            s.problem = bytes.count < 2 ? "too short for a JPEG" : "no SOI marker"
            return s
        }
        var i = 2
        while true {
            // As libjpeg does, skip stray bytes before a marker (a corrupt-data warning there).
            while i < bytes.count && bytes[i] != 0xFF {
                i += 1
                s.extraneousBytes += 1
            }
            guard i < bytes.count else { return s }
            // Markers may be padded with any number of 0xFF fill bytes.
            while i < bytes.count && bytes[i] == 0xFF { i += 1 }
            guard i < bytes.count else { return s }
            let marker = bytes[i]
            i += 1
            if marker == 0x01 || (0xD0...0xD7).contains(marker) { continue }
            if marker == 0xD9 { s.problem = "EOI before any scan"; return s }
            guard i + 2 <= bytes.count else { return s }
            let length = Int(bytes[i]) << 8 | Int(bytes[i + 1])
            guard length >= 2 else { s.problem = "a segment length of \(length) at byte \(i)"; return s }
            if marker == 0xDA {
                s.reachedScan = true
                s.headerByteCount = i
                return s
            }
            guard i + length <= bytes.count else { return s }
            s.take(marker: marker, UnsafeRawBufferPointer(rebasing: bytes[(i + 2)..<(i + length)]))
            i += length
        }
    }

    private mutating func take(marker: UInt8, _ p: UnsafeRawBufferPointer) {
        func starts(_ prefix: String) -> Bool { p.count >= prefix.utf8.count && zip(p, prefix.utf8).allSatisfy { $0 == $1 } }
        switch marker {
        case 0xC0...0xCF where marker != 0xC4 && marker != 0xC8 && marker != 0xCC:
            guard frame == nil, p.count >= 6 else { return }
            let count = Int(p[5])
            var components: [(UInt8, Int, Int)] = []
            for c in 0..<count where 6 + c * 3 + 2 < p.count {
                let sampling = p[6 + c * 3 + 1]
                components.append((p[6 + c * 3], Int(sampling >> 4), Int(sampling & 15)))
            }
            frame = Frame(
                marker: marker, precision: Int(p[0]), width: Int(p[3]) << 8 | Int(p[4]),
                height: Int(p[1]) << 8 | Int(p[2]), components: components.map { (id: $0.0, h: $0.1, v: $0.2) })
        case 0xDD where p.count >= 2:
            if restartInterval == 0 { restartInterval = Int(p[0]) << 8 | Int(p[1]) }
        case 0xE0 where starts("JFIF\0") && p.count >= 12 && jfifDensity == nil:
            jfifDensity = (Int(p[7]), Int(p[8]) << 8 | Int(p[9]), Int(p[10]) << 8 | Int(p[11]))
        case 0xE1 where starts("Exif\0\0") && exif == nil:
            exif = Array(p[6...])
        case 0xE2 where starts("ICC_PROFILE\0") && p.count >= 14:
            iccChunks.append((Int(p[12]), Int(p[13]), Array(p[14...])))
        case 0xEE where starts("Adobe") && p.count >= 12 && adobeTransform == nil:
            adobeTransform = Int(p[11])
        default:
            return
        }
    }

    /// The ICC profile: chunks joined in sequence order, or nil when none, or some are missing or repeated.
    var iccProfile: [UInt8]? {
        guard let count = iccChunks.first?.count, count > 0 else { return nil }
        let sorted = iccChunks.sorted { $0.sequence < $1.sequence }
        guard sorted.count == count, sorted.enumerated().allSatisfy({ $0.offset + 1 == $0.element.sequence && $0.element.count == count })
        else { return nil }
        return sorted.flatMap(\.bytes)
    }
}
