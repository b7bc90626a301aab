import NIOConcurrencyHelpers
import NIOCore

/// One event loop's own index of the answers it gave from the ``EncodedTileCache``, by request
/// target as written: a warm tile asked for again on any connection of the loop is found without
/// reading its path, without a lock and without the catalogue (what nginx's per-worker
/// `open_file_cache` is to its files).
///
/// An entry answers exactly what ``TileService/cachedImage(path:remembered:)`` would, or nothing:
/// it is kept only while
/// - the cache has dropped nothing since it was looked up (``EncodedTileCache/removals``: an eviction,
///   a replacement or a purge empties the memo), so an entry never keeps an image the cache let go;
/// - the catalogue's ready images have not changed (``ImageCatalog/readyChanges``; a source that
///   changes or goes empties it);
/// - its image's source was checked within the catalogue's ``ImageCatalog/sourceRecheckInterval``.
///
/// Every ``touchEvery``-th answer of an entry marks it used in the cache too, so that the cache's
/// least-recently-used order still sees the tiles answered from here. At most ``capacity`` entries
/// and ``byteLimit`` bytes of images (then it starts again, empty). What the cache drops while the
/// loop answers nothing stays referenced here until the loop's next request or the end of its last
/// connection (the idle timeout ends those): at most ``byteLimit`` bytes a loop beyond the cache's
/// budget, for that long. Confined to its event loop (``AnswerMemos``).
final class AnswerMemo {
    /// What a target was answered with (a class: a hit reads it in place, without copying it out).
    final class Entry {
        let image: EncodedImage
        /// The metrics' label of the target's path.
        let route: ServerMetrics.Route
        /// When the image's source was last checked (``ImageCatalog/ReadyLookup``).
        let checked: ContinuousClock.Instant
        var uses: UInt32 = 0

        init(image: EncodedImage, route: ServerMetrics.Route, checked: ContinuousClock.Instant) {
            (self.image, self.route, self.checked) = (image, route, checked)
        }
    }

    /// Entries kept at most.
    static let capacity = 1024
    /// How often an entry's answer marks it used in the cache.
    static let touchEvery: UInt32 = 8

    private var entries: [String: Entry] = [:]
    /// Bytes of the images kept at most, and now.
    let byteLimit: Int
    private(set) var bytes = 0
    /// The loop's connections open now (none: nothing is kept).
    private var connections = 0
    /// The cache's ``EncodedTileCache/removals`` and the catalogue's ``ImageCatalog/readyChanges``
    /// the entries were looked up at.
    private(set) var removals = 0
    private(set) var changes = 0

    /// How many entries are kept.
    var count: Int { entries.count }

    /// - Parameter byteLimit: bytes of images kept at most (default: no bound but ``capacity``).
    init(byteLimit: Int = .max) {
        self.byteLimit = byteLimit
    }

    /// A connection of the loop opened.
    func connectionOpened() { connections += 1 }

    /// A connection of the loop ended; with the last, the entries go (their images may be gone from
    /// the cache by the time another connection comes).
    func connectionClosed() {
        connections -= 1
        if connections <= 0, !entries.isEmpty { restart(removals: removals, changes: changes) }
    }

    /// The entry for `target`, when it still answers as the cache would (see the type), its uses
    /// counted; `touches` is true on every ``touchEvery``-th (the caller marks it used in the cache).
    /// The memo is emptied when the cache dropped anything or the ready images changed.
    func entry(
        for target: String, removals: Int, changes: Int, now: ContinuousClock.Instant, recheckInterval: Duration
    ) -> (image: EncodedImage, route: ServerMetrics.Route, touches: Bool)? {
        guard removals == self.removals, changes == self.changes else {
            restart(removals: removals, changes: changes)
            return nil
        }
        guard let entry = entries[target] else { return nil }
        guard now - entry.checked < recheckInterval else {
            entries[target] = nil
            bytes -= entry.image.body.readableBytes
            return nil
        }
        entry.uses &+= 1
        return (entry.image, entry.route, entry.uses % Self.touchEvery == 0)
    }

    /// Keeps `image`, the cache's answer for `target`, looked up when the cache's removals were
    /// `removals` (read before the look-up) and the ready images' changes `changes`. Nothing is kept
    /// from a look-up older than the entries.
    func keep(_ image: EncodedImage, for target: String, route: ServerMetrics.Route, checked: ContinuousClock.Instant, removals: Int, changes: Int) {
        if removals != self.removals || changes != self.changes {
            guard removals >= self.removals, changes >= self.changes else { return }
            restart(removals: removals, changes: changes)
        }
        let size = image.body.readableBytes
        guard size <= byteLimit else { return }
        let replaced = entries[target]?.image.body.readableBytes
        if (replaced == nil && entries.count >= Self.capacity) || bytes - (replaced ?? 0) + size > byteLimit {
            restart(removals: removals, changes: changes)
        }
        if let old = entries.updateValue(Entry(image: image, route: route, checked: checked), forKey: target) {
            bytes -= old.image.body.readableBytes
        }
        bytes += size
    }

    private func restart(removals: Int, changes: Int) {
        if !entries.isEmpty { entries.removeAll(keepingCapacity: true) }
        (self.removals, self.changes, bytes) = (removals, changes, 0)
    }
}

/// The ``AnswerMemo`` of each event loop the server's connections run on, made on a loop's first
/// connection. A memo is reached only on its loop (a `NIOLoopBoundBox`, which keeps the loop).
final class AnswerMemos: Sendable {
    /// Each memo's ``AnswerMemo/byteLimit``.
    let byteLimit: Int
    private let memos = NIOLockedValueBox<[ObjectIdentifier: (loop: any EventLoop, memo: NIOLoopBoundBox<AnswerMemo>)]>([:])

    /// - Parameter byteLimit: each loop's memo's ``AnswerMemo/byteLimit``.
    init(byteLimit: Int) {
        self.byteLimit = byteLimit
    }

    /// The memo of `eventLoop`; called on that loop (once per connection).
    func memo(on eventLoop: any EventLoop) -> NIOLoopBoundBox<AnswerMemo> {
        memos.withLockedValue { memos in
            if let found = memos[ObjectIdentifier(eventLoop)] { return found.memo }
            let memo = NIOLoopBoundBox(AnswerMemo(byteLimit: byteLimit), eventLoop: eventLoop)
            memos[ObjectIdentifier(eventLoop)] = (eventLoop, memo)
            return memo
        }
    }

    /// The entries kept on every loop, summed (each memo read on its own loop).
    func count() async throws -> Int {
        var total = 0
        for (loop, memo) in memos.withLockedValue({ Array($0.values) }) {
            total += try await loop.submit { memo.value.count }.get()
        }
        return total
    }
}
