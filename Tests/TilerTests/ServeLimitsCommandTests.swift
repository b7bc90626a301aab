import Foundation
import NIOConcurrencyHelpers
import Synchronization
import Testing
import TestSupport
import TestTraits
import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// `tiler serve` under a low descriptor limit (`ulimit -n 256`), attacked as the issue describes it:
/// connections until the server stops taking more, then 300 uploads that stall. The process stays up,
/// answers fresh clients afterwards, and gives back its descriptors, disk and memory.
@Suite("tiler serve at its limits", .serialized, .ownThreads)
struct ServeLimitsCommandTests {
    static func descriptors(_ pid: Int32) -> Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1 }

    /// A store of a 2048x1536 image in a new folder, and that image as a JPEG.
    static func folder() throws -> (String, Data) {
        let folder = try TilerCommandTests.folder()
        let jpeg = try DemoImage.jpeg(width: 2048, height: 1536)
        var options = BuildOptions()
        options.storage = .persistent(path: "\(folder)/kept.tiles")
        _ = try TileBuilder.build(data: jpeg, options: options)
        return (folder, jpeg)
    }

    /// Opens `count` connections on threads of their own (not Swift's cooperative pool), each sending
    /// `request`; returns them once all have sent.
    static func connect(_ count: Int, _ port: Int, _ request: Data) async -> [LoopbackConnection] {
        await withCheckedContinuation { continuation in
            Thread {
                let opened = (0..<count).compactMap { _ -> LoopbackConnection? in
                    guard let connection = try? LoopbackConnection(port: UInt16(port)) else { return nil }
                    try? connection.send(request)
                    return connection
                }
                continuation.resume(returning: opened)
            }.start()
        }
    }

    /// Asks again until the answer comes (a fresh client while the old ones are being closed).
    static func answered(_ port: Int, _ path: String, within seconds: Double = 20) -> Int {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let status = try? ServeCommandTests.request(port, "GET", path).status { return status }
            usleep(100_000)
        }
        return 0
    }

    @Test("connections past the descriptor budget wait; the process stays up, serves fresh clients after, and its descriptors go back")
    func connections() async throws {
        let (folder, _) = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let server = try ServeCommandTests.Server([folder, "--port", "0", "--idle-timeout", "3"], descriptors: 256)
        defer { if server.process.isRunning { kill(server.process.processIdentifier, SIGKILL) } }
        let (port, pid) = (server.port, server.process.processIdentifier)
        #expect(try ServeCommandTests.request(port, "GET", "/dzi/kept_files/11/0_0.jpg").status == 200)
        let baseline = Self.descriptors(pid)
        // 600 clients, each asking for a tile, never closing: more than 256 descriptors could hold.
        let request = Data("GET /dzi/kept_files/11/1_0.jpg HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        var clients = await Self.connect(600, port, request)
        var most = 0
        for _ in 0..<20 {
            most = max(most, Self.descriptors(pid))
            usleep(100_000)
        }
        #expect(server.process.isRunning, "the server died with \(clients.count) clients")
        #expect(most < 256, "the server had \(most) descriptors open under a limit of 256")
        clients = []  // closed: the server takes the waiting ones, answers them, and closes them idle
        #expect(Self.answered(port, "/health") == 200)
        #expect(Self.answered(port, "/dzi/kept_files/11/2_0.jpg") == 200)
        var after = Self.descriptors(pid)
        for _ in 0..<100 where after > baseline + 2 {
            usleep(100_000)
            after = Self.descriptors(pid)
        }
        #expect(after <= baseline + 2, "descriptors: \(baseline) before, \(most) at most, \(after) after")
        let log = server.errorsSoFar()
        #expect(log.contains("connection limit reached"), "\(log.suffix(500))")
        FileHandle.standardError.write(
            Data("descriptor budget: \(baseline) descriptors before, \(most) at most with 600 clients, \(after) after\n".utf8))
        #expect(server.terminate(within: 30)?.status == 0)
    }

    @Test("300 uploads that stall: refused past the uploads at once, the rest closed at the idle timeout; disk, memory and descriptors go back")
    func stalledUploads() async throws {
        let (folder, jpeg) = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let server = try ServeCommandTests.Server(
            [folder, "--port", "0", "--idle-timeout", "2", "--allow-uploads", "--upload-token", "t"], descriptors: 256)
        defer { if server.process.isRunning { kill(server.process.processIdentifier, SIGKILL) } }
        let (port, pid) = (server.port, server.process.processIdentifier)
        #expect(try ServeCommandTests.request(port, "GET", "/dzi/kept_files/11/0_0.jpg").status == 200)
        let (files, fds, rss) = (
            try FileManager.default.contentsOfDirectory(atPath: folder).sorted(), Self.descriptors(pid), ServeCommandTests.memory(pid, "VmRSS")
        )
        var clients: [LoopbackConnection] = []
        for i in 0..<300 {
            let head = "PUT /images/up\(i) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer t\r\nContent-Length: \(jpeg.count)\r\n\r\n"
            clients += await Self.connect(1, port, Data(head.utf8) + jpeg.prefix(jpeg.count / 3))
        }
        let (peakFDs, peakRSS) = (Self.descriptors(pid), ServeCommandTests.memory(pid, "VmHWM"))
        #expect(server.process.isRunning)
        // The idle timeout closes the stalled ones; the waiting ones are taken, then stall too, and are
        // closed in turn: until only the connection that asks is open.
        var open = (try? DeployTests.metric(port, "tiler_connections_open")) ?? -1
        for _ in 0..<600 where open != 1 {
            usleep(100_000)
            open = (try? DeployTests.metric(port, "tiler_connections_open")) ?? -1
        }
        #expect(open == 1, "connections still open: \(open)")
        clients = []
        #expect(Self.answered(port, "/health") == 200)
        var (nowFiles, nowFDs) = (try FileManager.default.contentsOfDirectory(atPath: folder).sorted(), Self.descriptors(pid))
        for _ in 0..<100 where nowFiles != files || nowFDs > fds + 2 {
            usleep(100_000)
            (nowFiles, nowFDs) = (try FileManager.default.contentsOfDirectory(atPath: folder).sorted(), Self.descriptors(pid))
        }
        let nowRSS = ServeCommandTests.memory(pid, "VmRSS")
        #expect(nowFiles == files, "left: \(nowFiles)")
        #expect(nowFDs <= fds + 2 && (Sanitizers.address || nowRSS < rss + 32), "descriptors \(fds) -> \(nowFDs), RSS \(rss) -> \(nowRSS) MiB")
        FileHandle.standardError.write(
            Data(
                "300 stalled uploads: descriptors \(fds), at most \(peakFDs), after \(nowFDs); RSS \(rss), peak \(peakRSS), after \(nowRSS) MiB\n"
                    .utf8))
        #expect(server.terminate(within: 30)?.status == 0)
    }

    @Test(
        "a source swapped for a symlink or a FIFO while requests run: no request hangs, the file outside is never served, SIGTERM ends the server within 2 s"
    )
    func swappedSources() async throws {
        let folder = try TilerCommandTests.folder(), outside = try TilerCommandTests.folder()
        defer { for f in [folder, outside] { try? FileManager.default.removeItem(atPath: f) } }
        let photo = try DemoImage.jpeg(width: 1200, height: 800)
        try photo.write(to: URL(fileURLWithPath: "\(folder)/photo.jpg"))
        try DemoImage.jpeg(width: 600, height: 400).write(to: URL(fileURLWithPath: "\(outside)/other.jpg"))
        let server = try ServeCommandTests.Server([folder, "--port", "0", "--idle-timeout", "5"])
        defer { if server.process.isRunning { kill(server.process.processIdentifier, SIGKILL) } }
        let port = server.port
        let results = NIOLockedValueBox<[(path: String, status: Int, seconds: Double, body: Data)]>([])
        let stop = Atomic<Bool>(false)
        let asking = Thread {
            var i = 0
            while !stop.load(ordering: .relaxed) {
                let path = ["/iiif/3/photo/info.json", "/dzi/photo_files/11/1_1.jpg", "/images/photo", "/iiif/3/photo/full/200,/0/default.jpg"][i % 4]
                let start = Date()
                let reply = try? ServeCommandTests.request(port, "GET", path)
                results.withLockedValue { $0.append((path, reply?.status ?? 0, Date().timeIntervalSince(start), reply?.body ?? Data())) }
                i += 1
            }
        }
        asking.start()
        let path = "\(folder)/photo.jpg"
        for round in 0..<15 {
            unlink(path)
            switch round % 3 {
            case 0: symlink("\(outside)/other.jpg", path)
            case 1: mkfifo(path, 0o644)
            default: try photo.write(to: URL(fileURLWithPath: path))
            }
            usleep(100_000)
        }
        stop.store(true, ordering: .relaxed)
        while !asking.isFinished { usleep(50_000) }
        let answers = results.withLockedValue { $0 }
        #expect(answers.count > 20, "\(answers.count) requests answered")
        #expect(answers.allSatisfy { $0.seconds < 10 }, "slowest \(answers.map(\.seconds).max() ?? 0) s")
        // (422: the master read while it was being written, or a FIFO: not an image this server reads.)
        #expect(answers.allSatisfy { [200, 404, 422, 500, 503].contains($0.status) }, "\(Set(answers.map(\.status)))")
        for answer in answers where answer.path.hasSuffix("info.json") && answer.status == 200 {
            let info = try JSONSerialization.jsonObject(with: answer.body) as? [String: Any]
            #expect(info?["width"] as? Int == 1200, "the file outside the folder was served: \(info ?? [:])")
        }
        let clock = ContinuousClock(), start = clock.now
        let ended = server.terminate(within: 10)
        #expect(ended?.status == 0 && clock.now - start < .seconds(2), "SIGTERM took \(clock.now - start): \(String(describing: ended))")
    }

    @Test(
        "a client pipelining 10,000 tile and region requests without reading the answers grows the server by less than 32 MiB; others are served meanwhile"
    )
    func pipelinedWithoutReading() throws {
        let folder = try TilerCommandTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var options = BuildOptions()
        options.storage = .persistent(path: "\(folder)/big.tiles")
        let jpeg = try DemoImage.jpeg(width: 4096, height: 3072)
        _ = try TileBuilder.build(data: jpeg, options: options)
        let server = try ServeCommandTests.Server([folder, "--port", "0", "--idle-timeout", "30"])
        defer { if server.process.isRunning { kill(server.process.processIdentifier, SIGKILL) } }
        let (port, pid) = (server.port, server.process.processIdentifier)
        // Warm: the cached tile, a render, the pages.
        #expect(try ServeCommandTests.request(port, "GET", "/dzi/big_files/12/0_0.jpg").status == 200)
        #expect(try ServeCommandTests.request(port, "GET", "/iiif/3/big/512,512,512,512/max/0/default.jpg").status == 200)
        let before = ServeCommandTests.memory(pid, "VmRSS")
        // 10,000 requests: a cached tile, tiles not encoded yet, 512-pixel regions not rendered yet. Under
        // AddressSanitizer (which skips the memory bound: its quarantine grows every heap) 1,500: the
        // server's renders of 10,000 would take both cores from every other test for minutes.
        var requests = ""
        for i in 0..<(Sanitizers.address ? 1_500 : 10_000) {
            let path: String
            switch i % 3 {
            case 0: path = "/dzi/big_files/12/0_0.jpg"
            case 1: path = "/dzi/big_files/12/\(i / 3 % 16)_\(i / 48 % 12).jpg"
            default: path = "/iiif/3/big/\(i % 7 * 256),\(i % 5 * 256),512,512/max/0/default.jpg"
            }
            requests += "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        }
        let attacker = try LoopbackConnection(port: UInt16(port))
        let payload = Data(requests.utf8)
        let sending = Thread { try? attacker.send(payload) }  // blocks once the server stops reading
        sending.start()
        // Until the server has stopped taking the attacker's requests (its answers are not read): the
        // count of image answers the same three times running, a tenth of a second apart.
        func answered() -> Double {
            let text = (try? DeployTests.get(port, "/metrics").body).map { String(decoding: $0, as: UTF8.self) } ?? ""
            return ServeCommandTests.samples(text).filter {
                $0.key.hasPrefix("tiler_requests_total{route=\"dzi_tile\"") || $0.key.hasPrefix("tiler_requests_total{route=\"iiif_image\"")
            }
            .values.reduce(0, +)
        }
        var counts = [answered()]
        for _ in 0..<600 where counts.count < 3 || Set(counts.suffix(3)).count > 1 || counts.last == 0 {
            usleep(100_000)
            counts.append(answered())
        }
        // Others are served meanwhile.
        #expect(try ServeCommandTests.request(port, "GET", "/iiif/3/big/info.json").status == 200)
        #expect(try ServeCommandTests.request(port, "GET", "/dzi/big_files/11/1_1.jpg").status == 200)
        let (after, peak) = (ServeCommandTests.memory(pid, "VmRSS"), ServeCommandTests.memory(pid, "VmHWM"))
        #expect(Sanitizers.address || peak - before < 32, "RSS \(before) MiB before, \(after) after, peak \(peak)")
        FileHandle.standardError.write(Data("pipelined without reading: RSS \(before) -> \(after) MiB, peak \(peak) MiB\n".utf8))
        attacker.shutDown()
        // The requests in flight are finished first: under AddressSanitizer, renders take several times longer.
        #expect(server.terminate(within: Sanitizers.address ? 120 : 30)?.status == 0)
    }
}
