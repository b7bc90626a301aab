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
    /// Bytes held in ``iccChunks``.
    private var iccByteCount = 0
    /// Set when the ICC chunks cannot form one profile (repeated or too many chunks, over the limit):
    /// they are dropped and no more are kept.
    private(set) var iccProblem: String?
    /// Whether the walk reached the first SOS (the header is whole).
    var reachedScan = false
    /// Why the walk stopped early, if it did.
    var problem: String?
    /// Stray bytes skipped between segments.
    var extraneousBytes = 0
    /// Bytes up to and including the SOS marker.
    var headerByteCount = 0
    /// Bytes of the stream walked so far (whole segments only).
    private(set) var consumedByteCount = 0
    /// Bytes the unfinished segment needs, from where ``consume(_:)`` stopped: fewer never help.
    private(set) var bytesWanted = 0

    /// The largest ICC profile kept (a JPEG can carry at most 255 chunks of 65,519 bytes, 16.7 MB).
    static let maximumICCProfileByteCount = 16 << 20

    /// Whether the walk is over: it reached the first scan, or found a problem.
    var isFinished: Bool { reachedScan || problem != nil }

    /// Walks the segments of `bytes` (the whole start of a JPEG).
    static func parse(_ bytes: [UInt8]) -> HeaderSegments {
        bytes.withUnsafeBytes { parse($0) }
    }

    static func parse(_ bytes: UnsafeRawBufferPointer) -> HeaderSegments {
        var s = HeaderSegments()
        _ = s.consume(bytes)
        s.endOfInput()
        return s
    }

    /// Says that no bytes follow the ones consumed so far.
    mutating func endOfInput() {
        if consumedByteCount == 0 && problem == nil { problem = "too short for a JPEG" }
    }

    /// Walks the whole segments at the start of `bytes`, the stream's next bytes after those consumed
    /// before, and returns how many bytes it used: the caller keeps the rest (at most one segment,
    /// 65,537 bytes) and passes it again with what follows. Each byte is walked once, so reading a
    /// header is linear in its size.
    mutating func consume(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard !isFinished else { return 0 }
        var i = 0
        if consumedByteCount == 0 {
            guard bytes.count >= 2 else { return 0 }
            guard bytes[0] == 0xFF, bytes[1] == 0xD8 else {
                problem = "no SOI marker"
                return 0
            }
            i = 2
        }
        defer { consumedByteCount += i }
        while true {
            // As libjpeg does, skip stray bytes before a marker (a corrupt-data warning there).
            while i < bytes.count && bytes[i] != 0xFF {
                i += 1
                extraneousBytes += 1
            }
            // Markers may be padded with any number of 0xFF fill bytes: walk them once, keep the last.
            var j = i
            while j < bytes.count && bytes[j] == 0xFF { j += 1 }
            if j > i + 1 { i = j - 1 }
            bytesWanted = 0
            guard j < bytes.count else { return i }
            let marker = bytes[j]
            j += 1
            if marker == 0x01 || (0xD0...0xD7).contains(marker) {
                i = j
                continue
            }
            if marker == 0xD9 {
                problem = "EOI before any scan"
                i = j
                return i
            }
            guard j + 2 <= bytes.count else { return i }
            let length = Int(bytes[j]) << 8 | Int(bytes[j + 1])
            guard length >= 2 else {
                problem = "a segment length of \(length) at byte \(consumedByteCount + j)"
                return i
            }
            if marker == 0xDA {
                reachedScan = true
                headerByteCount = consumedByteCount + j
                i = j
                return i
            }
            guard j + length <= bytes.count else {
                bytesWanted = j + length - i
                return i
            }
            take(marker: marker, UnsafeRawBufferPointer(rebasing: bytes[(j + 2)..<(j + length)]))
            i = j + length
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
            takeICCChunk(sequence: Int(p[12]), count: Int(p[13]), UnsafeRawBufferPointer(rebasing: p[14...]))
        case 0xEE where starts("Adobe") && p.count >= 12 && adobeTransform == nil:
            adobeTransform = Int(p[11])
        default:
            return
        }
    }

    private mutating func takeICCChunk(sequence: Int, count: Int, _ bytes: UnsafeRawBufferPointer) {
        guard iccProblem == nil else { return }
        if iccChunks.count >= 255 || iccChunks.contains(where: { $0.sequence == sequence }) {
            iccProblem = "more than one ICC chunk numbered \(sequence), or more than 255 chunks"
        } else if iccByteCount + bytes.count > Self.maximumICCProfileByteCount {
            iccProblem = "the ICC profile is larger than \(Self.maximumICCProfileByteCount) bytes"
        } else {
            iccChunks.append((sequence, count, Array(bytes)))
            iccByteCount += bytes.count
            return
        }
        iccChunks = []
        iccByteCount = 0
    }

    /// The ICC profile: chunks joined in sequence order, or nil when none, or some are missing or repeated.
    var iccProfile: [UInt8]? {
        guard iccProblem == nil, let count = iccChunks.first?.count, count > 0 else { return nil }
        let sorted = iccChunks.sorted { $0.sequence < $1.sequence }
        guard sorted.count == count, sorted.enumerated().allSatisfy({ $0.offset + 1 == $0.element.sequence && $0.element.count == count })
        else { return nil }
        return sorted.flatMap(\.bytes)
    }
}

/// Walks a header as its bytes arrive, holding only an unfinished segment between chunks.
struct HeaderReader {
    private(set) var segments = HeaderSegments()
    private var pending: [UInt8] = []

    /// Walks the next bytes of the stream.
    mutating func feed(_ bytes: UnsafeRawBufferPointer) {
        guard !segments.isFinished, !bytes.isEmpty else { return }
        if pending.isEmpty {
            let used = segments.consume(bytes)
            if !segments.isFinished { pending.append(contentsOf: bytes[used...]) }
            return
        }
        pending.append(contentsOf: bytes)
        // Walk again only once the unfinished segment can be whole: each byte is walked about once.
        guard pending.count >= segments.bytesWanted else { return }
        let used = pending.withUnsafeBytes { segments.consume($0) }
        pending.removeFirst(used)
        if segments.isFinished { pending = [] }
    }

    /// Says the stream has ended (or the caller stops reading it).
    mutating func endOfInput() {
        segments.endOfInput()
        pending = []
    }
}
