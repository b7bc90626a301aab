import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Testing
import TestSupport
import TestTraits
@testable import TileNetwork

extension S3TestServer {
    /// The client's configuration for this store.
    var configuration: S3Configuration {
        S3Configuration(endpoint: endpoint, region: region, credentials: S3Credentials(accessKeyID: accessKey, secretAccessKey: secretKey))
    }
}

/// The S3 client against the real store (issue 43, point 1): every call, a listing of more than 1,000
/// keys in pages, a multipart upload of more than 100 MiB, an upload that fails aborted, a presigned
/// `GET` fetched by a plain client, and a wrong secret refused. References are the bytes the test
/// sent, written plainly here.
@Suite("S3 client against OpenStack Swift's s3api (loopback)", .serialized, .ownThreads, .enabled(if: S3TestServer.isAvailable, S3TestServer.skip))
struct S3StoreTests {
    /// `count` bytes of a pattern of `seed`'s.
    static func bytes(_ count: Int, seed: Int) -> [UInt8] {
        var state = UInt64(seed &* 2_654_435_761 &+ 1)
        return (0..<count).map { _ in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 33)
        }
    }

    /// Part `n` of a multipart upload, `size` bytes: a 64 KiB pattern of `n`'s repeated, each copy's first
    /// eight bytes its offset (so that every 64 KiB of the object differs).
    static func part(_ n: Int, size: Int) -> [UInt8] {
        let block = bytes(65_536, seed: 100 + n)
        var out = [UInt8](repeating: 0, count: size)
        for start in stride(from: 0, to: size, by: block.count) {
            let count = min(block.count, size - start)
            out.replaceSubrange(start..<(start + count), with: block[0..<count])
            withUnsafeBytes(of: UInt64(start).littleEndian) { offset in
                for i in 0..<min(8, count) { out[start + i] = offset[i] }
            }
        }
        return out
    }

    @Test("HEAD, GET (whole, a range), PUT, DELETE, lists past 1,000 keys, a 112 MiB multipart upload, an aborted one, presigned GET, a wrong secret")
    func everyCall() async throws {
        let server = try S3TestServer()
        defer { server.stop() }
        let client = S3Client(configuration: server.configuration)
        try await client.createBucket("tiles")

        // PUT, HEAD, GET, a range.
        let photo = Self.bytes(100_000, seed: 1)
        let tag = try await client.put(bucket: "tiles", key: "maps/photo 1.jpg", body: ByteBuffer(bytes: photo), contentType: "image/jpeg")
        let head = try #require(try await client.head(bucket: "tiles", key: "maps/photo 1.jpg"))
        #expect(head.size == photo.count && head.entityTag == tag && !tag.isEmpty, "\(head)")
        #expect(Array(try await client.get(bucket: "tiles", key: "maps/photo 1.jpg").readableBytesView) == photo)
        #expect(Array(try await client.get(bucket: "tiles", key: "maps/photo 1.jpg", range: 10...19).readableBytesView) == Array(photo[10...19]))
        #expect(try await client.head(bucket: "tiles", key: "nothing") == nil)
        // If-Match: the version HEAD saw is read; once the object is replaced, 412 and no bytes.
        #expect(
            Array(try await client.get(bucket: "tiles", key: "maps/photo 1.jpg", range: 0...3, ifMatch: head.entityTag).readableBytesView)
                == Array(photo[0...3]))
        try await client.put(bucket: "tiles", key: "maps/photo 1.jpg", body: ByteBuffer(bytes: Self.bytes(1000, seed: 2)))
        do {
            _ = try await client.get(bucket: "tiles", key: "maps/photo 1.jpg", range: 0...3, ifMatch: head.entityTag)
            Issue.record("a replaced object was read under its old entity tag")
        } catch {
            #expect(error.status == 412 && error.code == "PreconditionFailed", "\(error)")
        }
        try await client.put(bucket: "tiles", key: "maps/photo 1.jpg", body: ByteBuffer(bytes: photo))
        do {
            _ = try await client.get(bucket: "tiles", key: "nothing")
            Issue.record("a missing key was answered")
        } catch {
            #expect(error.status == 404 && error.code == "NoSuchKey", "\(error)")
        }

        // 1,100 keys: two pages of the listing.
        let keys = (0..<1100).map { String(format: "many/%05d", $0) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for start in stride(from: 0, to: keys.count, by: 100) {
                group.addTask {
                    for key in keys[start..<min(keys.count, start + 100)] {
                        try await client.put(bucket: "tiles", key: key, body: ByteBuffer(string: key))
                    }
                }
            }
            try await group.waitForAll()
        }
        let first = try await client.list(bucket: "tiles", prefix: "many/")
        #expect(first.objects.count == 1000 && first.next != nil)
        let all = try await client.listAll(bucket: "tiles", prefix: "many/")
        #expect(all.map(\.key) == keys && all.allSatisfy { $0.size == 10 })

        // A multipart upload of 7 parts of 16 MiB: the object is their bytes in order.
        let partSize = 16 << 20
        let bigTag = try await client.upload(bucket: "tiles", key: "big.tif", parts: Parts(count: 7, size: partSize), contentType: "image/tiff")
        let big = try await client.head(bucket: "tiles", key: "big.tif")
        #expect(big?.size == 7 * partSize && big?.entityTag == bigTag)
        // A multipart object's tag holds for If-Match as a whole object's does.
        #expect(try await client.get(bucket: "tiles", key: "big.tif", range: 0...15, ifMatch: bigTag).readableBytes == 16)
        // The store's tag is the one S3 gives a multipart object (what a lost completion is recognised by).
        let partTags = (0..<7).map { n in S3Signer.hex(Digest.hash(.md5, Self.part(n, size: partSize)) ?? []) }
        #expect(bigTag == S3Client.multipartTag(of: partTags), "\(bigTag)")
        for n in [0, 3, 6] {
            // The end of part n + 1 and the start of the next, past its first 8 bytes (its offset, 0, in every part).
            let start = n * partSize + partSize - 8
            let got = Array(try await client.get(bucket: "tiles", key: "big.tif", range: start...(start + 23)).readableBytesView)
            let want = Array(Self.part(n, size: partSize).suffix(8)) + (n < 6 ? Array(Self.part(n + 1, size: 16)) : [])
            #expect(got == want, "bytes across the end of part \(n + 1)")
        }

        // An upload whose parts fail: aborted, nothing left in progress.
        struct Broken: Error {}
        let failing = AsyncThrowingStream<ByteBuffer, any Error> { continuation in
            continuation.yield(ByteBuffer(bytes: Self.bytes(5 << 20, seed: 9)))
            continuation.finish(throwing: Broken())
        }
        await #expect(throws: Broken.self) { try await client.upload(bucket: "tiles", key: "broken.tif", parts: failing) }
        let uploads = try await client.send(.GET, "ListMultipartUploads", bucket: "tiles", query: [("uploads", nil)])
        let listing = String(buffer: try await uploads.body.collect(upTo: 1 << 20))
        #expect(S3XML.elements("Upload", in: listing).isEmpty, "\(listing)")
        #expect(try await client.head(bucket: "tiles", key: "broken.tif") == nil)

        // An upload cancelled between its parts: aborted all the same, nothing left in progress.
        let cancelled = Task {
            try await client.upload(bucket: "tiles", key: "cancelled.tif", parts: Parts(count: 3, size: 5 << 20, cancelsAfter: 1))
        }
        await #expect(throws: (any Error).self) { try await cancelled.value }
        let after = try await client.send(.GET, "ListMultipartUploads", bucket: "tiles", query: [("uploads", nil)])
        #expect(S3XML.elements("Upload", in: String(buffer: try await after.body.collect(upTo: 1 << 20))).isEmpty)
        // No parts: an empty object.
        try await client.upload(bucket: "tiles", key: "empty", parts: Parts(count: 0, size: 0))
        #expect(try await client.head(bucket: "tiles", key: "empty")?.size == 0)
        // Keys with bytes S3 encodes: each stored and listed as given.
        let odd = ["a+b/c d.jpg", "100%/x.jpg", "ünïcode/日本.jpg", "tilde~/semi;colon=.jpg"]
        for key in odd { try await client.put(bucket: "tiles", key: "odd/" + key, body: ByteBuffer(string: key)) }
        #expect(
            try await client.listAll(bucket: "tiles", prefix: "odd/").map(\.key)
                == odd.map { "odd/" + $0 }.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
        for key in odd { #expect(String(buffer: try await client.get(bucket: "tiles", key: "odd/" + key)) == key, "\(key)") }

        // A presigned GET, fetched without any signing of the client's.
        let url = client.presignedURL(bucket: "tiles", key: "maps/photo 1.jpg", expires: 300)
        let plain = try await HTTPClient.shared.execute(HTTPClientRequest(url: url), timeout: .seconds(30))
        #expect(plain.status == .ok)
        #expect(Array(try await plain.body.collect(upTo: 1 << 20).readableBytesView) == photo)

        // A wrong secret: 403, not tried again.
        var wrong = server.configuration
        wrong.credentials.secretAccessKey = "not the secret"
        do {
            _ = try await S3Client(configuration: wrong).head(bucket: "tiles", key: "maps/photo 1.jpg")
            Issue.record("a wrong secret was accepted")
        } catch {
            #expect(error.status == 403, "\(error)")
        }

        // DELETE.
        try await client.delete(bucket: "tiles", key: "maps/photo 1.jpg")
        #expect(try await client.head(bucket: "tiles", key: "maps/photo 1.jpg") == nil)
    }
}

/// Parts of a multipart upload made as they are asked for (one held in memory at a time), each
/// ``S3StoreTests/part(_:size:)``; with `cancelsAfter`, the task is cancelled once that many were given.
struct Parts: AsyncSequence, Sendable {
    var count: Int
    var size: Int
    var cancelsAfter: Int?

    struct AsyncIterator: AsyncIteratorProtocol {
        let parts: Parts
        var given = 0
        mutating func next() async throws -> ByteBuffer? {
            if let stop = parts.cancelsAfter, given == stop { withUnsafeCurrentTask { $0?.cancel() } }
            guard given < parts.count else { return nil }
            defer { given += 1 }
            return ByteBuffer(bytes: S3StoreTests.part(given, size: parts.size))
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(parts: self) }
}
