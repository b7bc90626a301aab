import AsyncHTTPClient
public import Foundation
import NIOCore
public import NIOPosix
public import TileActors
import TileCore

/// A ``TileActors/StoreShelf`` in a bucket: the store of image `id` is the one
/// ``S3Client/publishStore(at:to:masterVersion:threadPool:)`` publishes at `PREFIX/id.tiles` (its manifest
/// `PREFIX/id.tiles/manifest.json`, written last, naming its TIFF). `tiler serve --store s3://BUCKET/PREFIX`
/// shares its stores through one; `tiler build <image> --out s3://BUCKET/PREFIX/ID.tiles` writes a store
/// it finds for the image `ID` (built from the same master's bytes).
public struct S3StoreShelf: StoreShelf {
    public let client: S3Client
    /// The bucket and the prefix its stores are under (empty: the bucket's top).
    public let prefix: S3Location
    public let threadPool: NIOThreadPool

    /// - Parameter prefix: `s3://BUCKET/PREFIX`; a `/` at its end is ignored.
    public init(client: S3Client, prefix: S3Location, threadPool: NIOThreadPool = .singleton) {
        var key = prefix.key
        while key.hasSuffix("/") { key.removeLast() }
        (self.client, self.prefix, self.threadPool) = (client, S3Location(bucket: prefix.bucket, key: key), threadPool)
    }

    public var description: String { prefix.description }

    /// Where the store of `id` is: `PREFIX/id.tiles` (an identifier's `/` is a key's).
    public func location(of id: String) -> S3Location {
        S3Location(bucket: prefix.bucket, key: prefix.key.isEmpty ? "\(id).tiles" : "\(prefix.key)/\(id).tiles")
    }

    public func check() async throws {
        _ = try await client.list(bucket: prefix.bucket, prefix: prefix.key, maximum: 1)
    }

    public func find(_ id: String) async throws -> ShelvedStore? {
        guard let store = try await client.store(at: location(of: id)) else { return nil }
        let manifest = (try? JSONSerialization.jsonObject(with: store.manifest)) as? [String: Any]
        return ShelvedStore(
            id: id, manifest: store.manifest, tiffByteCount: store.tiffByteCount, tiffLocation: store.tiffKey,
            tiffVersion: store.tiffEntityTag, sourceByteCount: manifest?["sourceByteCount"] as? Int,
            sourceFingerprint: store.sourceFingerprint, masterVersion: store.masterVersion)
    }

    /// Bytes of the TIFF gathered before each write to the disk.
    static let writeSize = 1 << 20

    public func copy(_ store: ShelvedStore, to path: String) async throws {
        let pool = threadPool
        let incoming = try await pool.blocking { () throws(TileError) in try IncomingStore(path: path, byteCount: store.tiffByteCount) }
        do {
            // Every byte of the version `find` saw (If-Match): one replaced since fails, never mixes.
            let tag = store.tiffVersion.isEmpty ? nil : store.tiffVersion
            let response = try await client.stream(bucket: prefix.bucket, key: store.tiffLocation, ifMatch: tag)
            var pending = ByteBuffer()
            func write() async throws(TileError) {
                let bytes = pending
                pending = ByteBuffer()
                try await pool.blocking { () throws(TileError) in
                    var failure: TileError?
                    bytes.withUnsafeReadableBytes { raw in
                        do throws(TileError) { try incoming.append(raw) } catch { failure = error }
                    }
                    if let failure { throw failure }
                }
            }
            for try await part in response.body {
                try Task.checkCancellation()
                var part = part
                pending.writeBuffer(&part)
                if pending.readableBytes >= Self.writeSize { try await write() }
            }
            if pending.readableBytes > 0 { try await write() }
            try await pool.blocking { () throws(TileError) in try incoming.publish(manifest: store.manifest) }
        } catch {
            // Its files removed on the pool (a TIFF of gigabytes unlinked is not the cooperative pool's work).
            await pool.blocking { incoming.discard() }
            throw error
        }
    }

    /// `store` read where it lies (``S3StoredPyramid``): its TIFF's directories by ranged GETs, then
    /// each tile asked for by one.
    public func open(_ store: ShelvedStore) async throws -> (any ShelvedPyramid)? {
        let found = S3Store(
            location: location(of: store.id), tiffKey: store.tiffLocation, tiffByteCount: store.tiffByteCount,
            tiffEntityTag: store.tiffVersion, sourceFingerprint: store.sourceFingerprint, manifest: store.manifest,
            masterVersion: store.masterVersion)
        return try await S3StoredPyramid.open(client: client, store: found, threadPool: threadPool)
    }

    /// An ``S3Error`` with no answer (the connection's), a 5xx, a 403 (credentials refused) or a missing
    /// bucket; not a missing key or a 412 (a store replaced meanwhile), nor any other error.
    public func isUnavailable(_ error: any Error) -> Bool { S3Error.isUnavailable(error) }

    public func publish(_ id: String, store path: String, masterVersion: String?) async throws {
        try await client.publishStore(at: path, to: location(of: id), masterVersion: masterVersion, threadPool: threadPool)
    }
}
