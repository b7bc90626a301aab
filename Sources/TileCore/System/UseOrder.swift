/// Which of some keys was used least recently: the one recency rule of the package's caches (the
/// server's encoded answers, its open images, the disk budget's stores, the thumbnailer's pixels). Each cache decides what it
/// may drop; this says in which order.
///
/// A use clock per key: marking a use costs a dictionary write, and an eviction sorts the keys it
/// may drop (evictions are rare and batched; uses are every request's).
package struct UseOrder<Key: Hashable & Sendable>: Sendable {
    private var clock = UseClock()
    private var lastUse: [Key: UInt64] = [:]

    package init() {}

    /// Keys known (used and not removed).
    package var count: Int { lastUse.count }

    /// Marks `key` used now.
    package mutating func use(_ key: Key) {
        lastUse[key] = clock.tick()
    }

    /// Forgets `key`.
    package mutating func remove(_ key: Key) { lastUse[key] = nil }

    /// Forgets the keys `shouldRemove` says to.
    package mutating func removeAll(where shouldRemove: (Key) -> Bool) {
        lastUse = lastUse.filter { !shouldRemove($0.key) }
    }

    /// `keys` from the least recently used to the most (a key never used, or removed, first).
    package func oldestFirst(_ keys: some Sequence<Key>) -> [Key] {
        keys.sorted { lastUse[$0, default: 0] < lastUse[$1, default: 0] }
    }

    /// The least recently used of `keys`; nil when there are none.
    package func oldest(of keys: some Sequence<Key>) -> Key? {
        keys.min { lastUse[$0, default: 0] < lastUse[$1, default: 0] }
    }
}

/// The clock of every recency rule: each use gets a later stamp than every one before. ``UseOrder``
/// keeps a stamp per key; a holder that keeps everything of a key in one place (the server's catalogue
/// entry of an image) keeps the key's stamp there, and orders by it as ``UseOrder`` does.
package struct UseClock: Sendable {
    private var now: UInt64 = 0

    package init() {}

    /// A stamp later than every one given before (never 0: 0 is "never used").
    package mutating func tick() -> UInt64 {
        now += 1
        return now
    }
}
