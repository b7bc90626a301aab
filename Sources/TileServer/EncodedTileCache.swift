public import Foundation
import Synchronization

/// Encoded images of complete pyramids, most recently used kept, bounded by their bytes: a viewer's
/// working set of tiles is answered without reading or encoding again.
///
/// Only images of complete pyramids go in (they never change); a lookup is one dictionary access
/// under a lock, from any thread.
public final class EncodedTileCache: Sendable {
    /// Bytes of encoded images kept at most.
    public let capacity: Int
    private let state: Mutex<State>

    private struct State {
        var entries: [String: Entry] = [:]
        var bytes = 0
        var clock: UInt64 = 0
    }

    private struct Entry {
        var data: Data
        var lastUse: UInt64
    }

    /// - Parameter capacity: bytes kept at most (default 64 MiB; 0 keeps nothing).
    public init(capacity: Int = 64 << 20) {
        self.capacity = max(0, capacity)
        state = Mutex(State())
    }

    /// Bytes kept now.
    public var byteCount: Int { state.withLock { $0.bytes } }
    /// Images kept now.
    public var count: Int { state.withLock { $0.entries.count } }

    public func data(for key: String) -> Data? {
        state.withLock { s in
            guard var entry = s.entries[key] else { return nil }
            s.clock += 1
            entry.lastUse = s.clock
            s.entries[key] = entry
            return entry.data
        }
    }

    /// Keeps `data`, dropping the least recently used entries past the capacity.
    public func insert(_ data: Data, for key: String) {
        guard data.count <= capacity else { return }
        state.withLock { s in
            s.clock += 1
            if let old = s.entries.updateValue(Entry(data: data, lastUse: s.clock), forKey: key) { s.bytes -= old.data.count }
            s.bytes += data.count
            guard s.bytes > capacity else { return }
            // Evict in one pass: oldest first, until a quarter below the capacity (so that a full cache
            // does not sort on every insert).
            let target = capacity - capacity / 4
            for (oldKey, entry) in s.entries.sorted(by: { $0.value.lastUse < $1.value.lastUse }) where s.bytes > target {
                s.entries[oldKey] = nil
                s.bytes -= entry.data.count
            }
        }
    }
}
