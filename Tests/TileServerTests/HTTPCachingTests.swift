import AsyncHTTPClient
import Foundation
import NIOHTTP1
import Testing
import TestSupport
import TileCore
@testable import TileServer

#if canImport(Glibc)
import Glibc
#endif

/// HTTP caching as a browser, Varnish or a CDN uses it (RFC 9110, 9111): validators on every image and
/// document, both kinds of conditional request, lifetimes per kind, and JSON-LD only when asked for.
@Suite("HTTP caching", .serialized)
struct HTTPCachingTests {
    /// The source's modification time as the folder is made: 2021-03-04 05:06:07 UTC, a Thursday. Its
    /// `Last-Modified` is the later of that and when it was written here (its change time, which no one
    /// can set back): ``lastChange(_:)``.
    static let modified: time_t = 1_614_834_367

    /// An HTTP date written with the C library (an outside reference for the server's dates): an
    /// IMF-fixdate, or another `strftime` form.
    static func httpDate(_ seconds: time_t, format: String = "%a, %d %b %Y %H:%M:%S GMT") -> String {
        var t = seconds, parts = tm()
        gmtime_r(&t, &parts)
        var buffer = [CChar](repeating: 0, count: 64)
        let n = strftime(&buffer, buffer.count, format, &parts)
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// When the file at `path` last changed, by `stat`: the later of its modification and change times.
    static func lastChange(_ path: String) throws -> time_t {
        guard let seconds = FileFacts.lastChange(path) else { throw TileError(.io, "stat \(path) failed") }
        return time_t(seconds)
    }

    /// ``lastChange(_:)`` of the folder's `photo.jpg` as an HTTP date.
    static func lastModified(_ folder: String) throws -> String { httpDate(try lastChange("\(folder)/photo.jpg")) }

    /// Waits, in steps of 10 ms, until the clock is past the second `seconds` (so that a file written
    /// now has a later `Last-Modified` than one written then).
    static func waitForSecond(after seconds: time_t) async throws {
        while time(nil) <= seconds { try await Task.sleep(for: .milliseconds(10)) }
    }

    /// A folder with `photo.jpg` (600x400) dated ``modified``.
    static func folder() throws -> String {
        let jpeg = try JPEGEncoder.encode(pixels: Synthetic.smooth(width: 600, height: 400), width: 600, height: 400)
        let folder = try ServerLimitsTests.folder(["photo.jpg": jpeg])
        guard FileFacts.setModificationTime("\(folder)/photo.jpg", seconds: Int(modified), nanoseconds: 250_000_000) else {
            throw TileError(.io, "utimensat failed")
        }
        return folder
    }

    /// Asks until the image is complete (an answer with an entity tag), as a client polling would.
    static func complete(_ client: HTTPClient, _ url: String) async throws -> TileServerTests.Reply {
        var reply = try await SourceVersionTests.get(client, url)
        for _ in 0..<3000 where reply.headers["etag"] == nil {
            #expect(reply.headers["cache-control"] == "no-store", "an image of a pyramid being built")
            try await Task.sleep(for: .milliseconds(10))
            reply = try await SourceVersionTests.get(client, url)
        }
        return reply
    }

    @Test("tiles: ETag, Last-Modified from the source, a day's max-age; 304 on either validator, answered alike once cached")
    func images() async throws {
        #expect(Self.httpDate(Self.modified) == "Thu, 04 Mar 2021 05:06:07 GMT")
        let folder = try Self.folder()
        let changed = try Self.lastChange("\(folder)/photo.jpg"), modifiedText = Self.httpDate(changed)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await TileServerTests.withServer(folder) { base, client in
            let url = "\(base)/dzi/photo_files/10/1_1.jpg"
            let first = try await Self.complete(client, url)
            #expect(first.status == 200)
            #expect(first.headers["last-modified"] == modifiedText)
            #expect(first.headers["cache-control"] == "public, max-age=86400")
            #expect(first.headers["vary"] == nil)
            let tag = try #require(first.headers["etag"])
            #expect(tag.hasPrefix("\"") && tag.hasSuffix("\""), "a strong entity tag")
            // Again: from the cache (answered by the connection's handler), the same fields.
            let again = try await TileServerTests.get(client, url)
            for name in ["etag", "last-modified", "cache-control", "content-type"] { #expect(again.headers[name] == first.headers[name], "\(name)") }
            #expect(again.body == first.body)

            // Conditional requests, each on a cached tile and on one asked for the first time (another
            // tile each time, so that the routes answer it).
            // Later by a second at most: a date past the server's clock is ignored (RFC 9110, 13.1.3).
            let later = Self.httpDate(changed + 1), earlier = Self.httpDate(changed - 1)
            let rfc850 = Self.httpDate(changed, format: "%A, %d-%b-%y %H:%M:%S GMT"), asctime = Self.httpDate(changed, format: "%a %b %e %H:%M:%S %Y")
            let cases: [([(String, String)], Int, String)] = [
                ([("If-None-Match", tag)], 304, "the tag"),
                ([("If-None-Match", "\"other\", \(tag)")], 304, "a list naming the tag"),
                ([("If-None-Match", "W/\(tag)")], 304, "the weak form (GET compares weakly)"),
                ([("If-None-Match", "*")], 304, "any"),
                ([("If-None-Match", "\"other\"")], 200, "another tag"),
                ([("If-Modified-Since", modifiedText)], 304, "Last-Modified as sent"),
                ([("If-Modified-Since", later)], 304, "a later date"),
                ([("If-Modified-Since", rfc850)], 304, "the RFC 850 form"),
                ([("If-Modified-Since", asctime)], 304, "the asctime form"),
                ([("If-Modified-Since", earlier)], 200, "an earlier date"),
                ([("If-Modified-Since", "yesterday")], 200, "not a date"),
                ([("If-None-Match", "\"other\""), ("If-Modified-Since", later)], 200, "If-None-Match decides when both are sent")
            ]
            for (headers, status, what) in cases {
                // Kept alive: answered from the cache by the connection's handler. `Connection: close`:
                // passed on to the routes (the handler answers kept-alive requests only).
                for extra in [[(String, String)](), [("Connection", "close")]] {
                    let reply = try await TileServerTests.get(client, url, headers: headers + extra)
                    let path = extra.isEmpty ? "cached" : "routes"
                    #expect(reply.status == status, "\(path): \(what)")
                    guard reply.status == 304 else { continue }
                    #expect(reply.body.isEmpty, "\(path): \(what): a 304 has no body")
                    #expect(reply.headers["etag"] == tag && reply.headers["last-modified"] == modifiedText, "\(path): \(what)")
                    #expect(reply.headers["cache-control"] == "public, max-age=86400", "\(path): \(what)")
                }
            }
        }
    }

    @Test("info.json and .dzi: validators, five minutes' max-age, 304; JSON-LD only when asked for, with Vary: Accept")
    func documents() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let modifiedText = try Self.lastModified(folder)
        try await TileServerTests.withServer(folder) { base, client in
            let info = "\(base)/iiif/3/photo/info.json"
            let plain = try await SourceVersionTests.get(client, info)
            #expect(plain.status == 200 && plain.headers["content-type"] == "application/json")
            let asked = "application/ld+json;profile=\"http://iiif.io/api/image/3/context.json\""
            let linked = try await SourceVersionTests.get(client, info, headers: [("Accept", asked)])
            #expect(linked.headers["content-type"] == asked)
            #expect(linked.body == plain.body)
            for reply in [plain, linked] {
                // Accept, and the forwarded headers that name the URL in the id (no public URL configured).
                #expect(reply.headers["vary"]?.hasPrefix("Accept, ") == true && reply.headers["vary"]?.contains("X-Forwarded-Host") == true)
                #expect(reply.headers["cache-control"] == "public, max-age=300")
                #expect(reply.headers["last-modified"] == modifiedText)
            }
            let tag = try #require(plain.headers["etag"])
            #expect(linked.headers["etag"] != tag, "two representations, two strong tags")
            #expect(try await TileServerTests.get(client, info, headers: [("If-None-Match", tag)]).status == 304)
            #expect(try await TileServerTests.get(client, info, headers: [("If-Modified-Since", modifiedText)]).status == 304)
            #expect(try await TileServerTests.get(client, info, headers: [("If-None-Match", try #require(linked.headers["etag"]))]).status == 200)

            let dzi = try await SourceVersionTests.get(client, "\(base)/dzi/photo.dzi")
            #expect(dzi.status == 200 && dzi.headers["cache-control"] == "public, max-age=300" && dzi.headers["last-modified"] == modifiedText)
            let dziTag = try #require(dzi.headers["etag"])
            let head = try await TileServerTests.get(client, "\(base)/dzi/photo.dzi", method: .HEAD)
            #expect(head.status == 200 && head.headers["etag"] == dziTag && head.body.isEmpty)
            let revalidated = try await TileServerTests.get(client, "\(base)/dzi/photo.dzi", headers: [("If-None-Match", dziTag)])
            #expect(revalidated.status == 304 && revalidated.body.isEmpty)
        }
    }

    @Test("HEAD of a render answers the GET's fields without rendering it (no length: RFC 9110 9.3.2); 304 on its tag")
    func headWithoutRendering() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let server = try TileServer(root: folder, cache: "\(folder)/.cache", storeFormat: .raw)
        try await TileServerTests.withServer(server) { base, client in
            _ = try await Self.complete(client, "\(base)/iiif/3/photo/full/max/0/default.jpg")
            let path = "/iiif/3/photo/0,0,500,300/250,/90/default.png"
            let head = try await TileServerTests.get(client, base + path, method: .HEAD)
            #expect(head.status == 200 && head.body.isEmpty)
            #expect(head.headers["content-length"] == nil, "the length is known only once rendered")
            // A render is kept in the cache of encoded images: nothing there, nothing rendered.
            #expect(server.routes.service.cache.image(for: path) == nil, "the HEAD rendered the image")
            let get = try await TileServerTests.get(client, base + path)
            #expect(get.status == 200 && get.headers["content-type"] == "image/png" && !get.body.isEmpty)
            #expect(server.routes.service.cache.image(for: path) != nil)
            for name in ["etag", "last-modified", "cache-control", "content-type", "link"] {
                #expect(head.headers[name] != nil && head.headers[name] == get.headers[name], "\(name)")
            }
            let tag = try #require(head.headers["etag"])
            let other = "/iiif/3/photo/0,0,500,300/250,/90/gray.png"
            let revalidated = try await TileServerTests.get(client, base + other, method: .HEAD, headers: [("If-None-Match", tag)])
            #expect(revalidated.status == 200, "another image, another tag")
            let unchanged = try await TileServerTests.get(
                client, base + other, method: .HEAD, headers: [("If-None-Match", try #require(revalidated.headers["etag"]))])
            #expect(unchanged.status == 304 && server.routes.service.cache.image(for: other) == nil)
            // On one connection, pipelined: a HEAD of a render not made yet, then a GET, then one that
            // closes. The HEAD's answer has no body at all (no chunked terminator), so the next two are
            // framed right.
            let port = UInt16(base.split(separator: ":").last!)!
            let connection = try LoopbackConnection(port: port)
            let requests = [
                "HEAD /iiif/3/photo/full/123,/0/default.png HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                "GET /iiif/3/photo/info.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                "HEAD /iiif/3/photo/full/124,/0/default.png HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
            ]
            try connection.send(Data(requests.joined().utf8))
            let (bytes, closed) = await connection.received(timeout: LoopbackConnection.answerTimeout)
            #expect(closed)
            let answers = HTTPAnswers.split(bytes) { $0 != 1 }
            #expect(answers.map(\.status) == [200, 200, 200])
            guard answers.count == 3 else { return }
            #expect(answers[0].headers["content-length"] == nil && answers[0].headers["etag"] != nil && answers[0].body.isEmpty)
            #expect(answers[1].headers["content-type"] == "application/json" && (try? JSONSerialization.jsonObject(with: answers[1].body)) != nil)
            // Nothing after the last head: every byte the server sent belongs to an answer.
            #expect(String(decoding: bytes, as: UTF8.self).hasSuffix("\r\n\r\n"))
            #expect(server.routes.service.cache.image(for: "/iiif/3/photo/full/123,/0/default.png") == nil)
        }
    }

    @Test("lifetimes are the policy's; a source replaced by an older-dated file gets a later Last-Modified, and its old validators no longer match")
    func policyAndReplacement() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // Every lookup looks at the source (no second of trust in a checked one).
        let catalog = try ImageCatalog(
            root: folder, cache: "\(folder)/.cache", storeFormat: .raw, sourceRecheckInterval: .zero)
        let server = TileServer(service: TileService(catalog: catalog, cachePolicy: CachePolicy(imageMaxAge: 7, documentMaxAge: 3)))
        try await TileServerTests.withServer(server) { base, client in
            let url = "\(base)/iiif/3/photo/full/max/0/default.jpg"
            let image = try await Self.complete(client, url)
            #expect(image.headers["cache-control"] == "public, max-age=7")
            let info = try await SourceVersionTests.get(client, "\(base)/iiif/3/photo/info.json")
            #expect(info.headers["cache-control"] == "public, max-age=3")

            #expect(image.headers["last-modified"] == (try Self.lastModified(folder)))

            // The source replaced by other pixels dated a day earlier (a backup put back, `cp -p` of an
            // older file): its Last-Modified still moves forward, and the old date no longer matches.
            try await Self.waitForSecond(after: try Self.lastChange("\(folder)/photo.jpg"))
            let other = try JPEGEncoder.encode(pixels: Synthetic.pixels(width: 600, height: 400), width: 600, height: 400)
            try SourceVersionTests.replace("\(folder)/photo.jpg", with: other)
            #expect(FileFacts.setModificationTime("\(folder)/photo.jpg", seconds: Int(Self.modified) - 86_400))
            let replaced = try await Self.complete(client, url)
            let replacedText = try Self.lastModified(folder)
            #expect(replaced.headers["last-modified"] == replacedText)
            let (before, after) = (image.headers["last-modified"].flatMap(HTTPDate.parse), replaced.headers["last-modified"].flatMap(HTTPDate.parse))
            #expect(
                before != nil && after != nil && after! > before!,
                "Last-Modified went from \(String(describing: before)) to \(String(describing: after))")
            #expect(replaced.headers["etag"] != image.headers["etag"])
            let old = [("If-None-Match", image.headers["etag"] ?? ""), ("If-Modified-Since", image.headers["last-modified"] ?? "")]
            #expect(try await TileServerTests.get(client, url, headers: [old[0]]).status == 200)
            #expect(try await TileServerTests.get(client, url, headers: [old[1]]).status == 200)
            let newInfo = try await SourceVersionTests.get(
                client, "\(base)/iiif/3/photo/info.json", headers: [("If-None-Match", info.headers["etag"] ?? "")])
            #expect(newInfo.status == 200 && newInfo.headers["last-modified"] == replacedText)
        }
    }
}
