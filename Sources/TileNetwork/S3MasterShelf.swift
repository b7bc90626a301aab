public import Foundation
import AsyncHTTPClient
import NIOCore
import NIOHTTP1
public import TileActors
import TileCore

/// A ``TileActors/MasterShelf`` in a bucket: the master of image `id` is the object `PREFIX/id.SUFFIX`
/// (`s3://archive/masters/maps/rome.jpg` is `maps/rome` under `s3://archive/masters`), its version
/// the object's entity tag (with its size and date). `tiler serve --source s3://BUCKET/PREFIX` serves a bucket's masters through
/// one: each built on its first request as it downloads.
public struct S3MasterShelf: MasterShelf {
    public let client: S3Client
    /// The bucket and the prefix its masters are under (empty: the bucket's top).
    public let prefix: S3Location

    /// - Parameter prefix: `s3://BUCKET/PREFIX`; a `/` at its end is ignored.
    public init(client: S3Client, prefix: S3Location) {
        var key = prefix.key
        while key.hasSuffix("/") { key.removeLast() }
        (self.client, self.prefix) = (client, S3Location(bucket: prefix.bucket, key: key))
    }

    public var description: String { prefix.description }

    /// The key of `name` (`maps/rome.jpg`) under the prefix.
    func key(_ name: String) -> String { prefix.key.isEmpty ? name : "\(prefix.key)/\(name)" }

    public func check() async throws {
        _ = try await client.list(bucket: prefix.bucket, prefix: prefix.key, maximum: 1)
    }

    /// One page of the listing of the keys that start with `PREFIX/id.` and hold no `/` after it.
    public func find(_ id: String, suffixes: [String]) async throws -> ShelvedMaster? {
        let start = key("\(id).")
        // One page, with the delimiter: `id.SUFFIX` holds no `/` (a store beside it, `id.tiles/...`, is one entry).
        let objects = try await client.listFolder(bucket: prefix.bucket, prefix: start, mostPages: 1).objects
        let bySuffix = Dictionary(objects.map { (String($0.key.dropFirst(start.count)), $0) }, uniquingKeysWith: { first, _ in first })
        guard let object = suffixes.lazy.compactMap({ bySuffix[$0] }).first else { return nil }
        return ShelvedMaster(
            id: id, location: object.key, byteCount: object.size, version: object.entityTag,
            lastModified: object.lastModified.map(Self.nanoseconds(listed:)) ?? 0)
    }

    public func contents(ofFolder folder: String, suffixes: [String]) async throws -> (images: [String], folders: [String]) {
        let start = key(folder.isEmpty ? "" : "\(folder)/")
        let listed = try await client.listFolder(
            bucket: prefix.bucket, prefix: prefix.key.isEmpty && folder.isEmpty ? "" : start, mostPages: Self.mostListingPages)
        let relative = folder.isEmpty ? "" : "\(folder)/"
        let offset = prefix.key.isEmpty && folder.isEmpty ? 0 : start.count
        var images: Set<String> = []
        for object in listed.objects {
            let name = object.key.dropFirst(offset)
            let (id, suffix) = ((name as NSString).deletingPathExtension, (name as NSString).pathExtension)
            if suffixes.contains(suffix), !id.isEmpty { images.insert(relative + id) }
        }
        let folders = listed.folders.map { $0.dropFirst(offset).dropLast() }.filter { !$0.isEmpty && !$0.hasSuffix(".tiles") }
        return (images.sorted(), folders.map { relative + $0 }.sorted())
    }

    /// Pages of a folder's listing read at most (1,000 entries each): a folder of more shows its first 20,000.
    public static let mostListingPages = 20

    public func source(of master: ShelvedMaster) -> any ImageSource {
        var source = S3ImageSource(client: client, location: S3Location(bucket: prefix.bucket, key: master.location))
        source.ifMatch = master.version.isEmpty ? nil : master.version
        return source
    }

    /// As ``S3StoreShelf/isUnavailable(_:)``: no answer, a 5xx, a 403 or a missing bucket.
    public func isUnavailable(_ error: any Error) -> Bool { S3Error.isUnavailable(error) }

    /// A listing's `LastModified` (`2026-12-02T09:41:03.000Z`) in nanoseconds since the epoch; 0 when unreadable.
    static func nanoseconds(listed text: String) -> Int64 {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        var date = formatter.date(from: text)
        if date == nil {
            formatter.formatOptions = [.withInternetDateTime]
            date = formatter.date(from: text)
        }
        // Held at the ends of `Int64` (the years 1677 and 2262), as a file's times are: a listing is the
        // bucket's word, and a date past them trapped.
        guard let nanoseconds = date.map({ $0.timeIntervalSince1970 * 1e9 }), nanoseconds.isFinite else { return 0 }
        return nanoseconds >= 0x1p63 ? .max : nanoseconds <= -0x1p63 ? .min : Int64(nanoseconds)
    }
}

extension S3Client {
    /// What a folder of a bucket holds: the objects whose keys start with `prefix` and hold no `/`
    /// after it, and the folders below it (`prefix` + a name + `/`), from `ListObjectsV2` with the
    /// delimiter `/`, page after page, `mostPages` at most.
    public func listFolder(bucket: String, prefix: String, mostPages: Int = .max) async throws(S3Error) -> (objects: [S3Object], folders: [String]) {
        var (objects, folders): ([S3Object], [String]) = ([], [])
        var next: String?
        var seen: Set<String> = []
        var pages = 0
        repeat {
            pages += 1
            var query: [(String, String?)] = [("list-type", "2"), ("prefix", prefix), ("delimiter", "/"), ("max-keys", "1000")]
            if let next { query.append(("continuation-token", next)) }
            let response = try await send(.GET, "ListObjectsV2", bucket: bucket, query: query)
            let text: String
            do { text = String(buffer: try await response.body.collect(upTo: 16 << 20)) } catch {
                throw S3Error(operation: "ListObjectsV2", bucket: bucket, key: prefix, status: 200, cause: "\(error)")
            }
            objects += Self.objects(listed: text)
            folders += S3XML.elements("CommonPrefixes", in: text).compactMap { S3XML.values("Prefix", in: $0).first }
            next = S3XML.values("IsTruncated", in: text).first == "true" ? S3XML.values("NextContinuationToken", in: text).first : nil
            if let token = next, token.isEmpty || !seen.insert(token).inserted {
                throw S3Error(
                    operation: "ListObjectsV2", bucket: bucket, key: prefix, status: 200,
                    cause: "a truncated listing without a new continuation token")
            }
        } while next != nil && pages < mostPages
        return (objects, folders)
    }
}
