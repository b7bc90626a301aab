public import Foundation
public import NIOCore
import Synchronization

/// Encoded images of complete pyramids, most recently used kept, bounded by their bytes: a viewer's
/// working set of tiles is answered without reading or encoding again.
///
/// Only images of complete pyramids go in (they never change). The entries are spread over 16 shards by
/// their key's hash, each with its own lock and a sixteenth of the capacity, so that the event loops
/// answering cached tiles at once seldom wait for each other.
public final class EncodedTileCache: Sendable {
    /// Bytes of encoded images kept at most.
    public let capacity: Int
    private let shards: [Locked]

    /// One shard behind its lock (a class: a `Mutex` cannot be an array's element).
    private final class Locked: Sendable {
        let state = Mutex(Shard())
    }

    private struct Shard {
        var entries: [String: Entry] = [:]
        var bytes = 0
        var clock: UInt64 = 0
    }

    private struct Entry {
        var bytes: ByteBuffer
        /// The response head stored with it (``setHead(_:for:)``), counted in the bytes kept.
        var head: ByteBuffer?
        var lastUse: UInt64
        var byteCount: Int { bytes.readableBytes + (head?.readableBytes ?? 0) }
    }

    /// - Parameter capacity: bytes kept at most (default 64 MiB; 0 keeps nothing).
    public init(capacity: Int = 64 << 20) {
        self.capacity = max(0, capacity)
        shards = (0..<16).map { _ in Locked() }
    }

    private var shardCapacity: Int { capacity / shards.count }

    private func shard(_ key: String) -> Locked {
        var hash: UInt32 = 2_166_136_261
        for byte in key.utf8 { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        return shards[Int(hash % UInt32(shards.count))]
    }

    /// Bytes kept now.
    public var byteCount: Int { shards.reduce(0) { total, shard in total + shard.state.withLock { $0.bytes } } }
    /// Images kept now.
    public var count: Int { shards.reduce(0) { total, shard in total + shard.state.withLock { $0.entries.count } } }

    /// The image kept for `key`, marked as just used; nil when none is.
    public func data(for key: String) -> Data? {
        buffer(for: key).map { Data($0.readableBytesView) }
    }

    /// The image kept for `key` as a buffer (sharing the cache's storage: no copy), marked as just used.
    public func buffer(for key: String) -> ByteBuffer? {
        entry(for: key)?.body
    }

    /// The image kept for `key` and the response head stored with it (nil until one is), marked as
    /// just used.
    public func entry(for key: String) -> (body: ByteBuffer, head: ByteBuffer?)? {
        shard(key).state.withLock { s in
            guard let entry = s.entries[key] else { return nil }
            s.clock += 1
            s.entries[key]!.lastUse = s.clock
            return (entry.bytes, entry.head)
        }
    }

    /// Stores a response head with the image kept for `key` (a server's status line and fields for
    /// it, made once); nothing when no image is kept for `key`.
    public func setHead(_ head: ByteBuffer, for key: String) {
        shard(key).state.withLock { s in
            guard s.entries[key] != nil else { return }
            s.bytes += head.readableBytes - (s.entries[key]!.head?.readableBytes ?? 0)
            s.entries[key]!.head = head
        }
    }

    /// Keeps `data`, dropping the least recently used entries of its shard past the shard's capacity.
    public func insert(_ data: Data, for key: String) {
        let limit = shardCapacity
        guard data.count <= limit else { return }
        let bytes = ByteBuffer(bytes: data)
        shard(key).state.withLock { s in
            s.clock += 1
            if let old = s.entries.updateValue(Entry(bytes: bytes, lastUse: s.clock), forKey: key) { s.bytes -= old.byteCount }
            s.bytes += bytes.readableBytes
            guard s.bytes > limit else { return }
            // Evict in one pass: oldest first, until a quarter below the capacity (so that a full shard
            // does not sort on every insert).
            let target = limit - limit / 4
            for (oldKey, entry) in s.entries.sorted(by: { $0.value.lastUse < $1.value.lastUse }) where s.bytes > target {
                s.entries[oldKey] = nil
                s.bytes -= entry.byteCount
            }
        }
    }
}
