import Foundation
import NIOCore
import Testing
import TestSupport
import TileCore
@testable import TileServer

/// The event loop's memo of cached answers (`AnswerMemo`): it answers only what the cache would, and
/// never an image of a source that changed.
@Suite("The event loops' memo of cached answers")
struct AnswerMemoTests {
    static func image(_ text: String) -> EncodedImage {
        EncodedImage(body: ByteBuffer(string: text), head: ImageHead(mediaType: "image/jpeg", cacheControl: "no-store"))
    }

    @Test("an entry answers while the cache dropped nothing, the ready images did not change and its source was checked lately")
    func validity() {
        let memo = AnswerMemo()
        let (a, b) = (Self.image("a"), Self.image("b"))
        let now = ContinuousClock.now
        let second = Duration.seconds(1)
        memo.keep(a, for: "/a", route: .dziTile, checked: now, removals: 3, changes: 5)
        memo.keep(b, for: "/b?x", route: .iiifImage, checked: now - .milliseconds(900), removals: 3, changes: 5)
        let found = memo.entry(for: "/a", removals: 3, changes: 5, now: now, recheckInterval: second)
        #expect(found?.image === a && found?.route == .dziTile)
        #expect(memo.entry(for: "/b?x", removals: 3, changes: 5, now: now, recheckInterval: second)?.image === b)
        #expect(memo.entry(for: "/c", removals: 3, changes: 5, now: now, recheckInterval: second) == nil)
        // `/b?x`'s source was checked 900 ms before `now`: 100 ms later it must be checked again.
        #expect(memo.entry(for: "/b?x", removals: 3, changes: 5, now: now + .milliseconds(100), recheckInterval: second) == nil)
        #expect(memo.count == 1)
        // The cache dropped something: nothing is answered, nothing kept.
        #expect(memo.entry(for: "/a", removals: 4, changes: 5, now: now, recheckInterval: second) == nil)
        #expect(memo.count == 0)
        // A look-up made before that drop is not kept; one made after it is.
        memo.keep(a, for: "/a", route: .dziTile, checked: now, removals: 3, changes: 5)
        #expect(memo.count == 0)
        memo.keep(a, for: "/a", route: .dziTile, checked: now, removals: 4, changes: 5)
        #expect(memo.entry(for: "/a", removals: 4, changes: 5, now: now, recheckInterval: second)?.image === a)
        // The ready images changed: nothing is answered, nothing kept.
        #expect(memo.entry(for: "/a", removals: 4, changes: 6, now: now, recheckInterval: second) == nil)
        #expect(memo.count == 0)
    }

    @Test("every eighth answer of an entry marks it used in the cache; a full memo starts again")
    func touchesAndCapacity() {
        let memo = AnswerMemo()
        let now = ContinuousClock.now
        memo.keep(Self.image("a"), for: "/a", route: .dziTile, checked: now, removals: 0, changes: 0)
        let touches = (1...24).map { _ in memo.entry(for: "/a", removals: 0, changes: 0, now: now, recheckInterval: .seconds(1))?.touches }
        #expect(touches == (1...24).map { Optional($0 % 8 == 0) })
        for i in 1..<AnswerMemo.capacity {
            memo.keep(Self.image("\(i)"), for: "/\(i)", route: .dziTile, checked: now, removals: 0, changes: 0)
        }
        #expect(memo.count == AnswerMemo.capacity)
        memo.keep(Self.image("next"), for: "/next", route: .dziTile, checked: now, removals: 0, changes: 0)
        #expect(memo.count == 1)
        #expect(memo.entry(for: "/next", removals: 0, changes: 0, now: now, recheckInterval: .seconds(1)) != nil)
    }

    @Test("a memo holds at most its bytes, and nothing once its loop's last connection has ended")
    func bounds() {
        let memo = AnswerMemo(byteLimit: 10)
        let now = ContinuousClock.now
        func keep(_ text: String, _ target: String) {
            memo.keep(Self.image(text), for: target, route: .dziTile, checked: now, removals: 0, changes: 0)
        }
        memo.connectionOpened()
        keep("12345", "/a")
        keep("1234", "/b")
        #expect(memo.count == 2 && memo.bytes == 9)
        keep("123", "/b")
        #expect(memo.count == 2 && memo.bytes == 8)
        keep("123", "/c")  // 11 bytes: it starts again
        #expect(memo.count == 1 && memo.bytes == 3)
        keep("12345678901", "/d")  // larger than the bound: not kept
        #expect(memo.count == 1 && memo.bytes == 3)
        memo.connectionOpened()
        memo.connectionClosed()
        #expect(memo.count == 1)
        memo.connectionClosed()
        #expect(memo.count == 0 && memo.bytes == 0)
    }

    @Test("the cache counts what it drops: an eviction, a replacement, a purge; not a look-up or a new key")
    func removals() {
        // 16 shards of 64 KiB: tiles of 40 KiB, two to a shard at most.
        let cache = EncodedTileCache(capacity: 16 * 64 << 10)
        func tile(_ id: String) -> EncodedImage {
            EncodedImage(
                body: ByteBuffer(repeating: 1, count: 40 << 10), head: ImageHead(mediaType: "image/jpeg", cacheControl: "no-store"), id: id)
        }
        cache.insert(tile("a"), for: "/a")
        _ = cache.image(for: "/a")
        _ = cache.image(for: "/missing")
        #expect(cache.removals == 0)
        cache.insert(tile("a"), for: "/a")
        #expect(cache.removals == 1)
        cache.removeAll(of: "a")
        #expect(cache.removals == 2 && cache.image(for: "/a") == nil)
        // Keys until one shard holds two tiles (80 KiB past its 64): the older is evicted.
        var keys = 0
        while cache.removals == 2, keys < 10_000 {
            cache.insert(tile("b"), for: "/b\(keys)")
            keys += 1
        }
        #expect(cache.removals == 3 && cache.count == keys - 1)
    }

    @Test("one connection asking for a tile again and again: answered from the memo, and never the old pixels once the source is replaced")
    func replacedSource() async throws {
        let (old, new) = (try SourceVersionTests.jpeg(0), try SourceVersionTests.jpeg(1))
        let folder = try SourceVersionTests.folder(["photo.jpg": old])
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let catalog = try ImageCatalog(root: folder, cache: "\(folder)/.cache", storeFormat: .raw)
        let server = try TileServer(catalog: catalog)
        try await TileServerTests.withServer(server) { base, _ in
            let connection = try LoopbackConnection(port: UInt16(base.split(separator: ":").last!)!)
            let target = "/iiif/3/photo/0,0,256,256/max/0/default.png"
            func get() async throws -> HTTPAnswers.Answer {
                try connection.send(Data("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
                let read = await HTTPAnswers.received(connection, count: 1, timeout: LoopbackConnection.answerTimeout, grace: .zero)
                return try #require(read.answers.first)
            }
            let (oldTile, newTile) = (
                Reference.crop(try Reference.decode(old).image, x: 0, y: 0, width: 256, height: 256),
                Reference.crop(try Reference.decode(new).image, x: 0, y: 0, width: 256, height: 256)
            )
            // Until the build is complete (503, then no-store answers without an entity tag).
            var first = try await get()
            while first.headers["etag"] == nil {
                try await Task.sleep(for: .milliseconds(20))
                first = try await get()
            }
            #expect(try Reference.decodePNG(first.body) == oldTile)
            // The routes cached it; the next answer is the cache's (then kept in the memo), the rest the
            // memo's. An answer is kept only when its source was checked within the last second (the
            // catalogue's recheck interval), and a check older than that sends the request to the routes,
            // which check again: asked until the memo has it (a CI run under a sanitizer once took over a
            // second between each of three requests, and the memo was still empty after them).
            var asked = 0
            let deadline = ContinuousClock.now + LoopbackConnection.answerTimeout
            while try await server.routes.service.memos.count() == 0 || asked < 3, ContinuousClock.now < deadline {
                let again = try await get()
                #expect(again.status == 200 && again.body == first.body && again.headers["etag"] == first.headers["etag"])
                asked += 1
            }
            #expect(try await server.routes.service.memos.count() >= 1, "after \(asked) requests")

            try SourceVersionTests.replace("\(folder)/photo.jpg", with: new)
            let seen = ContinuousClock.now
            while catalog.readyImage("photo") != nil, ContinuousClock.now - seen < .seconds(10) { try await Task.sleep(for: .milliseconds(5)) }
            #expect(catalog.readyImage("photo") == nil, "the change was not seen within 10 s")
            var after = try await get()
            while after.headers["etag"] == nil {
                if after.status != 503 { #expect(try Reference.decodePNG(after.body) == newTile) }
                try await Task.sleep(for: .milliseconds(20))
                after = try await get()
            }
            #expect(try Reference.decodePNG(after.body) == newTile)
            #expect(after.headers["etag"] != first.headers["etag"])
            for _ in 0..<3 { #expect(try await get().body == after.body) }
        }
    }
}
