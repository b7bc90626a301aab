internal import CJpegShim

/// Per level, how many stored tile rows are complete: written by the pyramid writer's threads with
/// release stores, read by any thread with acquire loads, so a tile is readable as soon as its row is.
///
/// @unchecked Sendable: the storage is only touched through atomic loads and stores (in C), and it is
/// freed only when the last owner (the image, and the writer while it runs) lets go.
final class TileRowCounters: @unchecked Sendable {
    let entries: UnsafeMutablePointer<UInt32>
    let count: Int

    init(count: Int, initialValues: [Int]? = nil) {
        self.count = count
        entries = .allocate(capacity: max(count, 1))
        for i in 0..<count { entries[i] = UInt32(initialValues?[i] ?? 0) }
    }

    deinit { entries.deallocate() }

    subscript(level: Int) -> Int {
        get { Int(cjs_load_progress(entries + level)) }
        set { cjs_store_progress(entries + level, UInt32(newValue)) }
    }

    /// Blocks until `level`'s count is stored to (every store wakes its waiters: the entries are
    /// futex words), it is no longer `seen`, or `timeout` has passed. Blocking: never on Swift's
    /// cooperative pool.
    func wait(level: Int, whileAt seen: Int, timeout: Duration) {
        let (seconds, attoseconds) = max(timeout, .zero).components
        let nanoseconds = seconds >= Int64.max / 1_000_000_000 ? Int64.max : seconds * 1_000_000_000 + attoseconds / 1_000_000_000
        cjs_wait_progress(entries + level, UInt32(truncatingIfNeeded: seen), nanoseconds)
    }
}
