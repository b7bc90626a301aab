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
}
