public import NIOCore
import NIOConcurrencyHelpers
import TileCore

/// An encoded image (a tile, a region), as the server answers it: immutable, shared by reference
/// between the cache and every answer that sends it.
public final class EncodedImage: Sendable {
    /// The encoded bytes (shared, never copied, by every answer that sends them).
    public let body: ByteBuffer
    public var mediaType: String { head.mediaType }
    /// Its strong validator (`"…"`), derived from the source's fingerprint and the request; nil for an
    /// image of a pyramid still being built (never cached, `no-store`).
    public let entityTag: String?
    /// Its source's modification time as an HTTP date (`Last-Modified`), with the entity tag.
    public var lastModified: String? { head.lastModified }
    /// Its header fields other than the length.
    let head: ImageHead
    /// Of a cached image: the image's identifier and its source's version (an entry whose version is
    /// no longer the image's is stale).
    let id: String
    let version: String
    /// The head of its 200 answer up to the `Date` field, written once: what the connection handler
    /// sends for a cached image (empty for one that is never cached, which only the routes answer).
    let responseHead: ByteBuffer

    /// - Parameter cacheable: whether the image may be kept and answered by the connection handler
    ///   (its 200 head is then written once, here); false for an image of a pyramid still being built.
    init(body: ByteBuffer, head: ImageHead, id: String = "", version: String = "", cacheable: Bool = true) {
        (self.body, self.head, self.id, self.version, entityTag) = (body, head, id, version, head.entityTag?.text)
        var prepared = ByteBuffer()
        if cacheable {
            prepared = ByteBufferAllocator().buffer(capacity: 384)
            head.write(contentLength: body.readableBytes, into: &prepared)
        }
        responseHead = prepared
    }
}

/// Encoded images of complete pyramids, most recently used kept, bounded by their bytes: a viewer's
/// working set of tiles is answered without reading or encoding again.
///
/// What is cheap to make again (a whole stored tile, which the page cache holds) is kept only once it
/// is asked for again (``isRepeated(_:)``), so that such tiles asked for once each (a scan) do not push
/// out what was rendered.
///
/// Keys are the requests' paths as written; an entry keeps the version of the source it was made from,
/// so ``TileService`` never answers from an entry of an older version. The entries are spread over 16 shards by their key's hash,
/// each with its own lock and a sixteenth of the capacity, so that the event loops answering cached
/// tiles at once seldom wait for each other.
public final class EncodedTileCache: Sendable {
    /// Bytes of encoded images kept at most.
    public let capacity: Int
    /// The shards, each behind its own lock (a pthread mutex: see ``TiledImage``'s `state` for why not
    /// the standard library's `Mutex`).
    private let shards: [NIOLockedValueBox<Shard>]

    private struct Shard {
        var entries: [String: EncodedImage] = [:]
        var uses = UseOrder<String>()
        var bytes = 0
        /// Hashes of the keys ``isRepeated(_:)`` was asked about, cleared when it holds `seenLimit`.
        var seen = Set<Int>()
    }

    /// - Parameter capacity: bytes kept at most (default 64 MiB; 0 keeps nothing).
    public init(capacity: Int = 64 << 20) {
        self.capacity = max(0, capacity)
        shards = (0..<16).map { _ in NIOLockedValueBox(Shard()) }
    }

    private var shardCapacity: Int { capacity / shards.count }
    /// Keys a shard remembers as seen: about as many as it holds tiles of 8 KiB.
    private var seenLimit: Int { max(64, shardCapacity / 8192) }

    private func shard(_ key: String) -> NIOLockedValueBox<Shard> { shard(hash: key.hashValue) }
    private func shard(hash: Int) -> NIOLockedValueBox<Shard> { shards[Int(UInt(bitPattern: hash) % UInt(shards.count))] }

    /// Bytes kept now.
    public var byteCount: Int { shards.reduce(0) { total, shard in total + shard.withLockedValue { $0.bytes } } }
    /// Images kept now.
    public var count: Int { shards.reduce(0) { total, shard in total + shard.withLockedValue { $0.entries.count } } }

    /// The image kept for `key` (sharing the cache's storage), marked as just used; nil when none is.
    public func image(for key: String) -> EncodedImage? {
        shard(key).withLockedValue { s in
            guard let image = s.entries[key] else { return nil }
            s.uses.use(key)
            return image
        }
    }

    /// Keeps `image`, dropping the least recently used entries of its shard past the shard's capacity.
    public func insert(_ image: EncodedImage, for key: String) {
        let limit = shardCapacity, size = image.body.readableBytes
        guard size <= limit else { return }
        shard(key).withLockedValue { s in
            s.uses.use(key)
            if let old = s.entries.updateValue(image, forKey: key) { s.bytes -= old.body.readableBytes }
            s.bytes += size
            guard s.bytes > limit else { return }
            // Evict in one pass: oldest first, until a quarter below the capacity (so that a full shard
            // does not sort on every insert).
            let target = limit - limit / 4
            for oldKey in s.uses.oldestFirst(s.entries.keys) where s.bytes > target {
                s.bytes -= s.entries.removeValue(forKey: oldKey)?.body.readableBytes ?? 0
                s.uses.remove(oldKey)
            }
        }
    }

    /// Whether `key` was asked about before, lately (a shard forgets what it saw once it has seen as many
    /// keys as it holds tiles); it is remembered as seen. Never when a shard can keep nothing.
    public func isRepeated(_ key: String) -> Bool {
        guard shardCapacity > 0 else { return false }
        let limit = seenLimit, hash = key.hashValue
        return shard(hash: hash).withLockedValue { s in
            if s.seen.contains(hash) { return true }
            if s.seen.count >= limit { s.seen.removeAll(keepingCapacity: true) }
            s.seen.insert(hash)
            return false
        }
    }

    /// Drops every image of the image `id` (an admin purge).
    public func removeAll(of id: String) {
        for shard in shards {
            shard.withLockedValue { s in
                for (key, image) in s.entries where image.id == id {
                    s.entries[key] = nil
                    s.uses.remove(key)
                    s.bytes -= image.body.readableBytes
                }
            }
        }
    }
}
