import Foundation
import NIOConcurrencyHelpers
import Testing
import TestSupport
import TestTraits
import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// Random request sequences against `tiler serve` (a fixed seed, so a failure replays): valid requests,
/// malformed heads, several pipelined on one connection, the bytes split at random boundaries, some
/// stalled mid-body. Each answer must be the one its request gets alone (asked first, as the
/// reference), in order, at most once; nothing after a malformed head; the server stays up, its memory
/// and descriptors bounded.
@Suite("tiler serve under random request sequences", .serialized, .ownThreads)
struct ServeFuzzCommandTests {
    struct Answer: Equatable {
        var status: Int
        var length: Int
        var etag: String?
    }

    static func answer(_ answer: HTTPAnswers.Answer) -> Answer {
        Answer(status: answer.status, length: answer.body.count, etag: answer.headers["etag"])
    }

    @Test("1,000 random sequences: each answer is its request's, in order, at most once; the server stays up and bounded")
    func sequences() async throws {
        let folder = try TilerCommandTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var options = BuildOptions()
        options.storage = .persistent(path: "\(folder)/kept.tiles")
        _ = try TileBuilder.build(data: try DemoImage.jpeg(width: 1500, height: 1000), options: options)
        let server = try ServeCommandTests.Server([folder, "--port", "0", "--idle-timeout", "2", "--allow-uploads", "--upload-token", "t"])
        defer { if server.process.isRunning { kill(server.process.processIdentifier, SIGKILL) } }
        let (port, pid) = (server.port, server.process.processIdentifier)
        let valid = [
            "GET /dzi/kept_files/11/0_0.jpg", "GET /dzi/kept_files/11/5_3.jpg", "HEAD /dzi/kept_files/10/1_1.jpg", "GET /iiif/3/kept/info.json",
            "GET /iiif/3/kept/256,256,512,512/256,/0/default.jpg", "GET /iiif/3/kept/full/100,/0/gray.png", "GET /health", "GET /images/kept",
            "GET /nothing", "GET /iiif/3/kept/bogus/max/0/default.jpg", "GET /dzi/kept_files/99/0_0.jpg", "HEAD /iiif/3/kept/info.json"
        ].map { $0 + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" }
        let malformed = [
            "FROB / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: +0\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", "GET / HTTP/1.1\r\nBad Name: 1\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: 127.0.0.1\u{0}\r\n\r\n", "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"
        ]
        // The reference: each valid request alone, on a connection of its own (its variable fields
        // aside: Date, and an ETag's value is kept, since it must not change).
        var reference: [Answer] = []
        for request in valid {
            let connection = try LoopbackConnection(port: UInt16(port))
            try connection.send(Data(request.replacingOccurrences(of: "\r\n\r\n", with: "\r\nConnection: close\r\n\r\n").utf8))
            let answers = HTTPAnswers.split(await connection.received(timeout: .seconds(30)).bytes) { _ in request.hasPrefix("HEAD") }
            try #require(answers.count == 1, "\(request)")
            reference.append(Self.answer(answers[0]))
        }
        let (fds, rss) = (ServeLimitsCommandTests.descriptors(pid), ServeCommandTests.memory(pid, "VmRSS"))
        let expectations = reference
        let failures = NIOLockedValueBox<[String]>([])
        var generator = SplitMix(seed: 0xF0_22)
        let plans: [(requests: [Int], malformed: Int?, stall: Bool, cuts: [Int], seed: UInt64)] = (0..<1000).map { _ in
            let count = Int(generator.next() % 6) + 1
            let requests = (0..<count).map { _ in Int(generator.next() % UInt64(valid.count)) }
            let bad: Int? = generator.next() % 5 == 0 ? Int(generator.next() % UInt64(malformed.count)) : nil
            return (requests, bad, generator.next() % 25 == 0, (0..<3).map { _ in Int(generator.next() % 400) }, generator.next())
        }
        // Four clients at once, each working through its share of the plans.
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let group = DispatchGroup()
            for client in 0..<4 {
                group.enter()
                Thread {
                    for plan in plans.enumerated().filter({ $0.offset % 4 == client }).map(\.element) {
                        if let problem = Self.exchange(port, plan, valid: valid, malformed: malformed, reference: expectations) {
                            failures.withLockedValue { $0.append(problem) }
                        }
                    }
                    group.leave()
                }.start()
            }
            group.notify(queue: .global()) { done.resume() }
        }
        let problems = failures.withLockedValue { $0 }
        #expect(problems.isEmpty, "\(problems.count) sequences went wrong, first: \(problems.prefix(3))")
        #expect(server.process.isRunning)
        #expect(try ServeCommandTests.request(port, "GET", "/dzi/kept_files/11/0_0.jpg").status == 200)
        var nowFDs = ServeLimitsCommandTests.descriptors(pid)
        for _ in 0..<100 where nowFDs > fds + 2 {
            usleep(100_000)
            nowFDs = ServeLimitsCommandTests.descriptors(pid)
        }
        let peak = ServeCommandTests.memory(pid, "VmHWM")
        #expect(nowFDs <= fds + 2 && (Sanitizers.address || peak < rss + 64), "descriptors \(fds) -> \(nowFDs), RSS \(rss) MiB, peak \(peak)")
        #expect(server.terminate(within: 30)?.status == 0)
    }

    /// One sequence on one connection: the requests (and the malformed head, if any, at a random place;
    /// a stalled body last), sent in pieces cut at the plan's boundaries; nil when every answer is right.
    static func exchange(
        _ port: Int, _ plan: (requests: [Int], malformed: Int?, stall: Bool, cuts: [Int], seed: UInt64), valid: [String],
        malformed: [String], reference: [Answer]
    ) -> String? {
        var texts = plan.requests.map { valid[$0] }
        var expected = plan.requests.map { reference[$0] }
        if let bad = plan.malformed {
            let at = Int(plan.seed % UInt64(texts.count + 1))
            texts.insert(malformed[bad], at: at)
            // A head whose body is malformed (a bad chunk) is answered first, as NIO delivers it.
            let before = malformed[bad].contains("chunked") ? [Answer(status: 200, length: -1, etag: nil)] : []
            expected = Array(expected.prefix(at)) + before + [Answer(status: 400, length: -1, etag: nil)]
        } else if plan.stall {
            // A name of its own: four clients stall at once, and a second upload of one name is a 409.
            texts.append(
                "PUT /images/stall-\(plan.seed) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer t\r\nContent-Length: 1000\r\n\r\n\u{FF}\u{D8}")
        }
        let isHead = texts.map { $0.hasPrefix("HEAD") }
        let bytes = Data(texts.joined().utf8)
        guard let connection = try? LoopbackConnection(port: UInt16(port)) else { return "cannot connect" }
        var start = 0
        for cut in plan.cuts.sorted() + [bytes.count] where cut > start && cut <= bytes.count {
            guard (try? connection.send(bytes[start..<cut])) != nil else { break }
            start = cut
            usleep(1000)
        }
        if start < bytes.count { try? connection.send(bytes[start...]) }
        // Until every answer expected has come (and no more for a moment); a stalled upload's connection
        // closes at the idle timeout, a malformed head's at once.
        let wanted = plan.stall || plan.malformed != nil ? Int.max : expected.count
        let (answers, _) = HTTPAnswers.read(connection, count: wanted, timeout: .seconds(plan.stall ? 8 : 5)) { $0 < isHead.count && isHead[$0] }
        var got = answers.map(Self.answer)
        // A body that stalls ends at the idle timeout: its request may be answered (the body ended early).
        if plan.stall, got.count == expected.count + 1, [400, 408].contains(got.last?.status) { got.removeLast() }
        let matches =
            got.count == expected.count
            && zip(got, expected).allSatisfy { $0.status == $1.status && ($1.length < 0 || ($0.length == $1.length && $0.etag == $1.etag)) }
        return matches ? nil : "sent \(texts.map { $0.prefix(40) }), expected \(expected.map(\.status)), got \(got.map(\.status))"
    }
}
