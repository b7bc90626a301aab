import AsyncHTTPClient
import NIOCore
import Foundation
import NIOConcurrencyHelpers
import Testing
import TestTraits
import TileActors
import TestSupport
import TileCore
import TileNetwork

@Suite("HTTP image source (loopback)", .serialized, .ownThreads)
struct HTTPImageSourceTests {
    /// The client of the downloads that must succeed. The whole test run shares two cores with servers
    /// rendering beside it, and the test server's chunks (tasks on the cooperative pool) may pause longer
    /// than the shared client's 30 s idle-read timeout: under AddressSanitizer, and once in CI's plain
    /// `swift test` stage (a read timeout after 179 s of the export test), and past 180 s in a run of the
    /// whole suite beside two busy loops (2026-11-26). A client of the same defaults but a 600 s read
    /// timeout, always (these tests check what arrives, not how fast; the transfer's own limit is 10
    /// minutes).
    static let client = HTTPImageSource.makeClient(readTimeout: .seconds(600))

    static func jpeg() throws -> Data {
        var pixels = [UInt8](repeating: 255, count: 640 * 480 * 4)
        for i in stride(from: 0, to: pixels.count, by: 4) {
            pixels[i] = UInt8((i / 4) % 640 * 255 / 639)
            pixels[i + 1] = UInt8((i / 4) / 640 * 255 / 479)
            pixels[i + 2] = UInt8((i / 7) & 255)
        }
        return try JPEGEncoder.encode(pixels: pixels, width: 640, height: 480)
    }

    static func networkError(_ body: () async throws -> Void) async -> NetworkError? {
        do {
            try await body()
            return nil
        } catch {
            return error as? NetworkError
        }
    }

    @Test("a download exported as it arrives has the tiles of an export of the same bytes from memory")
    func downloadExport() async throws {
        let data = try Self.jpeg()
        let server = try await TestHTTPServer(data: data, chunkSize: 4096)
        defer { Task { await server.stop() } }
        let folder = NSTemporaryDirectory() + "net-export-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var options = ExportOptions()
        options.format = .png
        let exporter = try ImageExporter(name: "net", outputDirectory: folder, options: options)
        try await HTTPImageSource(url: server.url("/image"), client: Self.client).feed(into: exporter)
        let result = try await exporter.finish()
        #expect(result.width == 640 && result.height == 480 && result.levelCount == 11)
        let local = try TileExporter(name: "local", outputDirectory: folder, options: options)
        try local.append(data)
        _ = try local.finish()
        for level in 0..<11 {
            for name in try FileManager.default.contentsOfDirectory(atPath: "\(folder)/local_files/\(level)") {
                let a = FileManager.default.contents(atPath: "\(folder)/net_files/\(level)/\(name)")
                #expect(a != nil && a == FileManager.default.contents(atPath: "\(folder)/local_files/\(level)/\(name)"))
            }
        }
    }

    @Test("the tiles of a download equal a build of the same bytes; redirects are followed")
    func downloadMatchesFileBuild() async throws {
        let data = try Self.jpeg()
        let server = try await TestHTTPServer(data: data, chunkSize: 4096)
        defer { Task { await server.stop() } }
        let expected = try TileBuilder.build(data: data).allTiles()
        for path in ["/image", "/redirect"] {
            let builder = try ImageBuilder()
            try await HTTPImageSource(url: server.url(path), client: Self.client).feed(into: builder)
            #expect(try await builder.finish().allTiles() == expected, "\(path)")
        }
        await server.stop()
    }

    @Test(
        "a TIFF body (spooled to disk as it arrives, its directory last) builds the tiles of the same file",
        .enabled(if: Tools.have("pnmtotiff"), Comment(rawValue: Tools.missing("pnmtotiff"))))
    func downloadTIFF() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tiff-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var ppm = Data("P6\n300 200\n255\n".utf8)
        for y in 0..<200 { for x in 0..<300 { ppm += [UInt8(x % 256), UInt8(y), UInt8((x ^ y) & 255)] } }
        try ppm.write(to: URL(fileURLWithPath: "\(folder)/image.ppm"))
        let run = try Tools.run("pnmtotiff", ["-truecolor", "-lzw", "\(folder)/image.ppm"])
        try #require(run.status == 0, "\(run.stderr)")
        try run.stdout.write(to: URL(fileURLWithPath: "\(folder)/image.tif"))
        let expected = try TileBuilder.build(contentsOfFile: "\(folder)/image.tif").allTiles()
        let server = try await TestHTTPServer(data: run.stdout, chunkSize: 4096)
        defer { Task { await server.stop() } }
        let builder = try ImageBuilder()
        try await HTTPImageSource(url: server.url("/image"), client: Self.client).feed(into: builder)
        #expect(try await builder.finish().allTiles() == expected)
        #expect(await builder.info?.format == .tiff)
        await server.stop()
    }

    @Test("a download stops at the end-of-image marker: 32 MiB of bytes after the image are not fetched")
    func downloadStopsAtTheEndOfTheImage() async throws {
        let jpeg = try Self.jpeg()
        let server = try await TestHTTPServer(data: jpeg + Data(count: 32 << 20), chunkSize: 64 * 1024)
        defer { Task { await server.stop() } }
        let builder = try ImageBuilder()
        try await HTTPImageSource(url: server.url("/image"), client: Self.client).feed(into: builder)
        #expect(await builder.hasReachedEndOfImage)
        #expect(try await builder.finish().allTiles() == TileBuilder.build(data: jpeg).allTiles())
        #expect(server.bytesServed < 16 << 20, "\(server.bytesServed) bytes served")
        await server.stop()
    }

    @Test("onBodyPart reports each part as it arrives, growing to the Content-Length, before the build ends")
    func bodyPartsAreReported() async throws {
        let data = try Self.jpeg()
        let server = try await TestHTTPServer(data: data, chunkSize: 4096)
        let reports = NIOLockedValueBox<[(Int, Int?)]>([])
        var source = HTTPImageSource(url: server.url("/image"), client: Self.client)
        source.onBodyPart = { received, expected in reports.withLockedValue { $0.append((received, expected)) } }
        let builder = try ImageBuilder()
        try await source.feed(into: builder)
        _ = try await builder.finish()
        let seen = reports.withLockedValue { $0 }
        #expect(seen.count > 1)
        #expect(seen.allSatisfy { $0.1 == data.count })
        #expect(zip(seen, seen.dropFirst()).allSatisfy { $0.0 < $1.0 })
        #expect(seen.last?.0 == data.count)
        await server.stop()
    }

    @Test("decoding is under way while the body is still arriving")
    func decodesDuringDownload() async throws {
        let data = try Self.jpeg()
        let server = try await TestHTTPServer(data: data, chunkSize: 2048, delay: .zero)
        let builder = try ImageBuilder()
        let download = Task { try await HTTPImageSource(url: server.url("/gated"), client: Self.client).feed(into: builder) }
        var rowsBeforeLastChunk = 0
        for await progress in builder.progress where progress.rowsDecoded > 0 {
            rowsBeforeLastChunk = progress.rowsDecoded
            break
        }
        #expect(!server.gate.isOpen)  // the last chunk has not been sent yet
        server.gate.open()
        try await download.value
        _ = try await builder.finish()
        #expect(rowsBeforeLastChunk > 0)
        await server.stop()
    }

    @Test("a refused connection fails at once as .connection with the cause in words")
    func refusedConnection() async throws {
        let builder = try ImageBuilder()
        let error = await Self.networkError { try await HTTPImageSource(url: "http://127.0.0.1:1/x.jpg").feed(into: builder) }
        #expect(error?.code == .connection)
        #expect(error?.cause == "Connection refused")
        #expect(error?.description == "http://127.0.0.1:1/x.jpg: cannot connect: Connection refused")
    }

    @Test("404 and 500 fail with their status codes")
    func statusCodes() async throws {
        let server = try await TestHTTPServer(data: try Self.jpeg())
        for (path, status) in [("/404", 404), ("/500", 500)] {
            let builder = try ImageBuilder()
            let error = await Self.networkError { try await HTTPImageSource(url: server.url(path)).feed(into: builder) }
            #expect(error?.code == .httpStatus && error?.status == status)
        }
        await server.stop()
    }

    @Test(
        "a body shorter than its Content-Length, or a dropped connection, is truncated and leaves no file",
        arguments: ["/short-length", "/drop"])
    func truncatedBodies(path: String) async throws {
        let data = try Self.jpeg()
        let server = try await TestHTTPServer(data: data, chunkSize: 4096)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("net-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        var options = BuildOptions()
        options.storage = .persistent(path: folder.appendingPathComponent("x.tiles").path)
        let fixed = options
        let report = await ImageLoader().load([HTTPImageSource(url: server.url(path), client: Self.client)]) { _ in fixed }
        guard case .failure(let error) = report.images[0].result else {
            Issue.record("a truncated body built an image")
            return
        }
        #expect(error.code == .truncated)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty)
        await server.stop()
    }

    @Test("cancelling mid-download stops the transfer and removes the files")
    func cancellation() async throws {
        let data = try Self.jpeg()
        let server = try await TestHTTPServer(data: data, chunkSize: 512, delay: .milliseconds(5))
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("net-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        var options = BuildOptions()
        options.storage = .persistent(path: folder.appendingPathComponent("x.tiles").path)
        let builder = try ImageBuilder(options: options)
        let task = Task { try await HTTPImageSource(url: server.url("/image"), client: Self.client).feed(into: builder) }
        for await progress in builder.progress where progress.bytesReceived > 4096 { break }
        task.cancel()
        _ = try? await task.value
        await builder.cancel()
        // The server's handler ends when a write to the closed connection fails: the transfer stopped
        // short of the image.
        var servedAtEnd = 0
        for await served in server.connectionsEnded {
            servedAtEnd = served
            break
        }
        #expect(servedAtEnd < data.count)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty)
        await server.stop()
    }
}
