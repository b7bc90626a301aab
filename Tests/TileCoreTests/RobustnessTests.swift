import Foundation
import Testing
import TestTraits
import TestSupport
import TileCore

@Suite("Broken and hostile input", .ownThreads)
struct RobustnessTests {
    static func temporaryFolder() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("robust-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// Builds `data` into a persistent store inside `folder`; returns the error code, if any.
    static func outcome(_ data: Data, folder: URL, allowTruncated: Bool = false) -> TileError.Code? {
        var options = BuildOptions()
        options.storage = .persistent(path: folder.appendingPathComponent("out.tiles").path)
        options.allowTruncated = allowTruncated
        options.levels = .count(3)
        return thrownCode { try TileBuilder.build(data: data, options: options) }
    }

    @Test(
        "every truncation point of a small baseline and a small progressive JPEG gives a typed error or a defined result, and no file left behind",
        arguments: [false, true])
    func everyTruncationPoint(progressive: Bool) throws {
        let data = try Synthetic.jpeg(.init(width: 40, height: 24, progressive: progressive, quality: 60))
        let folder = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let allowed: Set<TileError.Code> = [.truncated, .corrupt]
        for cut in 0..<data.count {
            let code = Self.outcome(data.prefix(cut), folder: folder)
            #expect(code.map(allowed.contains) == true, "cut at \(cut): \(String(describing: code))")
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty, "cut at \(cut)")
            // With allowTruncated, a defined result: the image libjpeg's own whole-image decode makes of
            // the same bytes (it, too, fills in what is missing), or a typed error where it fails too.
            let tolerant = Self.outcome(data.prefix(cut), folder: folder, allowTruncated: true)
            let store = folder.appendingPathComponent("out.tiles").path
            if tolerant == nil {
                let expected = try Reference.decode(data.prefix(cut)).image
                #expect(try TiledImage.open(store: store).pixels(level: 0) == expected, "cut at \(cut)")
                try FileManager.default.removeItem(atPath: store)
            } else {
                #expect(tolerant.map(allowed.contains) == true, "cut at \(cut): \(String(describing: tolerant))")
                #expect(!Reference.decodes(data.prefix(cut)), "cut at \(cut): \(String(describing: tolerant)), yet libjpeg decodes it")
            }
        }
        #expect(Self.outcome(data, folder: folder) == nil)
    }

    @Test("random byte flips (fixed seed) never crash or hang, and leave no file behind on failure")
    func randomByteFlips() throws {
        let seeds = try [
            Synthetic.jpeg(.init(width: 64, height: 48, quality: 70)),
            Synthetic.jpeg(.init(width: 48, height: 40, progressive: true, quality: 70)),
            Synthetic.jpeg(.init(width: 40, height: 40, subsampling: .s444, restartRows: 1, quality: 70))
        ]
        let folder = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        var state: UInt64 = 0x5EED
        func next() -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int(truncatingIfNeeded: state >> 33)
        }
        var decoded = 0
        for case_ in 0..<3000 {
            var bytes = [UInt8](seeds[case_ % seeds.count])
            for _ in 0..<(1 + next() % 4) { bytes[next() % bytes.count] = UInt8(next() & 255) }
            let code = Self.outcome(Data(bytes), folder: folder, allowTruncated: true)
            if code == nil {
                // What was built is what libjpeg's ordinary decode makes of the same damaged bytes.
                let store = folder.appendingPathComponent("out.tiles").path
                let reference = try Reference.decode(Data(bytes)).image
                #expect(try TiledImage.open(store: store).pixels(level: 0) == reference, "case \(case_)")
                try FileManager.default.removeItem(atPath: store)
                decoded += 1
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty)
        }
        // Most flips land in entropy-coded data, which libjpeg decodes with warnings.
        #expect(decoded > 1000)
    }

    /// A baseline JPEG's header with its frame size rewritten.
    static func claimingSize(width: Int, height: Int) throws -> Data {
        var bytes = [UInt8](try Synthetic.jpeg(.init(width: 16, height: 16)))
        let sof = try #require(bytes.indices.first { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xC0 })
        bytes[sof + 5] = UInt8(height >> 8)
        bytes[sof + 6] = UInt8(height & 255)
        bytes[sof + 7] = UInt8(width >> 8)
        bytes[sof + 8] = UInt8(width & 255)
        return Data(bytes)
    }

    @Test("a header claiming 65000x65000 is refused by the pixel limit before any file is sized")
    func decompressionBomb() throws {
        let folder = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let bomb = try Self.claimingSize(width: 65000, height: 65000)
        let builder = try TileBuilder(
            options: {
                var o = BuildOptions(); o.storage = .persistent(path: folder.appendingPathComponent("x.tiles").path); return o
            }())
        #expect(thrownCode { try builder.append(bomb) } == .tooLarge)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty)
    }

    @Test("a huge claimed size within the limit never allocates disk it has not been given data for")
    func hugeClaimIsSparse() throws {
        let folder = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let claim = try Self.claimingSize(width: 30000, height: 30000)  // 900 MP: under 2^30
        var options = BuildOptions()
        options.storage = .persistent(path: folder.appendingPathComponent("x.tiles").path)
        let builder = try TileBuilder(options: options)
        try builder.append(claim.prefix(claim.count - 2))  // no EOI: the decoder waits for more
        let staging = try #require(try FileManager.default.contentsOfDirectory(atPath: folder.path).first)
        var allocated = 0
        for name in try FileManager.default.contentsOfDirectory(atPath: folder.appendingPathComponent(staging).path) {
            var info = stat()
            stat(folder.appendingPathComponent(staging).appendingPathComponent(name).path, &info)
            allocated += Int(info.st_blocks) * 512
        }
        #expect(allocated < 64 << 20, "\(allocated) bytes allocated for a header")
        builder.cancel()
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty)
    }

    @Test("EXIF orientation 0 or 9 is treated as 1 (documented), the tag's value is still reported")
    func outOfRangeOrientation() throws {
        for value in [0, 9] {
            let data = try MetadataTests.jpeg(withEXIF: MetadataTests.exifBlock(bigEndian: false, orientation: value))
            let info = try ImageInfo.read(data: data)
            #expect(info.exifOrientation == value)
            #expect(info.orientation == .identity)
            let image = try TileBuilder.build(data: data)
            #expect(image.geometry.orientation == .identity)
        }
    }

    @Test("ICC chunks are joined by sequence number; a missing or repeated chunk gives no profile")
    func iccChunks() throws {
        func jpeg(_ chunks: [(Int, Int, [UInt8])]) throws -> Data {
            let encoder = try JPEGEncoder(width: 8, height: 8)
            for (sequence, count, bytes) in chunks {
                try encoder.writeMarker(0xE2, Array("ICC_PROFILE\0".utf8) + [UInt8(sequence), UInt8(count)] + bytes)
            }
            let pixels = [UInt8](repeating: 90, count: 8 * 8 * 4)
            try pixels.withUnsafeBytes { try encoder.writeRows($0, stride: 32, count: 8) }
            return try encoder.finish()
        }
        let a: [UInt8] = [1, 2, 3], b: [UInt8] = [4, 5], c: [UInt8] = [6]
        #expect(try ImageInfo.read(data: jpeg([(2, 3, b), (1, 3, a), (3, 3, c)])).iccProfile == a + b + c)
        #expect(try ImageInfo.read(data: jpeg([(1, 3, a), (3, 3, c)])).iccProfile == nil)
        #expect(try ImageInfo.read(data: jpeg([(1, 2, a), (1, 2, a)])).iccProfile == nil)
    }

    @Test("the C entry points refuse empty, truncated and corrupt input with typed errors")
    func emptyTruncatedCorrupt() throws {
        let data = try Synthetic.jpeg(.init(width: 200, height: 200))
        #expect(thrownCode { try TileBuilder.build(data: Data()) } == .truncated)
        #expect(thrownCode { try TileBuilder.build(data: data.prefix(data.count / 2)) } == .truncated)
        var corrupt = [UInt8](data)
        corrupt[1] = 0x00  // no SOI: not a JPEG
        #expect(thrownCode { try TileBuilder.build(data: Data(corrupt)) } == .corrupt)
        #expect(thrownCode { try ImageInfo.read(data: Data()) } == .truncated)  // as TileBuilder: one code for empty input
    }
}
