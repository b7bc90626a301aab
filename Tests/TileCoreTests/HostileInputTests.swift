import Foundation
import Testing
import TestTraits
import TestSupport
import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// Inputs built to hurt (issue 15): traps, work after the image ends, scan floods, tiny files that
/// claim huge frames, truncation disguised by an appended marker, ICC chunk floods, FIFOs.
@Suite("Hostile input, round two", .ownThreads)
struct HostileInputTests {
    // MARK: - Inputs, made as the issue makes them (cjpeg and Python there; the shim here)

    /// `jpeg` with the SOF0/SOF2 frame size rewritten.
    static func claiming(_ jpeg: Data, width: Int, height: Int) throws -> Data {
        var bytes = [UInt8](jpeg)
        var i = 2
        while !(bytes[i] == 0xFF && (bytes[i + 1] == 0xC0 || bytes[i + 1] == 0xC2)) {
            i += 2 + (Int(bytes[i + 2]) << 8 | Int(bytes[i + 3]))
        }
        bytes[i + 5] = UInt8(height >> 8)
        bytes[i + 6] = UInt8(height & 255)
        bytes[i + 7] = UInt8(width >> 8)
        bytes[i + 8] = UInt8(width & 255)
        return Data(bytes)
    }

    /// A small progressive JPEG whose last scan is replaced by `count` empty AC refinement scans.
    static func scanFlood(count: Int, width: Int, height: Int) throws -> Data {
        let small = try Synthetic.jpeg(.init(width: 64, height: 64, progressive: true, quality: 75))
        let claimed = [UInt8](try claiming(small, width: width, height: height))
        let lastScan = try #require((0..<(claimed.count - 1)).last { claimed[$0] == 0xFF && claimed[$0 + 1] == 0xDA })
        let scan: [UInt8] = [0xFF, 0xDA, 0x00, 0x08, 0x01, 0x01, 0x00, 0x01, 0x3F, 0x10]
        return Data(claimed[..<lastScan] + Array([[UInt8]](repeating: scan, count: count).joined()) + [0xFF, 0xD9])
    }

    static func options(_ configure: (inout BuildOptions) -> Void = { _ in }) -> BuildOptions {
        var options = BuildOptions()
        configure(&options)
        return options
    }

    // MARK: 1. Traps

    @Test("out-of-range levels and tiles throw invalidArgument instead of trapping")
    func noTrapsOnArguments() throws {
        let image = try TileBuilder.build(data: try Synthetic.jpeg(.init(width: 300, height: 200)))
        for level in [-1, image.levelCount, Int.max, Int.min] {
            #expect(thrownCode { try image.level(level) } == .invalidArgument)
            #expect(thrownCode { try image.geometry.fileByteCount(level: level) } == .invalidArgument)
            #expect(thrownCode { try image.geometry.tileByteOffset(level: level, column: 0, row: 0) } == .invalidArgument)
            #expect(thrownCode { try image.readTile(level: level, column: 0, row: 0) } == .invalidArgument)
            #expect(thrownCode { try image.forEachRow(level: level) { _, _ in } } == .invalidArgument)
            #expect(!image.isLevelComplete(level))
            #expect(image.storedTileRowsComplete(level: level) == 0)
            #expect(!image.isTileReady(level: level, column: 0, row: 0))
        }
        #expect(thrownCode { try image.geometry.tileByteOffset(level: 0, column: -1, row: 0) } == .invalidArgument)
        #expect(thrownCode { try image.geometry.tileByteOffset(level: 0, column: 0, row: 99) } == .invalidArgument)
    }

    // MARK: 2. Bytes after the image

    @Test("bytes after the end-of-image marker are counted, never buffered; the build is complete at the marker")
    func trailingBytesAreIgnored() throws {
        let jpeg = try Synthetic.jpeg(.init(width: 64, height: 64))
        let builder = try TileBuilder()
        try builder.append(jpeg)
        #expect(builder.isComplete)
        let zeros = Data(count: 64 * 1024)
        for _ in 0..<256 { try builder.append(zeros) }  // 16 MiB
        #expect(builder.bytesBuffered < 64 * 1024)
        #expect(builder.bytesAfterImage == 256 * zeros.count)
        let image = try builder.finish()
        #expect(try image.pixels(level: 0) == Reference.decode(jpeg).image)
    }

    @Test("a file with 64 MiB of zeros after the image is read only up to the marker")
    func trailingBytesInAFile() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("trail-\(UUID().uuidString).jpg").path
        defer { unlink(path) }
        let jpeg = try Synthetic.jpeg(.init(width: 64, height: 64))
        #expect(FileManager.default.createFile(atPath: path, contents: jpeg))
        #expect(truncate(path, 64 << 20) == 0)
        let image = try TileBuilder.build(contentsOfFile: path, chunkSize: 64 * 1024)
        #expect(try image.pixels(level: 0) == Reference.decode(jpeg).image)
    }

    // MARK: 3. Scan floods

    @Test("5000 empty refinement scans: refused as truncated by default, then by the warning limit, then by the scan limit")
    func scanFlood() throws {
        let flood = try Self.scanFlood(count: 5000, width: 2000, height: 2000)
        #expect(thrownCode { try TileBuilder.build(data: flood) } == .truncated)
        let lenient = Self.options { $0.allowTruncated = true }
        let warnings = try #require(thrownError { try TileBuilder.build(data: flood, options: lenient) })
        #expect(warnings.code == .tooManyWarnings)
        #expect(warnings.message.contains("100"))
        let noWarningLimit = Self.options {
            $0.allowTruncated = true
            $0.warningLimit = nil
            $0.maximumScanCount = 20
        }
        let scans = try #require(thrownError { try TileBuilder.build(data: flood, options: noWarningLimit) })
        #expect(scans.code == .tooManyScans)
        #expect(scans.message.contains("20"))
    }

    @Test("the scan limit leaves ordinary progressive JPEGs alone, and counts as djpeg -maxscans does")
    func scanLimitBoundary() throws {
        let jpeg = try Synthetic.jpeg(.init(width: 40, height: 40, progressive: true))
        let scans = [UInt8](jpeg).indices.dropLast().filter { jpeg[$0] == 0xFF && jpeg[$0 + 1] == 0xDA }.count
        #expect(scans > 5)
        let exact = try TileBuilder.build(data: jpeg, options: Self.options { $0.maximumScanCount = scans })
        #expect(try exact.pixels(level: 0) == Reference.decode(jpeg).image)
        #expect(thrownCode { try TileBuilder.build(data: jpeg, options: Self.options { $0.maximumScanCount = scans - 1 }) } == .tooManyScans)
    }

    @Test(
        "a valid progressive JPEG whose 100 scans cover its blocks 100 times over is refused once they pass 16 times (after 2^24 block-scans); an ordinary progression of the same picture is read",
        .enabled(if: Tools.have("cjpeg"), Comment(rawValue: Tools.missing("cjpeg"))))
    func scanPasses() throws {
        // Issue 37: a valid 492-scan progressive JPEG of zeros (8192 x 8192 in 192 KB) cost 19 s of CPU.
        // cjpeg writes at most 100 scans (`Bombs.hundredScans`).
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("passes-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        #expect(Bombs.hundredScans.split(separator: "\n").count == 100)
        try Bombs.hundredScans.write(toFile: "\(folder)/scans.txt", atomically: true, encoding: .utf8)
        let side = 4096  // 512 x 512 blocks: 100 scans are 26.2 M block-scans, past 2^24 + 16 x 262,144 at scan 81
        try Bombs.blackPGM(side: side).write(to: URL(fileURLWithPath: "\(folder)/zeros.pgm"))
        let bomb = try Tools.run("cjpeg", ["-grayscale", "-scans", "\(folder)/scans.txt", "\(folder)/zeros.pgm"]).stdout
        #expect(bomb.count > 1000 && [UInt8](bomb).indices.dropLast().filter { bomb[$0] == 0xFF && bomb[$0 + 1] == 0xDA }.count == 100)
        let error = try #require(thrownError { try TileBuilder.build(data: bomb) })
        #expect(error.code == .tooManyScans && error.message.contains("times over"), "\(error)")
        // Refused at the first scan past the limit, not at the end.
        let scan = Int(error.message.split(separator: " ").dropFirst().first?.dropLast() ?? "") ?? 0
        #expect((81...82).contains(scan), "\(error.message)")
        // An ordinary progression of the same picture: read, djpeg's pixels (all black).
        let ordinary = try Tools.run("cjpeg", ["-grayscale", "-progressive", "\(folder)/zeros.pgm"]).stdout
        let image = try TileBuilder.build(data: ordinary)
        #expect(try image.readTile(level: 0, column: 3, row: 5) == [UInt8]((0..<(256 * 256)).flatMap { _ in [0, 0, 0, 255] as [UInt8] }))
    }

    // MARK: 4, 5. Tiny files claiming huge frames; truncation disguised by a marker

    @Test("a 4:4:4 progressive file claiming 32768x32768 and a baseline one claiming 65500x16392 fail at the first sign")
    func tinyFilesClaimingHugeFrames() throws {
        let progressive = try Self.claiming(
            Synthetic.jpeg(.init(width: 64, height: 64, subsampling: .s444, progressive: true)), width: 32768, height: 32768)
        let baseline = try Self.claiming(Synthetic.jpeg(.init(width: 64, height: 64)), width: 65500, height: 16392)
        for data in [progressive, baseline] {
            let builder = try TileBuilder()
            #expect(thrownCode { try builder.append(data) } == .truncated)
            // Nothing past the first MCU row was decoded or written.
            #expect(builder.rowsDecoded <= 64)
        }
    }

    @Test("a scan cut short and closed with an EOI marker is truncation; with allowTruncated it decodes as libjpeg does")
    func truncationWithAppendedMarker() throws {
        let jpeg = [UInt8](try Synthetic.jpeg(.init(width: 256, height: 256)))
        let cut = Data(jpeg[..<(jpeg.count * 2 / 3)] + [0xFF, 0xD9])
        let error = try #require(thrownError { try TileBuilder.build(data: cut) })
        #expect(error.code == .truncated)
        #expect(error.message.contains("premature end of data segment"))
        let builder = try TileBuilder(options: Self.options { $0.allowTruncated = true })
        try builder.append(cut)
        let image = try builder.finish()
        #expect(builder.warningCount >= 1)
        #expect(try image.pixels(level: 0) == Reference.decode(cut).image)
    }

    @Test("a damaged restart interval (data cut short by the next RST marker) stays a warning, decoded as libjpeg does")
    func damagedRestartIntervalIsNotTruncation() throws {
        let jpeg = [UInt8](try Synthetic.jpeg(.init(width: 128, height: 128, restartRows: 1)))
        let restarts = jpeg.indices.dropLast().filter { jpeg[$0] == 0xFF && (0xD0...0xD7).contains(jpeg[$0 + 1]) }
        #expect(restarts.count >= 4)
        // Drop the second half of the bytes between the 2nd and 3rd restart markers.
        let start = restarts[1] + 2, end = restarts[2]
        let damaged = Data(jpeg[..<(start + (end - start) / 2)] + jpeg[end...])
        let builder = try TileBuilder()
        try builder.append(damaged)
        let image = try builder.finish()
        #expect(builder.warningCount >= 1)
        #expect(try image.pixels(level: 0) == Reference.decode(damaged).image)
    }

    // MARK: 6. ICC chunks

    /// `jpeg` with `count` APP2 ICC chunks of `size` bytes inserted after SOI, numbered by `sequence`.
    static func withICCChunks(_ jpeg: Data, count: Int, size: Int, sequence: (Int) -> (Int, Int)) -> Data {
        var out = Data(jpeg.prefix(2))
        for index in 0..<count {
            let (number, total) = sequence(index)
            let payload =
                Array("ICC_PROFILE\0".utf8) + [UInt8(number), UInt8(total)]
                + [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: size)
            out.append(contentsOf: [0xFF, 0xE2, UInt8((payload.count + 2) >> 8), UInt8((payload.count + 2) & 255)])
            out.append(contentsOf: payload)
        }
        out.append(jpeg.dropFirst(2))
        return out
    }

    @Test("3000 repeated ICC chunks (196 MB of header) are walked once and give no profile")
    func iccChunkFlood() throws {
        // Before the walk was linear, `tiler info` took 40 s for 1200 such chunks and over a minute for 3000.
        let jpeg = try Synthetic.jpeg(.init(width: 64, height: 64))
        let flood = Self.withICCChunks(jpeg, count: 3000, size: 65_519) { _ in (1, 1) }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("icc-\(UUID().uuidString).jpg").path
        defer { unlink(path) }
        #expect(FileManager.default.createFile(atPath: path, contents: flood))
        let walked = Deadline.run(within: .seconds(60)) {
            (
                try ImageInfo.read(contentsOfFile: path), try ImageInfo.read(data: flood),
                try TileBuilder.build(contentsOfFile: path, chunkSize: 64 * 1024)
            )
        }
        let (info, fromData, image) = try #require(walked, "not done within 60 s").get()
        #expect(info.width == 64 && info.iccProfile == nil)
        #expect(fromData.iccProfile == nil)
        #expect(try image.pixels(level: 0) == Reference.decode(jpeg).image)
    }

    @Test("an ICC profile in 255 chunks, out of order and fed a byte at a time, is joined in sequence order")
    func iccProfileJoined() throws {
        let jpeg = try Synthetic.jpeg(.init(width: 16, height: 16))
        let data = Self.withICCChunks(jpeg, count: 255, size: 300) { index in ((index * 7) % 255 + 1, 255) }
        // The plain expectation: chunk n holds the byte of the index that got sequence n.
        var expected: [UInt8] = []
        for number in 1...255 {
            let index = (0..<255).first { ($0 * 7) % 255 + 1 == number }!
            expected += [UInt8](repeating: UInt8(index), count: 300)
        }
        #expect(try ImageInfo.read(data: data).iccProfile == expected)
        let builder = try TileBuilder()
        for byte in data { try builder.append([byte]) }
        _ = try builder.finish()
        #expect(builder.info?.iccProfile == expected)
    }

    // MARK: 7, 8. FIFOs

    /// Makes a FIFO and writes `data` into it from another thread once a reader opens it.
    static func fifo(with data: Data) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("fifo-\(UUID().uuidString)").path
        #expect(mkfifo(path, 0o600) == 0)
        Thread.detachNewThread {
            let fd = open(path, O_WRONLY | O_CLOEXEC)
            guard fd >= 0 else { return }
            data.withUnsafeBytes { raw in
                var done = 0
                while done < raw.count {
                    let n = write(fd, raw.baseAddress! + done, raw.count - done)
                    if n <= 0 { break }
                    done += n
                }
            }
            close(fd)
        }
        return path
    }

    @Test("a thumbnail of a FIFO reads it once")
    func thumbnailOfAFIFO() throws {
        let jpeg = try Synthetic.jpeg(.init(width: 200, height: 100))
        let path = try Self.fifo(with: jpeg)
        defer { unlink(path) }
        var options = ImageResizer.Options()
        options.returnsPixels = true
        let reading = Deadline.run(within: .seconds(60)) { [options] in
            try ImageResizer.resize(contentsOfFile: path, to: [.init(maxEdge: 50, path: nil)], options: options)
        }
        let fromFIFO = try #require(reading, "the FIFO's thumbnail not done within 60 s").get()
        let fromData = try ImageResizer.resize(data: jpeg, to: [.init(maxEdge: 50, path: nil)], options: options)
        #expect(fromFIFO.first?.pixels == fromData.first?.pixels)
        #expect(fromFIFO.first?.width == 50)
    }

    @Test("a thumbnail written over its own input is refused, also through a link, and the input is untouched")
    func thumbnailOverItsInput() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("same-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let jpeg = try Synthetic.jpeg(.init(width: 64, height: 64))
        #expect(FileManager.default.createFile(atPath: "\(folder)/same.jpg", contents: jpeg))
        #expect(symlink("\(folder)/same.jpg", "\(folder)/link.jpg") == 0)
        for output in ["\(folder)/same.jpg", "\(folder)/link.jpg"] {
            #expect(
                thrownCode { try ImageResizer.resize(contentsOfFile: "\(folder)/same.jpg", to: [.init(maxEdge: 32, path: output)]) }
                    == .invalidArgument)
        }
        #expect(FileManager.default.contents(atPath: "\(folder)/same.jpg") == jpeg)
    }

    @Test("a store whose level file was replaced by a FIFO fails cleanly instead of hanging")
    func storeWithAFIFO() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fifostore-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = "\(folder)/s.tiles"
        let image = try TileBuilder.build(
            data: try Synthetic.jpeg(.init(width: 600, height: 300)), options: Self.options { $0.storage = .persistent(path: store) })
        #expect(image.levelCount >= 2)
        #expect(unlink("\(store)/level-1.tiles") == 0 && mkfifo("\(store)/level-1.tiles", 0o600) == 0)
        let opened = try #require(Deadline.run(within: .seconds(60)) { try TiledImage.open(store: store) }, "hung on the FIFO")
        let error = try #require(thrownError { try opened.get() })
        #expect(error.code == .invalidStore)
        #expect(error.message.contains("level-1.tiles"))
        #expect(unlink("\(store)/manifest.json") == 0 && mkfifo("\(store)/manifest.json", 0o600) == 0)
        let again = try #require(Deadline.run(within: .seconds(60)) { try TiledImage.open(store: store) }, "hung on the FIFO")
        #expect(thrownCode { try again.get() } == .invalidStore)
    }

    // MARK: 12. Messages

    @Test(
        "a damaged store manifest is reported in one sentence naming the field",
        arguments: [
            ("orientation", "0", "orientation 0"), ("orientation", "9", "orientation 9"),
            ("storedWidth", "1800.5", "storedWidth` is not an integer"), ("tileSize", "\"x\"", "`tileSize` is not an integer"),
            ("sourceFingerprint", "12", "`sourceFingerprint` is not a string"), ("warningCount", "null", "`warningCount`")
        ])
    func manifestMessages(field: String, value: String, expected: String) throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("manifest-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = "\(folder)/s.tiles"
        _ = try TileBuilder.build(
            data: try Synthetic.jpeg(.init(width: 64, height: 64)), options: Self.options { $0.storage = .persistent(path: store) })
        let manifest = "\(store)/manifest.json"
        var text = try String(contentsOfFile: manifest, encoding: .utf8)
        let pattern = try Regex("\"\(field)\" : [^,\\n]+")
        text = text.replacing(pattern, with: "\"\(field)\" : \(value)")
        try text.write(toFile: manifest, atomically: true, encoding: .utf8)
        let error = try #require(thrownError { try TiledImage.open(store: store) })
        #expect(error.code == .invalidStore)
        #expect(error.message.contains(expected), "\(error.message)")
        #expect(!error.message.contains("DecodingError") && !error.message.contains("store format"))
    }

    @Test("empty input gives one code from TileBuilder, ImageInfo and ImageResizer")
    func emptyInput() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("empty-\(UUID().uuidString).jpg").path
        defer { unlink(path) }
        #expect(FileManager.default.createFile(atPath: path, contents: Data()))
        #expect(thrownCode { try TileBuilder.build(data: Data()) } == .truncated)
        #expect(thrownCode { try TileBuilder.build(contentsOfFile: path) } == .truncated)
        #expect(thrownCode { try ImageInfo.read(data: Data()) } == .truncated)
        #expect(thrownCode { try ImageInfo.read(contentsOfFile: path) } == .truncated)
        #expect(thrownCode { try ImageResizer.resize(contentsOfFile: path, to: [.init(maxEdge: 8, path: nil)]) } == .truncated)
    }

    @Test("a file error names its cause")
    func fileErrorsNameTheirCause() throws {
        let missing = try #require(thrownError { try TileBuilder.build(contentsOfFile: "/nonexistent/x.jpg") })
        #expect(missing.code == .io && missing.errno == ENOENT && missing.message.contains("No such file"))
        let folder = try #require(thrownError { try TileBuilder.build(contentsOfFile: "/tmp") })
        #expect(folder.code == .io && folder.errno == EISDIR)
    }
}
