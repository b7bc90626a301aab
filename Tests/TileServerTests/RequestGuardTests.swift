import Foundation
import Testing
import TestSupport
import TileCore
@testable import TileServer

/// What a server on a loopback address accepts of a request, written by hand on plain sockets: `Host`
/// names (DNS rebinding), changes from other origins' pages, CORS preflights, the upload token in any
/// case of its scheme, `Expect: 100-continue` answered after the checks, the disk budget counted before
/// an upload's store is written, names never taken over, `nosniff` everywhere.
@Suite("Request guard", .serialized)
struct RequestGuardTests {
    /// A server over `folder` as `tiler serve --allow-uploads --upload-token t` on 127.0.0.1 runs it.
    static func withGuardedServer(
        _ folder: String, budget: Int? = nil, maximumUploads: Int = 8, _ body: (UInt16) async throws -> Void
    ) async throws {
        let catalog = try ImageCatalog(
            root: folder, cache: "\(folder)/.cache", maximumUploads: maximumUploads, cacheByteBudget: budget)
        var server = TileServer(catalog: catalog, uploads: UploadPolicy(token: "t"))
        server.requestGuard = .defaults(bind: "127.0.0.1")
        try await TileServerTests.withServer(server) { base, _ in try await body(UInt16(base.split(separator: ":").last!)!) }
    }

    /// One request (and `body`) on a connection of its own; the first answer (a `100 Continue` is one).
    static func send(_ port: UInt16, _ head: String, body: Data = Data(), timeout: Duration = LoopbackConnection.answerTimeout) async throws
        -> (status: Int, headers: [String: String], body: Data)
    {
        let (answers, _) = try await PipeliningTests.exchange(port, [head], timeout: timeout, body: body)
        return answers.first ?? (0, [:], Data())
    }

    @Test("a Host the server does not answer for is refused (421, naming --allowed-host), on cached tiles too; loopback names pass")
    func hosts() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await Self.withGuardedServer(folder) { port in
            let tile = "/dzi/kept_files/11/0_0.jpg"
            for host in ["127.0.0.1:\(port)", "localhost:\(port)", "[::1]:\(port)", "LOCALHOST"] {
                let reply = try await Self.send(port, "GET \(tile) HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n")
                #expect(reply.status == 200, "\(host)")
                #expect(reply.headers["x-content-type-options"] == "nosniff")
            }
            // Twice: the second time the tile is cached, answered right after NIO's decoder.
            for _ in 0..<2 {
                for host in ["evil.example", "evil.example:\(port)", "127.0.0.1.evil.example", ""] {
                    let reply = try await Self.send(port, "GET \(tile) HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n")
                    #expect(reply.status == 421, "\(host): \(reply.status)")
                    #expect(String(decoding: reply.body, as: UTF8.self).contains("--allowed-host"), "the answer names the flag that fixes it")
                }
            }
        }
    }

    @Test("changes from another origin's page are refused; CORS lets other origins read, not upload")
    func origins() async throws {
        let (folder, jpeg) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await Self.withGuardedServer(folder) { port in
            let put =
                "PUT /images/x HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nAuthorization: Bearer t\r\nContent-Length: \(jpeg.count)\r\nConnection: close\r\n"
            for origin in ["https://evil.example", "null", "http://127.0.0.1:1"] {
                #expect(try await Self.send(port, put + "Origin: \(origin)\r\n\r\n", body: jpeg).status == 403, "\(origin)")
            }
            #expect(try await Self.send(port, put + "Sec-Fetch-Site: cross-site\r\n\r\n", body: jpeg).status == 403)
            #expect(!FileManager.default.fileExists(atPath: "\(folder)/x.tiles"))
            // The server's own page may upload.
            #expect(try await Self.send(port, put + "Origin: http://127.0.0.1:\(port)\r\n\r\n", body: jpeg).status == 201)
            let preflight = "OPTIONS /images/y HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nOrigin: https://evil.example\r\nConnection: close\r\n"
            let upload = try await Self.send(port, preflight + "Access-Control-Request-Method: PUT\r\n\r\n")
            #expect(upload.status == 403 && upload.headers["access-control-allow-origin"] == nil)
            let read = try await Self.send(port, preflight + "Access-Control-Request-Method: GET\r\n\r\n")
            #expect(read.status == 204 && read.headers["access-control-allow-origin"] == "*")
            #expect(read.headers["access-control-allow-methods"]?.contains("PUT") == false)
        }
    }

    @Test("the token's scheme in any case; Expect: 100-continue answered once the checks pass, never before a refusal")
    func tokenAndContinue() async throws {
        let (folder, jpeg) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await Self.withGuardedServer(folder) { port in
            func head(_ name: String, _ authorization: String) -> String {
                "PUT /images/\(name) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: \(authorization)\r\nContent-Length: \(jpeg.count)\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n"
            }
            // Only the head: a server that checks first says 100 (or refuses) without waiting for the body.
            let waiting = try await PipeliningTests.exchange(port, [head("a", "bearer t")], answers: 1, grace: .zero).answers.first?.status
            #expect(waiting == 100)
            let refused = try await PipeliningTests.exchange(port, [head("b", "Bearer wrong")], answers: 1, grace: .zero).answers.first?.status
            #expect(refused == 401)
            let taken = try await PipeliningTests.exchange(port, [head("photo", "BEARER t")], answers: 1, grace: .zero).answers.first?.status
            #expect(taken == 409)
            let (answers, _) = try await PipeliningTests.exchange(port, [head("c", "bEaReR t")], body: jpeg)
            #expect(answers.map(\.status) == [100, 201], "\(answers.map(\.status))")
        }
    }

    @Test("an upload never takes over a name in use: a file, a symlink or a folder at its name is 409 and left as it was")
    func namesInUse() async throws {
        let (folder, jpeg) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try Data("mine".utf8).write(to: URL(fileURLWithPath: "\(folder)/plain.tiles"))
        try FileManager.default.createSymbolicLink(atPath: "\(folder)/link.tiles", withDestinationPath: "\(folder)/plain.tiles")
        try FileManager.default.createDirectory(atPath: "\(folder)/empty.tiles", withIntermediateDirectories: false)
        try await Self.withGuardedServer(folder) { port in
            for name in ["plain", "link", "empty", "kept", "photo"] {
                let head =
                    "PUT /images/\(name) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer t\r\nContent-Length: \(jpeg.count)\r\nConnection: close\r\n\r\n"
                let status = try await Self.send(port, head, body: jpeg).status
                #expect(status == 409, "\(name)")
            }
        }
        #expect(try String(contentsOfFile: "\(folder)/plain.tiles", encoding: .utf8) == "mine")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: "\(folder)/link.tiles") == "\(folder)/plain.tiles")
        #expect(try FileManager.default.contentsOfDirectory(atPath: "\(folder)/empty.tiles").isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasPrefix(".") && $0 != ".cache" } == [])
    }

    @Test("uploads past the disk budget are refused (507) before their stores are written; the budget holds over 100 uploads")
    func budget() async throws {
        let folder = try ServerLimitsTests.folder([:])
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let jpeg = try JPEGEncoder.encode(pixels: Synthetic.smooth(width: 300, height: 200), width: 300, height: 200)
        // Each store: levels of 300x200 (two 256-pixel tiles) and 150x100 (one): 3 tiles of 256 KiB.
        let store = 3 * 256 * 256 * 4, budget = 10 * store + store / 2
        try await Self.withGuardedServer(folder, budget: budget) { port in
            var statuses: [Int] = []
            var others: [String] = []  // what an answer other than 201 or 507 said
            for i in 0..<110 {
                let head =
                    "PUT /images/u\(i) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer t\r\nContent-Length: \(jpeg.count)\r\nConnection: close\r\n\r\n"
                let reply = try await Self.send(port, head, body: jpeg)
                statuses.append(reply.status)
                if reply.status == 507 { #expect(String(decoding: reply.body, as: UTF8.self).contains("disk budget")) }
                if reply.status != 201, reply.status != 507 { others.append("u\(i): \(reply.status) \(String(decoding: reply.body, as: UTF8.self))") }
            }
            #expect(statuses.prefix(10).allSatisfy { $0 == 201 } && statuses.dropFirst(10).allSatisfy { $0 == 507 }, "\(statuses) \(others)")
        }
        // What is on disk: ten stores, within the budget; nothing of the refused ones.
        let names = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0 != ".cache" }
        #expect(names.count == 10 && names.allSatisfy { $0.hasSuffix(".tiles") }, "\(names)")
        var used = 0
        for name in names {
            for file in try FileManager.default.contentsOfDirectory(atPath: "\(folder)/\(name)") {
                used += FileFacts.diskBytes("\(folder)/\(name)/\(file)")
            }
        }
        #expect(used <= budget, "\(used) bytes on disk for a budget of \(budget)")
    }

    @Test("past the uploads at once, one more is 503 with Retry-After")
    func busy() async throws {
        let (folder, jpeg) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await Self.withGuardedServer(folder, maximumUploads: 1) { port in
            let head = "PUT /images/slow HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer t\r\nContent-Length: \(jpeg.count)\r\n\r\n"
            let slow = try LoopbackConnection(port: port)
            try slow.send(Data(head.utf8) + jpeg.prefix(1000))
            // The first upload's build has begun once the image is listed (its state), however slow the machine.
            let deadline = ContinuousClock.now + .seconds(60)
            while try await Self.send(port, "GET /images/slow HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").status != 200,
                ContinuousClock.now < deadline
            {
                try await Task.sleep(for: .milliseconds(20))
            }
            let other =
                "PUT /images/other HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer t\r\nContent-Length: \(jpeg.count)\r\nConnection: close\r\n\r\n"
            let reply = try await Self.send(port, other, body: jpeg)
            #expect(reply.status == 503 && reply.headers["retry-after"] != nil)
            slow.shutDown()
        }
    }

    @Test("the viewer and the listing carry a restrictive Content-Security-Policy; every answer carries nosniff")
    func pageHeaders() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await Self.withGuardedServer(folder) { port in
            for path in ["/view/photo", "/"] {
                let reply = try await Self.send(port, "GET \(path) HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                let policy = reply.headers["content-security-policy"] ?? ""
                #expect(
                    reply.status == 200 && policy.contains("default-src 'none'") && policy.contains("frame-ancestors 'none'"), "\(path): \(policy)")
                // The page's own script and style run under the policy's nonce.
                let nonce = policy.split(separator: "'").first { $0.hasPrefix("nonce-") }.map { String($0.dropFirst(6)) } ?? "-"
                let html = String(decoding: reply.body, as: UTF8.self)
                #expect(!html.contains("<script>") && (path == "/" || html.contains("<script nonce=\"\(nonce)\">")), "\(path)")
            }
            for path in ["/images/photo", "/iiif/3/photo/info.json", "/health", "/nothing"] {
                let reply = try await Self.send(port, "GET \(path) HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                #expect(reply.headers["x-content-type-options"] == "nosniff", "\(path)")
            }
        }
    }
}
