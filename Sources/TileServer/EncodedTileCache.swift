public import NIOCore
import NIOConcurrencyHelpers
import Synchronization
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
    /// How many times entries were dropped (evicted, replaced or purged); see ``removals``.
    private let removalCount = Atomic<Int>(0)

    private struct Shard {
        var entries: [Key: Entry] = [:]
        /// ``Entry/lastUse``'s clock (the one recency rule's, kept in the entry as the catalogue does).
        var uses = UseClock()
        var bytes = 0
        /// Hashes of the keys ``isRepeated(_:)`` was asked about, cleared when it holds `seenLimit`.
        var seen = Set<Int>()
    }

    private struct Entry {
        var image: EncodedImage
        var lastUse: UInt64
    }

    /// A key with its hash made once: the shard is chosen by it and the shard's table hashes only it
    /// (every cached answer looks a key up; the key's text is hashed once, not three times).
    private struct Key: Hashable {
        let text: String
        let hash: Int

        init(_ text: String) { (self.text, hash) = (text, text.hashValue) }
        func hash(into hasher: inout Hasher) { hasher.combine(hash) }
        static func == (a: Key, b: Key) -> Bool { a.hash == b.hash && a.text == b.text }
    }

    /// - Parameter capacity: bytes kept at most (default 64 MiB; 0 keeps nothing).
    public init(capacity: Int = 64 << 20) {
        self.capacity = max(0, capacity)
        shards = (0..<16).map { _ in NIOLockedValueBox(Shard()) }
    }

    private var shardCapacity: Int { capacity / shards.count }
    /// Keys a shard remembers as seen: about as many as it holds tiles of 8 KiB.
    private var seenLimit: Int { max(64, shardCapacity / 8192) }

    private func shard(hash: Int) -> NIOLockedValueBox<Shard> { shards[Int(UInt(bitPattern: hash) % UInt(shards.count))] }

    /// Bytes kept now.
    public var byteCount: Int { shards.reduce(0) { total, shard in total + shard.withLockedValue { $0.bytes } } }
    /// Images kept now.
    public var count: Int { shards.reduce(0) { total, shard in total + shard.withLockedValue { $0.entries.count } } }

    /// How many times the cache has dropped entries (evicted, replaced by another image, purged): a
    /// caller that keeps an image it was given (``AnswerMemo``), read before the look-up, knows the cache
    /// still holds it while this stays the same.
    public var removals: Int { removalCount.load(ordering: .acquiring) }

    /// The image kept for `key` (sharing the cache's storage), marked as just used; nil when none is.
    public func image(for key: String) -> EncodedImage? {
        let key = Key(key)
        return shard(hash: key.hash).withLockedValue { s in
            guard let index = s.entries.index(forKey: key) else { return nil }
            s.entries.values[index].lastUse = s.uses.tick()
            return s.entries.values[index].image
        }
    }

    /// Keeps `image`, dropping the least recently used entries of its shard past the shard's capacity.
    public func insert(_ image: EncodedImage, for key: String) {
        let limit = shardCapacity, size = image.body.readableBytes
        guard size <= limit else { return }
        let key = Key(key)
        shard(hash: key.hash).withLockedValue { s in
            if let old = s.entries.updateValue(Entry(image: image, lastUse: s.uses.tick()), forKey: key) {
                s.bytes -= old.image.body.readableBytes
                removalCount.add(1, ordering: .releasing)
            }
            s.bytes += size
            guard s.bytes > limit else { return }
            defer { removalCount.add(1, ordering: .releasing) }
            // Evict in one pass: oldest first, until a quarter below the capacity (so that a full shard
            // does not sort on every insert).
            let target = limit - limit / 4
            for (oldKey, _) in s.entries.sorted(by: { $0.value.lastUse < $1.value.lastUse }) where s.bytes > target {
                s.bytes -= s.entries.removeValue(forKey: oldKey)?.image.body.readableBytes ?? 0
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
                for (key, entry) in s.entries where entry.image.id == id {
                    s.entries[key] = nil
                    s.bytes -= entry.image.body.readableBytes
                    removalCount.add(1, ordering: .releasing)
                }
            }
        }
    }
}
