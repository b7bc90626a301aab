public import Foundation
public import NIOCore
import NIOFoundationCompat
public import NIOPosix
import TileActors
import TileCore

/// A TIFF store kept in a bucket: a manifest object `PREFIX/manifest.json` (the local store's manifest,
/// with an `object` section naming the TIFF's key, size and entity tag) and the TIFF object it names.
/// The manifest is written last and names one TIFF object by its entity tag: a reader either finds
/// no manifest, or a whole store (``S3Client/store(at:)`` checks the TIFF against it).
public struct S3Store: Sendable, Hashable {
    /// The store's prefix (`s3://tiles/maps/rome.tiles`): its manifest is `KEY/manifest.json`.
    public var location: S3Location
    /// The TIFF's key, size and entity tag, as the manifest names them.
    public var tiffKey: String
    public var tiffByteCount: Int
    public var tiffEntityTag: String
    /// FNV-1a 64 of the master's bytes, in hex, as the local store's manifest has it.
    public var sourceFingerprint: String
    /// The manifest object's bytes.
    public var manifest: Data
    /// The version of the master the store was built from, as its publisher named it (a server's
    /// fingerprint of an object in a bucket: its size, entity tag and date); nil when none was named.
    public var masterVersion: String?

    /// The manifest's key under a store's prefix (`/` at the prefix's end ignored).
    public static func manifestKey(of location: S3Location) -> String { "\(prefix(of: location))manifest.json" }

    /// The store's keys' start: its prefix and one `/`.
    static func prefix(of location: S3Location) -> String {
        var key = location.key
        while key.hasSuffix("/") { key.removeLast() }
        return key + "/"
    }
}

extension S3Client {
    /// The bytes of a part of a store's TIFF uploaded at once (16 MiB): what the upload holds in memory.
    public static let storePartSize = 16 << 20

    /// Publishes the TIFF store folder at `path` (a store `tiler build` or ``ImageBuilder`` wrote, TIFF
    /// format) as `location` (a prefix naming the store, `s3://tiles/maps/rome.tiles`): the TIFF first,
    /// under a key of its own (`pyramid-XXXXXXXX.tif`, multipart, a part at a time read on
    /// `threadPool`), then the manifest, last. A store already there is replaced: its manifest is
    /// overwritten (one `PUT`, atomic as S3's are), then its TIFF deleted; a reader that read the old
    /// manifest and finds its TIFF gone reads the manifest again. A failure or a cancellation before
    /// the new manifest is written leaves the old store as it was, and no object of the new one.
    /// - Parameter masterVersion: the version of the master the store was built from, written in the
    ///   manifest (`masterVersion`) for a server that builds from the same master to compare.
    /// - Throws: ``TileError/Code/invalidStore`` when `path` holds no TIFF store,
    ///   ``TileError/Code/invalidArgument`` for a location with no key; ``S3Error``; `CancellationError`.
    @discardableResult
    public func publishStore(
        at path: String, to location: S3Location, masterVersion: String? = nil, threadPool: NIOThreadPool = .singleton
    ) async throws -> S3Store {
        let prefix = S3Store.prefix(of: location)
        guard prefix != "/" else { throw TileError(.invalidArgument, "\(location) names no store: s3://BUCKET/PREFIX") }
        // The manifest and the TIFF it names opened together, before any wait on the network: a store
        // replaced at `path` meanwhile (a newer build) is never published as one manifest and another's TIFF.
        let (local, file) = try await threadPool.blocking { () throws(TileError) -> (Data, ReadOnlyFile) in
            func read() throws(TileError) -> Data {
                guard let data = try? Data(contentsOf: URL(fileURLWithPath: "\(path)/manifest.json")), data.count <= 1 << 20 else {
                    throw TileError(.invalidStore, "\(path) holds no store (no readable manifest.json)")
                }
                return data
            }
            let local = try read()
            let file = try ReadOnlyFile(path: "\(path)/\(try Self.localManifest(local, of: path).tiff)")
            guard try read() == local else { throw TileError(.invalidStore, "\(path) was replaced while it was opened: not published") }
            return (local, file)
        }
        var (manifest, tiffName) = try Self.localManifest(local, of: path)
        if let masterVersion { manifest["masterVersion"] = masterVersion }
        let previous = try? await store(at: location)
        let tiffKey = prefix + "pyramid-\(UUID().uuidString.prefix(8).lowercased()).tif"
        let published: (tag: String, manifest: Data)
        do {
            published = try await upload(file, as: tiffKey, to: location, manifest: manifest, path: "\(path)/\(tiffName)", threadPool: threadPool)
        } catch {
            // Not published: the new TIFF removed (a clean-up: the reason may be a cancellation), unless a
            // manifest PUT whose answer was lost did publish it.
            let client = self
            await cleanUp {
                if (try? await client.store(at: location))?.tiffKey != tiffKey { try? await client.delete(bucket: location.bucket, key: tiffKey) }
            }
            throw error
        }
        // The old store's TIFF, when it is one of this prefix's (a copied manifest may name another's).
        if let previous, previous.tiffKey != tiffKey, previous.tiffKey.hasPrefix(prefix) {
            try? await delete(bucket: location.bucket, key: previous.tiffKey)
        }
        return S3Store(
            location: location, tiffKey: tiffKey, tiffByteCount: file.byteCount, tiffEntityTag: published.tag,
            sourceFingerprint: manifest["sourceFingerprint"] as? String ?? "", manifest: published.manifest, masterVersion: masterVersion)
    }

    /// Uploads `file` as `key`, then the manifest naming it under `location`: the manifest's bytes.
    private func upload(
        _ file: ReadOnlyFile, as key: String, to location: S3Location, manifest local: [String: Any], path: String, threadPool: NIOThreadPool
    ) async throws -> (tag: String, manifest: Data) {
        let tag = try await upload(
            bucket: location.bucket, key: key, parts: FileParts(file: file, partSize: Self.storePartSize, threadPool: threadPool),
            contentType: "image/tiff")
        guard await threadPool.blocking({ file.isUnchanged() }) else { throw TileError(.invalidStore, "\(path) changed while it was uploaded") }
        // The TIFF's name in the manifest is the object's (a prefix copied to a folder is a store).
        var manifest = local
        var tiff = manifest["tiff"] as? [String: Any] ?? [:]
        tiff["file"] = String(key.split(separator: "/").last ?? "")
        manifest["tiff"] = tiff
        manifest["object"] = ["key": key, "size": file.byteCount, "entityTag": tag]
        let bytes = try JSONSerialization.data(withJSONObject: manifest, options: [.prettyPrinted, .sortedKeys])
        try Task.checkCancellation()
        try await put(bucket: location.bucket, key: S3Store.manifestKey(of: location), body: ByteBuffer(data: bytes), contentType: "application/json")
        return (tag, bytes)
    }

    /// The store published at `location`, or nil when it has no manifest.
    /// - Throws: ``TileError/Code/invalidStore`` when the manifest is not one ``publishStore(at:to:masterVersion:threadPool:)``
    ///   writes, or names a TIFF object that is not there as it says (another publish replaced it
    ///   since: read the manifest again); ``S3Error``.
    public func store(at location: S3Location) async throws -> S3Store? {
        let key = S3Store.manifestKey(of: location)
        let bytes: ByteBuffer
        // No such key: no store. Another 404 (no such bucket) or a 403 is an error (AWS answers 403 for
        // a missing key to whom may not list the bucket).
        do { bytes = try await get(bucket: location.bucket, key: key, limit: 1 << 20) } catch {
            if error.code == "NoSuchKey" { return nil }
            throw error
        }
        let data = Data(bytes.readableBytesView)
        guard let manifest = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let object = manifest["object"] as? [String: Any], let tiffKey = object["key"] as? String,
            let size = object["size"] as? Int, let tag = object["entityTag"] as? String,
            let fingerprint = manifest["sourceFingerprint"] as? String
        else { throw TileError(.invalidStore, "\(location)/manifest.json is not a store's manifest") }
        guard let tiff = try await head(bucket: location.bucket, key: tiffKey), tiff.size == size, tiff.entityTag == tag else {
            throw TileError(.invalidStore, "\(location): the TIFF its manifest names (\(tiffKey), \(size) bytes) is not there as named")
        }
        return S3Store(
            location: location, tiffKey: tiffKey, tiffByteCount: size, tiffEntityTag: tag, sourceFingerprint: fingerprint, manifest: data,
            masterVersion: manifest["masterVersion"] as? String)
    }

    /// The manifest `data` of the TIFF store at `path`, as JSON, and its TIFF's file name.
    static func localManifest(_ data: Data, of path: String) throws(TileError) -> (manifest: [String: Any], tiff: String) {
        guard let manifest = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
            throw TileError(.invalidStore, "\(path)/manifest.json is not JSON")
        }
        guard manifest["format"] as? String == "tiff", let tiff = (manifest["tiff"] as? [String: Any])?["file"] as? String,
            !tiff.contains("/"), !tiff.isEmpty
        else { throw TileError(.invalidStore, "\(path) is not a TIFF store: only TIFF stores go to a bucket (tiler build --format tiff)") }
        return (manifest, tiff)
    }
}

/// A file's bytes as parts of `partSize`, each read when it is asked for, on a thread pool.
struct FileParts: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let file: ReadOnlyFile
    let partSize: Int
    let threadPool: NIOThreadPool

    struct AsyncIterator: AsyncIteratorProtocol {
        let parts: FileParts
        var offset = 0

        mutating func next() async throws -> ByteBuffer? {
            let (file, at) = (parts.file, offset)
            guard at < file.byteCount else { return nil }
            let count = Swift.min(parts.partSize, file.byteCount - at)
            offset += count
            return try await parts.threadPool.read(file, at: at, count: count)
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(parts: self) }
}
