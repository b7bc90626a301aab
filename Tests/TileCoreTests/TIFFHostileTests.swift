import Foundation
import Testing
import TestTraits
import TestSupport
import TileCore

/// Broken and hostile TIFFs, ours and foreign: every open and every tile read returns or throws a
/// typed ``TileError``; nothing crashes or hangs.
@Suite("Hostile TIFFs", .ownThreads)
struct TIFFHostileTests {
    /// A small TIFF store's file bytes (three levels: 600x400 down to 150x100).
    static func tiffBytes() throws -> [UInt8] {
        let folder = try TIFFStoreTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        _ = try TileBuilder.build(
            data: try Synthetic.jpeg(.init(width: 600, height: 400)),
            options: TIFFChecks.options { $0.storage = .persistent(path: "\(folder)/s.tiles") })
        return [UInt8](try #require(FileManager.default.contents(atPath: "\(folder)/s.tiles/pyramid.tif")))
    }

    /// Opens `bytes` as a TIFF and reads every tile of every level (pixels and stored JPEG): the
    /// error codes met, in order (empty when all went well).
    static func exercise(_ bytes: [UInt8]) throws -> [TileError.Code] {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("hostile-\(UUID().uuidString).tif")
        try Data(bytes).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        var codes: [TileError.Code] = []
        let image: TiledImage
        do { image = try TiledImage.open(tiff: file.path) } catch { return [error.code] }
        for level in 0..<image.levelCount {
            let l = try image.level(level)
            for row in 0..<l.rows {
                for column in 0..<l.columns {
                    do { _ = try image.readTile(level: level, column: column, row: row) } catch { codes.append(error.code) }
                    do { _ = try image.storedJPEGTile(level: level, column: column, row: row) } catch { codes.append(error.code) }
                    do { _ = try image.exactJPEGTile(level: level, column: column, row: row) } catch { codes.append(error.code) }
                }
            }
        }
        return codes
    }

    static let expected: Set<TileError.Code> = [.invalidStore, .corrupt, .unsupported, .tooLarge, .io, .truncated]

    @Test("cut at 64 points from the header to the last byte: typed errors only")
    func truncated() throws {
        let bytes = try Self.tiffBytes()
        for cut in stride(from: 0, to: bytes.count, by: max(1, bytes.count / 64)) {
            let codes = try Self.exercise(Array(bytes[..<cut]))
            #expect(Set(codes).isSubset(of: Self.expected), "cut at \(cut): \(codes)")
        }
    }

    @Test("400 copies with 1 to 8 random bytes changed (fixed seed): typed errors only")
    func flipped() throws {
        let bytes = try Self.tiffBytes()
        var generator = SeededGenerator(seed: 26)
        for _ in 0..<400 {
            var copy = bytes
            for _ in 0..<Int.random(in: 1...8, using: &generator) {
                // Most changes land in the header and directories, where they do the most harm.
                let position =
                    Bool.random(using: &generator)
                    ? Int.random(in: 0..<min(64, copy.count), using: &generator)
                    : Int.random(in: 0..<copy.count, using: &generator)
                copy[position] = UInt8.random(in: 0...255, using: &generator)
            }
            let codes = try Self.exercise(copy)
            #expect(Set(codes).isSubset(of: Self.expected), "\(codes)")
        }
    }

    /// The byte offset of each IFD entry with `tag` in a classic little-endian TIFF.
    static func entries(_ bytes: [UInt8], tag: UInt16) -> [Int] {
        func u16(_ i: Int) -> Int { Int(bytes[i]) | Int(bytes[i + 1]) << 8 }
        func u32(_ i: Int) -> Int { u16(i) | u16(i + 2) << 16 }
        var found: [Int] = []
        var ifd = u32(4)
        var seen = Set<Int>()
        while ifd > 0, ifd + 2 <= bytes.count, seen.insert(ifd).inserted {
            let count = u16(ifd)
            for e in 0..<count where u16(ifd + 2 + e * 12) == Int(tag) { found.append(ifd + 2 + e * 12) }
            ifd = u32(ifd + 2 + count * 12)
        }
        return found
    }

    static func patch32(_ bytes: inout [UInt8], at offset: Int, _ value: UInt32) {
        for i in 0..<4 { bytes[offset + i] = UInt8(truncatingIfNeeded: value >> (8 * UInt32(i))) }
    }

    @Test("absurd sizes, offsets past the end, tiles that are not JPEG, a directory loop")
    func forged() throws {
        let bytes = try Self.tiffBytes()
        #expect(bytes[2] == 42)  // classic TIFF: the forgeries below patch 32-bit fields
        // ImageWidth 2^31 on every directory.
        var huge = bytes
        for entry in Self.entries(huge, tag: 256) {
            huge[entry + 2] = 4  // type LONG
            Self.patch32(&huge, at: entry + 8, 1 << 31)
        }
        #expect(Set(try Self.exercise(huge)).isSubset(of: Self.expected))
        #expect(!(try Self.exercise(huge)).isEmpty)
        // Every tile offset past the end of the file.
        var past = bytes
        for entry in Self.entries(past, tag: 324) {
            let count = Int(past[entry + 4]) | Int(past[entry + 5]) << 8
            let array = count == 1 ? entry + 8 : Int(past[entry + 8]) | Int(past[entry + 9]) << 8 | Int(past[entry + 10]) << 16
            for i in 0..<count where array + i * 4 + 4 <= past.count { Self.patch32(&past, at: array + i * 4, 0x7FFF_0000) }
        }
        let pastCodes = try Self.exercise(past)
        #expect(!pastCodes.isEmpty && Set(pastCodes).isSubset(of: Self.expected), "\(pastCodes)")
        // Tiles that are not JPEG: every tile's bytes replaced by a pattern.
        var garbage = bytes
        let firstIFD = Int(bytes[4]) | Int(bytes[5]) << 8 | Int(bytes[6]) << 16 | Int(bytes[7]) << 24
        for i in 8..<min(firstIFD, garbage.count) { garbage[i] = UInt8(truncatingIfNeeded: i * 31) }
        let garbageCodes = try Self.exercise(garbage)
        #expect(garbageCodes.contains(.corrupt) && Set(garbageCodes).isSubset(of: Self.expected), "\(garbageCodes)")
        // The last directory's next pointer aimed at the first: a loop.
        var loop = bytes
        var ifd = firstIFD
        var last = ifd
        while ifd != 0 {
            last = ifd
            let count = Int(loop[ifd]) | Int(loop[ifd + 1]) << 8
            ifd = Int(loop[ifd + 2 + count * 12]) | Int(loop[ifd + 3 + count * 12]) << 8 | Int(loop[ifd + 4 + count * 12]) << 16
        }
        let count = Int(loop[last]) | Int(loop[last + 1]) << 8
        Self.patch32(&loop, at: last + 2 + count * 12, UInt32(firstIFD))
        #expect(Set(try Self.exercise(loop)).isSubset(of: Self.expected))
    }

    @Test("files that are not TIFFs: empty, a JPEG, text, a TIFF header alone")
    func notTIFFs() throws {
        let jpeg = [UInt8](try Synthetic.jpeg(.init(width: 20, height: 20)))
        for bytes in [[], jpeg, Array("hello".utf8), [0x49, 0x49, 42, 0, 8, 0, 0, 0], [0x4D, 0x4D, 0, 43, 0, 8, 0, 0]] {
            #expect(try Self.exercise(bytes) == [.invalidStore], "\(bytes.prefix(8))")
        }
    }
}

/// A deterministic random number generator (SplitMix64) for reproducible hostile inputs.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
