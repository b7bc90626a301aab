import Foundation
import Testing
import TestSupport
import TileCore

#if canImport(Glibc)
import Glibc
#endif

extension ServeCommandTests {
    /// Starts the build of `photo` (its `info.json`) and waits until `/images/photo` says it is ready
    /// (30 s at most).
    static func buildPhoto(_ port: Int) throws {
        #expect(try request(port, "GET", "/iiif/3/photo/info.json").status == 200)
        var state = ""
        for _ in 0..<1500 where !state.contains("\"state\":\"ready\"") {
            state = String(decoding: try request(port, "GET", "/images/photo").body, as: UTF8.self)
            usleep(20_000)
        }
        #expect(state.contains("\"state\":\"ready\""), "\(state)")
    }

    /// A client that pipelines far more requests than the server holds for one connection (64) and does
    /// not read: the answers fill the sockets' buffers, the rest wait with the application up to the bound,
    /// and the connection is cut after their answers. The scrape must show that cut, once.
    @Test("a connection cut for pipelining past the bound is counted once in /metrics (tiler_connections_cut_total)")
    func pipeliningCutCounted() throws {
        let folder = try TilerCommandTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try DemoImage.jpeg(width: 700, height: 500).write(to: URL(fileURLWithPath: "\(folder)/photo.jpg"))
        let server = try Server([folder, "--port", "0"])
        defer { if server.process.isRunning { kill(server.process.processIdentifier, SIGKILL) } }
        let port = server.port
        try Self.buildPhoto(port)
        // A large answer (the whole image as a PNG), cached by its first request.
        let path = "/iiif/3/photo/full/max/0/default.png"
        let image = try Self.request(port, "GET", path)
        #expect(image.status == 200 && image.body.count > 100_000, "\(image.status), \(image.body.count) B")
        func cuts() throws -> Double {
            Self.samples(String(decoding: try Self.request(port, "GET", "/metrics").body, as: UTF8.self))["tiler_connections_cut_total"] ?? 0
        }
        let before = try cuts()
        let connection = try LoopbackConnection(port: UInt16(port))
        let requests = [String](repeating: "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n", count: 1000)
        try connection.send(Data(requests.joined().utf8))
        let (bytes, closed) = connection.read(timeout: LoopbackConnection.answerTimeout)
        let answers = bytes.ranges(of: Data("HTTP/1.1 200 OK\r\n".utf8)).count
        #expect(closed && answers >= 64 && answers < requests.count, "closed: \(closed), \(answers) answers")
        #expect(try cuts() == before + 1)
    }
}
