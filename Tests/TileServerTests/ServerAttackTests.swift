import Foundation
import Logging
import NIOConcurrencyHelpers
import Testing
import TestSupport
import TileActors
import TileCore
@testable import TileServer

/// The attacks of issue 37 that a plain socket can make, each answered as HTTP says it must be:
/// `Host` values that smuggle another host, duplicate `Host`s, errors that caches would keep, dates
/// from the future, a relative folder's uploads, a cache folder that is the folder served.
@Suite("Server under attack", .serialized)
struct ServerAttackTests {
    static func send(_ port: UInt16, _ head: String, body: Data = Data()) async throws -> (status: Int, headers: [String: String], body: Data) {
        try await RequestGuardTests.send(port, head, body: body)
    }

    @Test("a Host that is not a host and a port of digits is 400, on the routes and on cached tiles; two Hosts are 400")
    func hostSyntax() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // Any name is allowed (no allowed hosts): what is refused is the syntax alone.
        let catalog = try ImageCatalog(root: folder, cache: "\(folder)/.cache")
        var server = TileServer(catalog: catalog)
        server.requestGuard = RequestGuard(allowedHosts: nil)
        try await TileServerTests.withServer(server) { base, _ in
            let port = UInt16(base.split(separator: ":").last!)!
            let tile = "/dzi/kept_files/11/0_0.jpg"
            for path in [tile, "/iiif/3/kept/info.json", "/iiif/3/kept"] {
                // Twice: the second time the tile is cached, answered right after NIO's decoder.
                for _ in 0..<2 {
                    for host in [
                        "localhost:80@evil.example", "evil.example/x", "a b", "localhost:8o", "localhost:123456", "localhost:65536", "[::1",
                        "[zz]:80", "[::1/0]", "[::1%25lo]:80"
                    ] {
                        let reply = try await Self.send(port, "GET \(path) HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n")
                        #expect(reply.status == 400, "\(path) \(host): \(reply.status)")
                    }
                    let two = try await Self.send(port, "GET \(path) HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
                    #expect(two.status == 400, "\(path) two Hosts: \(two.status)")
                    for host in ["localhost", "images.example.org:8080", "[::1]:\(port)", "127.0.0.1", "under_score.example"] {
                        let reply = try await Self.send(port, "GET \(path) HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n")
                        #expect([200, 303].contains(reply.status), "\(path) \(host): \(reply.status)")
                    }
                }
            }
            // The host smuggled in never reaches an id or a Location.
            let info = try await Self.send(port, "GET /iiif/3/kept/info.json HTTP/1.1\r\nHost: images.example.org:8080\r\nConnection: close\r\n\r\n")
            #expect(String(decoding: info.body, as: UTF8.self).contains("\"id\":\"http://images.example.org:8080/iiif/3/kept\""))
        }
    }

    @Test("errors carry Cache-Control: no-store (a cache in front must not keep a new image's 404)")
    func errorsAreNotStored() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await TileServerTests.withServer(folder) { base, _ in
            let port = UInt16(base.split(separator: ":").last!)!
            for path in [
                "/iiif/3/absent/info.json", "/iiif/3/absent/full/max/0/default.jpg", "/dzi/absent.dzi", "/no/such/route",
                "/iiif/3/kept/full/max/0/default.xyz"
            ] {
                let reply = try await Self.send(port, "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                #expect(reply.status >= 400, "\(path): \(reply.status)")
                #expect(reply.headers["cache-control"] == "no-store", "\(path): \(reply.headers)")
            }
            let ok = try await Self.send(port, "GET /iiif/3/kept/info.json HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            #expect(ok.status == 200 && ok.headers["cache-control"]?.hasPrefix("public, max-age=") == true)
        }
    }

    @Test("If-Modified-Since later than the server's clock is ignored (200); a date after Last-Modified and before now is 304")
    func futureIfModifiedSince() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // The store dated two hours ago (its change time stays now).
        let made = Date().addingTimeInterval(-7200)
        for name in try FileManager.default.contentsOfDirectory(atPath: "\(folder)/kept.tiles") + [""] {
            try FileManager.default.setAttributes([.modificationDate: made], ofItemAtPath: "\(folder)/kept.tiles/\(name)")
        }
        try await TileServerTests.withServer(folder) { base, _ in
            let port = UInt16(base.split(separator: ":").last!)!
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
            let future = formatter.string(from: Date().addingTimeInterval(86_400 * 365))
            for path in ["/iiif/3/kept/info.json", "/iiif/3/kept/0,0,256,256/256,/0/default.jpg"] {
                let first = try await Self.send(port, "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                #expect(first.status == 200 && first.headers["last-modified"] != nil)
                // Last-Modified is when the store was written here (its change time, now-ish, not its
                // modification time): a date between it and the clock, once the clock is 2 s past it.
                let modified = try #require(first.headers["last-modified"].flatMap(HTTPDate.parse))
                while Date() < modified.addingTimeInterval(2) { try await Task.sleep(for: .milliseconds(10)) }
                let recent = formatter.string(from: modified.addingTimeInterval(1))
                let ahead = try await Self.send(
                    port, "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-Modified-Since: \(future)\r\nConnection: close\r\n\r\n")
                #expect(ahead.status == 200, "\(path) since \(future): \(ahead.status)")
                let since = try await Self.send(
                    port, "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-Modified-Since: \(recent)\r\nConnection: close\r\n\r\n")
                #expect(since.status == 304, "\(path) since \(recent): \(since.status)")
            }
        }
    }

    @Test("info.json and the 303 to it vary on the forwarded headers that name the URL in them")
    func forwardedVary() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await TileServerTests.withServer(folder) { base, _ in
            let port = UInt16(base.split(separator: ":").last!)!
            for path in ["/iiif/3/kept/info.json", "/iiif/2/kept/info.json", "/iiif/3/kept"] {
                let reply = try await Self.send(port, "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                let vary = Set((reply.headers["vary"] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() })
                #expect(vary.isSuperset(of: ["forwarded", "x-forwarded-host", "x-forwarded-proto", "x-forwarded-prefix"]), "\(path): \(vary)")
            }
        }
    }

    @Test("a server of a relative folder takes uploads (201); a complete upload left under its private name is removed at start")
    func relativeFolder() async throws {
        let (folder, jpeg) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // A leftover: an upload's store published under its private name by a server that stopped before
        // renaming it; and one that a server still has open (held shared), which stays.
        var options = BuildOptions()
        options.storage = .persistent(path: "\(folder)/.upload-left-42.tiles")
        _ = try TileBuilder.build(data: jpeg, options: options)
        options.storage = .persistent(path: "\(folder)/.upload-open-43.tiles")
        _ = try TileBuilder.build(data: jpeg, options: options)
        let open = try TiledImage.open(store: "\(folder)/.upload-open-43.tiles")
        // The folder as a path relative to the working folder, as `tiler serve images` names it.
        let working = FileManager.default.currentDirectoryPath.split(separator: "/").count
        let relative = String(repeating: "../", count: working) + folder.drop { $0 == "/" }
        #expect(!relative.hasPrefix("/"))
        let catalog = try ImageCatalog(root: relative, cache: relative + "/.cache")
        #expect(catalog.root == folder || catalog.root.hasSuffix(String(folder.split(separator: "/").last!)))
        let names = try FileManager.default.contentsOfDirectory(atPath: folder)
        #expect(!names.contains(".upload-left-42.tiles") && names.contains(".upload-open-43.tiles"), "\(names)")
        withExtendedLifetime(open) {}
        try await TileServerTests.withServer(TileServer(catalog: catalog, uploads: UploadPolicy(token: "t"))) { base, _ in
            let port = UInt16(base.split(separator: ":").last!)!
            let head =
                "PUT /images/up HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer t\r\nContent-Length: \(jpeg.count)\r\nConnection: close\r\n\r\n"
            let reply = try await Self.send(port, head, body: jpeg)
            #expect(reply.status == 201, "\(reply.status) \(String(decoding: reply.body, as: UTF8.self))")
            let info = try await Self.send(port, "GET /iiif/3/up/info.json HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            #expect(info.status == 200)
        }
        let after = try FileManager.default.contentsOfDirectory(atPath: folder)
        #expect(after.contains("up.tiles") && !after.contains { $0.hasPrefix(".upload-up-") }, "\(after)")
    }

    @Test("a cache folder that is the folder served, or a visible folder inside it, is refused; a hidden one and one outside are taken")
    func cacheFolderApart() throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let outside = NSTemporaryDirectory() + "tile-cache-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: outside) }
        for cache in [folder, folder + "/", folder + "/stores", folder + "/stores/deeper", folder + "/./"] {
            #expect(thrownCode { try ImageCatalog(root: folder, cache: cache) } == .invalidArgument, "\(cache)")
        }
        for cache in [folder + "/.tiler-cache", folder + "/.c/inner", outside] {
            #expect(thrownCode { try ImageCatalog(root: folder, cache: cache) } == nil, "\(cache)")
        }
        // The hand-made store in the folder is still there.
        #expect(FileManager.default.fileExists(atPath: "\(folder)/kept.tiles"))
    }

    @Test("a failed build is logged with its id and reason; the same version is tried again only after a delay that doubles")
    func failedBuildsBackOff() async throws {
        let (folder, jpeg) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try jpeg.prefix(jpeg.count / 2).write(to: URL(fileURLWithPath: "\(folder)/bad.jpg"))
        let records = NIOLockedValueBox<[(message: String, metadata: Logger.Metadata)]>([])
        let logger = Logger(label: "test") { _ in RecordingLogHandler(records: records) }
        // No delay: each lookup tries again, and each failure counts one more attempt.
        let catalog = try ImageCatalog(
            root: folder, cache: "\(folder)/.cache", retryInterval: .zero, logger: logger)
        let catalogService = catalog.started()
        defer { catalogService.cancel() }
        for attempt in 1...3 {
            _ = try? await catalog.image("bad")  // the header is read: the image, while its build goes on
            // Until the build has ended and its failure is recorded (a state, waited for).
            let deadline = ContinuousClock.now + .seconds(120)
            var failure = await catalog.failure(of: "bad")
            while (failure?.attempts ?? 0) < attempt, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(10))
                failure = await catalog.failure(of: "bad")
            }
            let failed = try #require(failure, "attempt \(attempt)")
            #expect(failed.error.code == .truncated && failed.attempts == attempt)
        }
        let failures = records.withLockedValue { $0 }.filter { $0.message == "build failed" }
        #expect(failures.map { $0.metadata["attempts"]?.description } == ["1", "2", "3"])
        #expect(failures.allSatisfy { $0.metadata["id"]?.description == "bad" && $0.metadata["error"] != nil })
        // The delays, written plainly: 60 s, doubled with each failure, at most 64 times 60 s.
        let minute = try ImageCatalog(root: folder, cache: "\(folder)/.cache")
        let minuteService = minute.started()
        defer { minuteService.cancel() }
        let delays = (1...9).map { minute.retryDelay(afterAttempts: $0) }
        #expect(delays == [60, 120, 240, 480, 960, 1920, 3840, 3840, 3840].map { Duration.seconds($0) })
    }

    @Test("a request whose client hangs up while it waits for rows of an upload is given up at once (499), not at the wait's limit")
    func hangUpEndsTheWait() async throws {
        let (folder, jpeg) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let catalog = try ImageCatalog(root: folder, cache: "\(folder)/.cache")
        // A wait for rows, and an idle timeout (which would end the stalled upload, and so the wait),
        // far longer than the test waits for the answer: only the hang-up ends the wait in time.
        var server = TileServer(service: TileService(catalog: catalog, waitLimit: .seconds(3600)), uploads: UploadPolicy(token: "t"))
        server.idleTimeout = .seconds(3600)
        try await TileServerTests.withServer(server) { base, client in
            let port = UInt16(base.split(separator: ":").last!)!
            // An upload of the photo that stops half-way: its last rows are never written.
            let upload = try LoopbackConnection(port: port)
            defer { upload.shutDown() }
            let head = "PUT /images/up HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer t\r\nContent-Length: \(jpeg.count)\r\n\r\n"
            try upload.send(Data(head.utf8) + jpeg.prefix(jpeg.count / 2))
            let received = "\"bytesReceived\":\(jpeg.count / 2)"
            var state = ""
            let deadline = ContinuousClock.now + .seconds(60)
            while !(state.contains("\"building\"") && state.contains(received)), ContinuousClock.now < deadline {
                state = String(decoding: try await TileServerTests.get(client, "\(base)/images/up").body, as: UTF8.self)
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(state.contains(received), "\(state)")
            // The photo's last rows asked for (kept alive), then the client's side closed.
            let asking = try LoopbackConnection(port: port)
            try asking.send(Data("GET /iiif/3/up/0,850,256,50/256,/0/default.jpg HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
            asking.shutDownWrites()
            let reply = await LoopbackConnection.onOwnThread {
                asking.read(timeout: LoopbackConnection.answerTimeout) { $0.range(of: Data("\r\n\r\n".utf8)) != nil }
            }
            #expect(String(decoding: reply.bytes.prefix(12), as: UTF8.self) == "HTTP/1.1 499", "\(String(decoding: reply.bytes, as: UTF8.self))")
        }
    }

}

/// Keeps what is logged, for tests to read.
struct RecordingLogHandler: LogHandler {
    let records: NIOLockedValueBox<[(message: String, metadata: Logger.Metadata)]>
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        records.withLockedValue { $0.append((event.message.description, self.metadata.merging(event.metadata ?? [:]) { $1 })) }
    }
}
