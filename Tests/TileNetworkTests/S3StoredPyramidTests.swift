import Foundation
import NIOCore
import NIOFoundationCompat
import Testing
import TestSupport
import TestTraits
import TileCore
@testable import TileNetwork

/// A store published to the real store's bucket (``S3TestServer``) by `tiler build --out s3://`, read
/// where it lies (issue 43, point 3): every tile the bytes the same TIFF gives on a local disk.
@Suite("Pyramids read from a bucket (loopback store)", .serialized, .ownThreads, .enabled(if: S3TestServer.isAvailable, S3TestServer.skip))
struct S3StoredPyramidTests {
    @Test("every tile of every level by one ranged GET: the bytes of the same TIFF read from a disk; a replaced store fails, never mixes")
    func tilesFromTheBucket() async throws {
        let server = try S3TestServer()
        defer { server.stop() }
        let client = S3Client(configuration: server.configuration)
        try await client.createBucket("stores")
        let folder = NSTemporaryDirectory() + "s3-pyramid-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try Inputs.jpeg(width: 3000, height: 2000).write(to: URL(fileURLWithPath: "\(folder)/photo.jpg"))
        let environment = [
            "AWS_ACCESS_KEY_ID": server.configuration.credentials.accessKeyID,
            "AWS_SECRET_ACCESS_KEY": server.configuration.credentials.secretAccessKey, "AWS_ENDPOINT_URL": server.configuration.endpoint
        ]
        let location = S3Location(bucket: "stores", key: "photo.tiles")
        #expect(try await S3StoredPyramid.open(client: client, location: location) == nil, "no store published yet")
        let built = try S3SourceTests.tiler(["build", "\(folder)/photo.jpg", "--out", "s3://stores/photo.tiles"], environment: environment)
        #expect(built.status == 0, "\(built)")

        let pyramid = try #require(try await S3StoredPyramid.open(client: client, location: location))
        // The reference: the same TIFF object, downloaded whole and opened from the disk.
        let tiff = try await client.get(bucket: "stores", key: pyramid.store.tiffKey)
        try Data(tiff.readableBytesView).write(to: URL(fileURLWithPath: "\(folder)/pyramid.tif"))
        let local = try TiledImage.open(tiff: "\(folder)/pyramid.tif")
        #expect(pyramid.geometry == local.geometry && local.geometry.width == 3000)
        // Its directories in a few GETs (the manifest, HEAD, then ranges), not one a tile.
        let tileCount = local.geometry.levels.reduce(0) { $0 + $1.tileCount }
        #expect(pyramid.openingRequests <= 8, "\(pyramid.openingRequests) requests to open, \(tileCount) tiles")
        for level in 0..<local.levelCount {
            let l = local.geometry.levels[level]
            for row in 0..<l.rows {
                for column in 0..<l.columns {
                    let got = try await pyramid.storedJPEGTile(level: level, column: column, row: row)
                    #expect(
                        got.map { Data($0) } == (try local.storedJPEGTile(level: level, column: column, row: row)), "tile \(level)/\(column)/\(row)")
                }
            }
        }
        await #expect(throws: TileError.self) { try await pyramid.storedJPEGTile(level: 0, column: 12, row: 0) }

        // Replaced (--force): the old pyramid's reads fail (its TIFF deleted); opened again, the new one.
        let forced = try S3SourceTests.tiler(
            ["build", "\(folder)/photo.jpg", "--out", "s3://stores/photo.tiles", "--force", "--tile-size", "512"], environment: environment)
        #expect(forced.status == 0, "\(forced)")
        do {
            _ = try await pyramid.storedJPEGTile(level: 0, column: 0, row: 0)
            Issue.record("a tile of a replaced store was read")
        } catch let error as S3Error {
            #expect(error.status == 404 || error.status == 412, "\(error)")
        }
        let again = try #require(try await S3StoredPyramid.open(client: client, location: location))
        #expect(again.geometry.tileSize == 512 && again.store.tiffKey != pyramid.store.tiffKey)
        #expect(try await again.storedJPEGTile(level: 0, column: 0, row: 0) != nil)
        // Its TIFF overwritten in place (another tag under the same key): refused by If-Match (412).
        try await client.put(bucket: "stores", key: again.store.tiffKey, body: ByteBuffer(bytes: [UInt8](repeating: 7, count: 100_000)))
        do {
            _ = try await again.storedJPEGTile(level: 0, column: 0, row: 0)
            Issue.record("a tile of an overwritten TIFF was read")
        } catch let error as S3Error {
            #expect(error.status == 412, "\(error)")
        }
    }
}

/// How the ranges read for a bucket's TIFF are kept: sorted, overlapping and touching ones joined.
@Suite("Ranges of a remote TIFF")
struct S3StoredPyramidRangeTests {
    @Test("parts joined as a plain byte map says: overlapping, touching, apart, inside, out of order")
    func merged() {
        // The reference: a map of offsets to bytes (each part's bytes are their offsets' low bytes).
        func part(_ range: Range<Int>) -> (offset: Int, bytes: [UInt8]) { (range.lowerBound, range.map { UInt8(truncatingIfNeeded: $0) }) }
        let cases: [[Range<Int>]] = [
            [0..<10, 10..<20], [0..<10, 5..<15], [20..<30, 0..<10], [0..<100, 10..<20], [50..<60, 0..<10, 9..<51], [5..<6, 7..<8, 6..<7]
        ]
        for ranges in cases {
            var parts: [(offset: Int, bytes: [UInt8])] = []
            var held = Set<Int>()
            for range in ranges {
                parts = S3StoredPyramid.merged(parts, part(range))
                held.formUnion(range)
            }
            // Sorted, apart (never touching), every byte its offset's, exactly the bytes given.
            var covered = Set<Int>()
            for (n, p) in parts.enumerated() {
                if n > 0 { #expect(p.offset > parts[n - 1].offset + parts[n - 1].bytes.count, "\(ranges): parts touch") }
                #expect(p.bytes == (p.offset..<(p.offset + p.bytes.count)).map { UInt8(truncatingIfNeeded: $0) }, "\(ranges)")
                covered.formUnion(p.offset..<(p.offset + p.bytes.count))
            }
            #expect(covered == held, "\(ranges)")
        }
    }
}
