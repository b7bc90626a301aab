import Foundation
import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// After the runs: our TIFF and vips' of the same input, their sizes, and the PSNR of each lower level
/// against a float-precision box filter of the source as `djpeg` decodes it (each level the 2x2 mean
/// of the one above, in floating point; an odd last column or row averaged with itself, as this
/// package's shrink does). Only the area both pyramids have is compared (vips rounds half sizes down).
enum TIFFComparison {
    static func run(input: String) throws -> [String] {
        let folder = NSTemporaryDirectory() + "/tiledimagekit-bench-tiff-\(getpid())"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var options = BuildOptions()
        options.format = .tiff()
        options.storage = .persistent(path: "\(folder)/ours.tiles")
        let ours = try TileBuilder.build(contentsOfFile: input, options: options)
        guard let vipsPath = Scenario.which("vips"), let djpeg = Scenario.which("djpeg") else {
            return ["tiff-compare: skipped (vips and djpeg are needed)"]
        }
        let vipsFile = "\(folder)/vips.tif"
        let vips = try ChildProcess.run(vipsPath, TIFFScenarios.vipsArguments(input, output: vipsFile))
        guard vips.exitStatus == 0 else { throw BenchmarkError("vips tiffsave failed") }
        let theirs = try TiledImage.open(tiff: vipsFile)
        let source = Double(try fileSize(input))
        let ourBytes = Double(try fileSize("\(folder)/ours.tiles/pyramid.tif"))
        let vipsBytes = Double(try fileSize(vipsFile))
        let reference = try ReferencePyramid(djpeg: djpeg, input: input, levels: max(ours.levelCount, theirs.levelCount) - 1)
        let errors = try reference.compare([ours, theirs])
        var lines = [
            String(
                format: "tiff-compare: ours %.1f MB (%.3fx the source; level 0 %.1f MB), vips %.1f MB (%.3fx; level 0 %.1f MB)",
                ourBytes / 1e6, ourBytes / source, Double(levelBytes(ours, 0)) / 1e6, vipsBytes / 1e6, vipsBytes / source,
                Double(levelBytes(theirs, 0)) / 1e6)
        ]
        for level in 1..<reference.levelCount + 1 where level < ours.levelCount || level < theirs.levelCount {
            let o = errors[0][level], v = errors[1][level]
            lines.append(
                String(
                    format: "  level %d: PSNR ours %@, vips %@; tiles ours %.2f MB, vips %.2f MB", level,
                    o.map { String(format: "%.2f dB", $0) } ?? "-" as String, v.map { String(format: "%.2f dB", $0) } ?? "-" as String,
                    Double(levelBytes(ours, level)) / 1e6, Double(levelBytes(theirs, level)) / 1e6))
        }
        return lines
    }

    /// The bytes of a level's stored tiles as the TIFF holds them: each stored JPEG made whole, less
    /// the tables spliced in front (SOI, then from the frame header on).
    static func levelBytes(_ image: TiledImage, _ level: Int) -> Int {
        guard level < image.levelCount, let l = try? image.level(level) else { return 0 }
        var total = 0
        for row in 0..<l.rows {
            for column in 0..<l.columns {
                guard let jpeg = (try? image.storedJPEGTile(level: level, column: column, row: row)) ?? nil else { continue }
                total += 2 + jpeg.count - frameOffset([UInt8](jpeg))
            }
        }
        return total
    }

    /// Where a JPEG's frame header (SOF0...SOF2) starts: after the tables segments.
    static func frameOffset(_ bytes: [UInt8]) -> Int {
        var i = 2
        while i + 4 <= bytes.count, bytes[i] == 0xFF {
            let marker = bytes[i + 1]
            if marker >= 0xC0 && marker <= 0xC2 { return i }
            i += 2 + (Int(bytes[i + 2]) << 8 | Int(bytes[i + 3]))
        }
        return 2
    }
}

/// The float box-filter pyramid of a JPEG, made as `djpeg` streams its rows, compared row by row with
/// the levels of other pyramids: memory is two float rows a level and a tile row of each pyramid.
final class ReferencePyramid {
    let djpeg: String
    let input: String
    let levelCount: Int

    init(djpeg: String, input: String, levels: Int) throws {
        self.djpeg = djpeg
        self.input = input
        levelCount = levels
    }

    /// Per pyramid, per level (index 0 unused), the PSNR over the area it shares with the reference.
    func compare(_ images: [TiledImage]) throws -> [[Double?]] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: djpeg)
        process.arguments = ["-pnm", input]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let reader = PNMReader(pipe.fileHandleForReading)
        let (width, height) = try reader.header()
        var chain = ShrinkChain(width: width, levels: levelCount)
        var squared = images.map { _ in [Double](repeating: 0, count: levelCount + 1) }
        var counted = images.map { _ in [Int](repeating: 0, count: levelCount + 1) }
        let caches = images.map { image in (0...levelCount).map { TileRowCache(image: image, level: $0) } }
        let compare: (Int, Int, UnsafeBufferPointer<Float>) -> Void = { level, y, row in
            for index in images.indices where level < images[index].levelCount {
                let (sum, count) = caches[index][level].squaredError(row: y, reference: row)
                squared[index][level] += sum
                counted[index][level] += count
            }
        }
        var row = [UInt8](repeating: 0, count: width * 3)
        for _ in 0..<height {
            try reader.read(into: &row)
            chain.push(row, compare)
        }
        chain.finish(compare)
        process.waitUntilExit()
        return images.indices.map { index in
            (0...levelCount).map { level in
                guard level > 0, counted[index][level] > 0 else { return nil }
                let mean = squared[index][level] / Double(counted[index][level])
                return mean == 0 ? .infinity : 10 * log10(255 * 255 / mean)
            }
        }
    }
}

/// Level k + 1 rows as the float 2x2 means of level k's, from level 0's 8-bit RGB rows.
struct ShrinkChain {
    var widths: [Int]
    var pending: [[Float]?]
    var emitted: [Int]

    init(width: Int, levels: Int) {
        widths = (0...levels).map { k in (0..<k).reduce(width) { w, _ in (w + 1) / 2 } }
        pending = Array(repeating: nil, count: levels + 1)
        emitted = Array(repeating: 0, count: levels + 1)
    }

    mutating func push(_ row: [UInt8], _ compare: (Int, Int, UnsafeBufferPointer<Float>) -> Void) {
        push(level: 0, row.map(Float.init), compare)
    }

    /// Takes a row of `level`: paired with the one before it, it makes a row of the level below.
    mutating func push(level: Int, _ row: [Float], _ compare: (Int, Int, UnsafeBufferPointer<Float>) -> Void) {
        if level > 0 {
            row.withUnsafeBufferPointer { compare(level, emitted[level], $0) }
            emitted[level] += 1
        }
        guard level + 1 < widths.count else { return }
        guard let above = pending[level] else {
            pending[level] = row
            return
        }
        pending[level] = nil
        push(level: level + 1, Self.shrink(above, row, width: widths[level]), compare)
    }

    /// An odd last row of each level, averaged with itself.
    mutating func finish(_ compare: (Int, Int, UnsafeBufferPointer<Float>) -> Void) {
        for level in pending.indices {
            if let row = pending[level] {
                pending[level] = nil
                push(level: level + 1, Self.shrink(row, row, width: widths[level]), compare)
            }
        }
    }

    static func shrink(_ a: [Float], _ b: [Float], width: Int) -> [Float] {
        let out = (width + 1) / 2
        var result = [Float](repeating: 0, count: out * 3)
        a.withUnsafeBufferPointer { a in
            b.withUnsafeBufferPointer { b in
                result.withUnsafeMutableBufferPointer { r in
                    for x in 0..<out {
                        let x0 = 2 * x, x1 = min(2 * x + 1, width - 1)
                        for c in 0..<3 {
                            r[x * 3 + c] = (a[x0 * 3 + c] + a[x1 * 3 + c] + b[x0 * 3 + c] + b[x1 * 3 + c]) * 0.25
                        }
                    }
                }
            }
        }
        return result
    }
}

/// One tile row of a pyramid's level, read (decoded) once, for row-by-row comparisons.
final class TileRowCache {
    let image: TiledImage
    let level: Int
    var tileRow = -1
    var tiles: [UInt8] = []

    init(image: TiledImage, level: Int) {
        self.image = image
        self.level = level
    }

    /// The squared error of row `y` of the level against `reference` (RGB floats), over the columns
    /// both have; 0 values when the level has no such row.
    func squaredError(row y: Int, reference: UnsafeBufferPointer<Float>) -> (Double, Int) {
        guard let l = try? image.level(level), y < l.height else { return (0, 0) }
        let side = image.geometry.tileSize
        if y / side != tileRow {
            tileRow = y / side
            tiles = []
            for column in 0..<l.columns { tiles += (try? image.readTile(level: level, column: column, row: tileRow)) ?? [] }
        }
        let width = min(l.width, reference.count / 3)
        let tileBytes = side * side * 4
        var sum = 0.0
        tiles.withUnsafeBufferPointer { t in
            for x in 0..<width {
                let p = (x / side) * tileBytes + ((y % side) * side + x % side) * 4
                for c in 0..<3 {
                    let d = Double(t[p + c]) - Double(reference[x * 3 + c])
                    sum += d * d
                }
            }
        }
        return (sum, width * 3)
    }
}

/// Binary PNM (P6) rows from a pipe.
final class PNMReader {
    let handle: FileHandle
    var buffer: [UInt8] = []
    var position = 0

    init(_ handle: FileHandle) { self.handle = handle }

    private func fill(_ count: Int) throws {
        while buffer.count - position < count {
            guard let data = try handle.read(upToCount: 1 << 20), !data.isEmpty else { throw BenchmarkError("djpeg ended early") }
            if position > 0 {
                buffer.removeFirst(position)
                position = 0
            }
            buffer += data
        }
    }

    func header() throws -> (Int, Int) {
        var fields: [String] = []
        var current = ""
        while fields.count < 4 {
            try fill(1)
            let c = buffer[position]
            position += 1
            if c == 0x20 || c == 0x0A || c == 0x09 || c == 0x0D {
                if !current.isEmpty { fields.append(current); current = "" }
            } else {
                current.append(Character(UnicodeScalar(c)))
            }
        }
        guard fields[0] == "P6", let w = Int(fields[1]), let h = Int(fields[2]) else { throw BenchmarkError("not a P6 image") }
        return (w, h)
    }

    func read(into row: inout [UInt8]) throws {
        try fill(row.count)
        let (start, count) = (position, row.count)
        row.withUnsafeMutableBytes { destination in
            buffer.withUnsafeBytes { source in
                destination.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[start..<(start + count)]))
            }
        }
        position += count
    }
}
