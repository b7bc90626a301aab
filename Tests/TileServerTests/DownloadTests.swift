import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Testing
import TestSupport
import TileCore
@testable import TileServer

/// Masters offered for download (issue 40, point 1's `rendering`): `GET /download/{id}` sends the
/// file as it is in the folder, compared byte for byte with the file read here; the manifest's
/// `rendering` (3.0: a list of `Image`s with a language-map label; 2.1: one object with `@id`) names
/// that URI, which is fetched.
@Suite("Master downloads", .serialized)
struct DownloadTests {
    @Test("off by default: 404 and no rendering; on: the file itself, as an attachment, conditional, HEAD, linked from both manifests")
    func downloads() async throws {
        let (folder, jpeg) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // Noise, so that the file takes several of the server's reads (`downloadChunk` each).
        let noise = try JPEGEncoder.encode(pixels: Synthetic.pixels(width: 1600, height: 1200), width: 1600, height: 1200)
        try noise.write(to: URL(fileURLWithPath: "\(folder)/noise.jpg"))
        #expect(noise.count > TileRoutes.downloadChunk, "\(noise.count) bytes")
        try await TileServerTests.withServer(try TileServer(root: folder, cache: "\(folder)/.cache", storeFormat: .raw)) { base, client in
            #expect(try await TileServerTests.get(client, "\(base)/download/photo").status == 404)
            let manifest = try await SourceVersionTests.get(client, "\(base)/iiif/3/photo/manifest")
            #expect(try #require(try JSONSerialization.jsonObject(with: manifest.body) as? [String: Any])["rendering"] == nil)
        }
        var server = try TileServer(root: folder, cache: "\(folder)/.cache", storeFormat: .raw)
        server.routes.downloads = true
        try await TileServerTests.withServer(server) { base, client in
            for (id, file) in [("photo", jpeg), ("noise", noise)] {
                let v3 = try await SourceVersionTests.get(client, "\(base)/iiif/3/\(id)/manifest")
                let manifest = try #require(try JSONSerialization.jsonObject(with: v3.body) as? [String: Any])
                let rendering = try #require((manifest["rendering"] as? [[String: Any]])?.first, "\(manifest)")
                #expect(rendering["id"] as? String == "\(base)/download/\(id)")
                #expect(rendering["type"] as? String == "Image" && rendering["format"] as? String == "image/jpeg")
                #expect(PresentationTests.isLanguageMap(rendering["label"]), "\(rendering)")
                let label = try #require((rendering["label"] as? [String: [String]])?["en"]?.first)
                #expect(label.contains("\(id).jpg"), "\(label)")
                let v2 = try await SourceVersionTests.get(client, "\(base)/iiif/2/\(id)/manifest")
                let old = try #require(try JSONSerialization.jsonObject(with: v2.body) as? [String: Any])
                #expect((old["rendering"] as? [String: Any])?["@id"] as? String == "\(base)/download/\(id)", "\(old)")

                let download = try await TileServerTests.get(client, try #require(rendering["id"] as? String))
                #expect(download.status == 200 && download.body == file, "\(id): \(download.body.count) bytes of \(file.count)")
                #expect(download.headers["content-type"] == "image/jpeg")
                #expect(download.headers["content-length"] == String(file.count))
                #expect(download.headers["content-disposition"] == "attachment; filename=\"\(id).jpg\"")
                let tag = try #require(download.headers["etag"])
                let again = try await TileServerTests.get(client, "\(base)/download/\(id)", headers: [("If-None-Match", tag)])
                #expect(again.status == 304 && again.body.isEmpty)
                let head = try await TileServerTests.get(client, "\(base)/download/\(id)", method: .HEAD)
                #expect(
                    head.status == 200 && head.body.isEmpty && head.headers["content-length"] == String(file.count) && head.headers["etag"] == tag)
            }
            // A store folder has no master; nor has a name that is no image; a page id is not a file's.
            for id in ["kept", "nothing", "photo~2", "..%2Fphoto"] {
                #expect(try await TileServerTests.get(client, "\(base)/download/\(id)").status / 100 == 4, "\(id)")
            }
            // A replaced master: the new file, under a new tag.
            let first = try await TileServerTests.get(client, "\(base)/download/photo")
            try SourceVersionTests.replace("\(folder)/photo.jpg", with: noise)
            let replaced = try await TileServerTests.get(client, "\(base)/download/photo")
            #expect(replaced.body == noise && replaced.headers["etag"] != first.headers["etag"])
        }
    }

    @Test("at most downloadLimit downloads at once: one held by a client that does not read is one slot, the next 503 until it is read")
    func limit() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // 32 MiB: more than the loopback's socket buffers hold, so a client that stops reading holds the send.
        var big = [UInt8](repeating: 0, count: 32 << 20)
        for i in stride(from: 0, to: big.count, by: 4096) { big[i] = UInt8(truncatingIfNeeded: i >> 12) }
        try Data(big).write(to: URL(fileURLWithPath: "\(folder)/big.jpg"))
        var server = try TileServer(root: folder, cache: "\(folder)/.cache", storeFormat: .raw)
        server.routes.downloads = true
        server.routes.downloadLimit = 1
        let slots = server.routes.downloadSlots
        try await TileServerTests.withServer(server) { base, client in
            let held = try await client.execute(HTTPClientRequest(url: "\(base)/download/big"), timeout: .seconds(60))
            #expect(held.status == .ok && slots.count == 1)
            let refused = try await TileServerTests.get(client, "\(base)/download/photo")
            #expect(refused.status == 503 && refused.headers["retry-after"] == "5", "\(refused.status)")
            // Read to the end: every byte, then the slot is given back.
            let body = try await held.body.collect(upTo: 64 << 20)
            #expect(Data(body.readableBytesView) == Data(big))
            let deadline = ContinuousClock.now + .seconds(30)
            while slots.count > 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
            #expect(try await TileServerTests.get(client, "\(base)/download/photo").status == 200)
        }
    }

    @Test("at most downloadsPerClient downloads at once to one client address: its next is 503, another client's is sent")
    func perClient() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // 32 MiB: more than the loopback's socket buffers hold, so a client that stops reading holds the send.
        var bytes = [UInt8](repeating: 0, count: 32 << 20)
        for i in stride(from: 0, to: bytes.count, by: 4096) { bytes[i] = UInt8(truncatingIfNeeded: i >> 12) }
        let big = Data(bytes)
        try big.write(to: URL(fileURLWithPath: "\(folder)/big.jpg"))
        var server = try TileServer(root: folder, cache: "\(folder)/.cache", storeFormat: .raw)
        server.routes.downloads = true
        (server.routes.downloadLimit, server.routes.downloadsPerClient) = (4, 1)
        // Two clients behind a trusted proxy (this loopback client), told apart by X-Forwarded-For.
        server.requestGuard = RequestGuard(trustedProxies: [try #require(AddressRange("127.0.0.0/8"))])
        let slots = server.routes.downloadSlots
        let (first, second) = ([("X-Forwarded-For", "203.0.113.1")], [("X-Forwarded-For", "203.0.113.2")])
        try await TileServerTests.withServer(server) { base, client in
            var request = HTTPClientRequest(url: "\(base)/download/big")
            request.headers.add(contentsOf: first)
            let held = try await client.execute(request, timeout: .seconds(60))
            #expect(held.status == .ok && slots.count == 1)
            let refused = try await TileServerTests.get(client, "\(base)/download/photo", headers: first)
            #expect(refused.status == 503 && refused.headers["retry-after"] == "5", "\(refused.status)")
            let why = String(decoding: refused.body, as: UTF8.self)
            #expect(why.contains("1 downloads to this client"), "\(why)")
            #expect(try await TileServerTests.get(client, "\(base)/download/photo", headers: second).status == 200, "another client's")
            // Read to the end: every byte, then the first client's slot is given back (a state, not a time).
            let body = try await held.body.collect(upTo: 64 << 20)
            #expect(Data(body.readableBytesView) == big)
            let deadline = ContinuousClock.now + .seconds(30)
            while slots.count > 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
            #expect(try await TileServerTests.get(client, "\(base)/download/photo", headers: first).status == 200)
        }
    }

    @Test("a client that stops reading a download is cut off after the idle timeout, and its slot given back")
    func stalledReader() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // 32 MiB: more than the loopback's socket buffers hold, so the send waits for the client.
        try Data(repeating: 7, count: 32 << 20).write(to: URL(fileURLWithPath: "\(folder)/big.jpg"))
        var server = try TileServer(root: folder, cache: "\(folder)/.cache", storeFormat: .raw)
        server.routes.downloads = true
        server.routes.downloadLimit = 1
        server.idleTimeout = .seconds(1)
        let slots = server.routes.downloadSlots
        try await TileServerTests.withServer(server) { base, client in
            let held = try await client.execute(HTTPClientRequest(url: "\(base)/download/big"), timeout: .seconds(60))
            #expect(held.status == .ok && slots.count == 1)
            // Not read: the server gives up on it (a state, not a time: its slot given back).
            let deadline = ContinuousClock.now + .seconds(60)
            while slots.count > 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
            #expect(slots.count == 0, "the stalled download still holds its slot")
            #expect(try await TileServerTests.get(client, "\(base)/download/photo").status == 200)
            var (received, failed) = (0, false)
            do {
                for try await chunk in held.body { received += chunk.readableBytes }
            } catch {
                failed = true
            }
            #expect(failed && received < 32 << 20, "\(received) bytes, failed: \(failed)")
        }
    }

    @Test("a master rewritten in place while it is sent: the answer ends short of its length, never bytes of two versions")
    func rewrittenWhileSent() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let big = Data(repeating: 1, count: 32 << 20)
        try big.write(to: URL(fileURLWithPath: "\(folder)/big.jpg"))
        var server = try TileServer(root: folder, cache: "\(folder)/.cache", storeFormat: .raw)
        server.routes.downloads = true
        try await TileServerTests.withServer(server) { base, client in
            let held = try await client.execute(HTTPClientRequest(url: "\(base)/download/big"), timeout: .seconds(60))
            #expect(held.status == .ok)
            // Rewritten in place (same file, same size, other bytes), as an editor saving over it would.
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: "\(folder)/big.jpg"))
            try handle.write(contentsOf: Data(repeating: 2, count: big.count))
            try handle.close()
            var received = 0
            var failed = false
            do {
                for try await chunk in held.body { received += chunk.readableBytes }
            } catch {
                failed = true
            }
            #expect(failed && received < big.count, "\(received) of \(big.count) bytes, failed: \(failed)")
        }
    }

    @Test(
        "one byte range of a download (206, Content-Range; the RFC's examples), past the end 416, If-Range, If-Match, If-Unmodified-Since, none for HEAD"
    )
    func ranges() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // Noise, several of the server's reads long, so that ranges cross its chunks.
        let file = try JPEGEncoder.encode(pixels: Synthetic.pixels(width: 1600, height: 1200), width: 1600, height: 1200)
        try file.write(to: URL(fileURLWithPath: "\(folder)/noise.jpg"))
        let n = file.count
        let chunk = TileRoutes.downloadChunk
        #expect(n > 2 * chunk, "\(n) bytes")
        var server = try TileServer(root: folder, cache: "\(folder)/.cache", storeFormat: .raw)
        server.routes.downloads = true
        let slots = server.routes.downloadSlots
        try await TileServerTests.withServer(server) { base, client in
            let url = "\(base)/download/noise"
            let whole = try await TileServerTests.get(client, url)
            #expect(whole.status == 200 && whole.body == file && whole.headers["accept-ranges"] == "bytes")
            let (tag, date) = (try #require(whole.headers["etag"]), try #require(whole.headers["last-modified"]))
            // The range asked for, and the bytes the RFC's own examples (RFC 9110, 14.1.2) say it is;
            // nil: the range is not served (the whole file, 200).
            let cases: [(String, Range<Int>?)] = [
                ("bytes=0-499", 0..<500), ("bytes=500-999", 500..<1000), ("bytes=-500", (n - 500)..<n), ("bytes=9500-", 9500..<n),
                ("bytes=0-0", 0..<1), ("bytes=-1", (n - 1)..<n), ("bytes=\(chunk - 10)-\(chunk + 9)", (chunk - 10)..<(chunk + 10)),
                ("bytes=\(n - 1)-\(n + 1000)", (n - 1)..<n), ("bytes=0-99999999999999999999999", 0..<n), ("bytes=-\(n + 1)", 0..<n),
                ("Bytes=10-19", 10..<20), ("bytes= 10-19 ,", 10..<20),
                ("bytes=20-10", nil), ("bytes=99999999999999999999-99999999999999999998", nil), ("bytes=0-1,5-6", nil), ("items=0-5", nil),
                ("bytes=a-5", nil), ("bytes=-", nil), ("bytes=+1-2", nil),
                ("bytes=1 -2", nil)
            ]
            for (range, expected) in cases {
                let reply = try await TileServerTests.get(client, url, headers: [("Range", range)])
                guard let expected else {
                    #expect(reply.status == 200 && reply.body == file && reply.headers["content-range"] == nil, "\(range): \(reply.status)")
                    continue
                }
                #expect(reply.status == 206, "\(range): \(reply.status)")
                #expect(reply.body == file[expected], "\(range): \(reply.body.count) bytes")
                #expect(reply.headers["content-length"] == String(expected.count))
                #expect(reply.headers["content-range"] == "bytes \(expected.lowerBound)-\(expected.upperBound - 1)/\(n)", "\(range)")
                #expect(reply.headers["etag"] == tag)
            }
            // No byte of the file in the range: 416 with the file's length.
            for range in ["bytes=\(n)-", "bytes=\(n)-\(n + 5)", "bytes=99999999999999999999-", "bytes=-0"] {
                let reply = try await TileServerTests.get(client, url, headers: [("Range", range)])
                #expect(reply.status == 416 && reply.headers["content-range"] == "bytes */\(n)", "\(range): \(reply.status)")
            }
            // If-Range: the range only when the tag is the file's current one, else the whole file; a date
            // never (Last-Modified counts seconds: a file rewritten within one would match).
            for (ifRange, partial) in [(tag, true), (date, false), ("W/\(tag)", false), ("\"0\"", false), ("Thu, 01 Jan 1970 00:00:00 GMT", false)] {
                let reply = try await TileServerTests.get(client, url, headers: [("Range", "bytes=100-199"), ("If-Range", ifRange)])
                #expect(reply.status == (partial ? 206 : 200), "\(ifRange): \(reply.status)")
                #expect(reply.body == (partial ? file[100..<200] : file))
                #expect((reply.headers["content-range"] != nil) == partial)
                // A part of the file the client has: the file not described again, its tag and caching said (RFC 9110, 15.3.7).
                let described = ["content-type", "content-disposition", "last-modified"].filter { reply.headers[$0] != nil }
                #expect(described == (partial ? [] : ["content-type", "content-disposition", "last-modified"]), "\(ifRange): \(described)")
                #expect(reply.headers["etag"] == tag && reply.headers["cache-control"] != nil)
            }
            // If-Match and If-Unmodified-Since (RFC 9110, 13.1.1, 13.1.4): the range of this version, or 412.
            let older = "Thu, 01 Jan 1970 00:00:00 GMT"
            let preconditions: [([(String, String)], Int)] = [
                ([("If-Match", tag)], 206), ([("If-Match", "\"0\", \(tag)")], 206), ([("If-Match", "*")], 206), ([("If-Match", "\"0\"")], 412),
                ([("If-Match", "W/\(tag)")], 412), ([("If-Unmodified-Since", date)], 206), ([("If-Unmodified-Since", older)], 412),
                ([("If-Unmodified-Since", "yesterday")], 206), ([("If-Match", tag), ("If-Unmodified-Since", older)], 206),
                // Before If-None-Match (RFC 9110, 13.2.2): a 412, not a 304.
                ([("If-Match", "\"0\""), ("If-None-Match", tag)], 412), ([("If-Unmodified-Since", older), ("If-None-Match", tag)], 412)
            ]
            for (conditions, status) in preconditions {
                let reply = try await TileServerTests.get(client, url, headers: [("Range", "bytes=100-199")] + conditions)
                #expect(reply.status == status, "\(conditions): \(reply.status)")
                if status == 206 { #expect(reply.body == file[100..<200]) }
            }
            // A HEAD describes the whole file; a 304 comes before any range.
            let head = try await TileServerTests.get(client, url, method: .HEAD, headers: [("Range", "bytes=0-9")])
            #expect(head.status == 200 && head.headers["content-length"] == String(n) && head.headers["accept-ranges"] == "bytes")
            #expect(head.headers["content-range"] == nil)
            let cached = try await TileServerTests.get(client, url, headers: [("Range", "bytes=0-9"), ("If-None-Match", tag)])
            #expect(cached.status == 304)
            // An empty file: a suffix is satisfiable but no 206 (the whole, empty, file); a start is not.
            try Data().write(to: URL(fileURLWithPath: "\(folder)/empty.jpg"))
            let suffix = try await TileServerTests.get(client, "\(base)/download/empty", headers: [("Range", "bytes=-5")])
            #expect(suffix.status == 200 && suffix.body.isEmpty, "\(suffix.status)")
            let start = try await TileServerTests.get(client, "\(base)/download/empty", headers: [("Range", "bytes=0-")])
            #expect(start.status == 416 && start.headers["content-range"] == "bytes */0", "\(start.status)")
            // A HEAD's preconditions too.
            let stale = try await TileServerTests.get(client, url, method: .HEAD, headers: [("If-Match", "\"0\"")])
            #expect(stale.status == 412)
            // Every answer sent, the 416s and 412s too, gave its slot back (none is being sent now).
            #expect(slots.count == 0)
        }
    }

    @Test(
        "curl -C - resumes a broken download and ends with the file", .enabled(if: Tools.have("curl"), Comment(rawValue: Tools.missing("curl"))))
    func curlResumes() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let file = try JPEGEncoder.encode(pixels: Synthetic.pixels(width: 1600, height: 1200), width: 1600, height: 1200)
        try file.write(to: URL(fileURLWithPath: "\(folder)/noise.jpg"))
        var server = try TileServer(root: folder, cache: "\(folder)/.cache", storeFormat: .raw)
        server.routes.downloads = true
        try await TileServerTests.withServer(server) { base, _ in
            // As a person resumes it: the first part arrived, then the connection broke.
            let (url, chunk) = ("\(base)/download/noise", TileRoutes.downloadChunk)
            let partial = "\(folder)/noise.part"
            try file[0..<(chunk + 1234)].write(to: URL(fileURLWithPath: partial))
            let curl = await LoopbackConnection.onOwnThread { Result { try Tools.run("curl", ["-sS", "-f", "-C", "-", "-o", partial, url]) } }
            let run = try curl.get()
            #expect(run.status == 0, "\(run.stderr)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: partial)) == file)
        }
    }
}
