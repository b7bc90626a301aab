import Foundation
import NIOConcurrencyHelpers
import Synchronization
import TileActors

extension ImageCatalog {
    /// A lock around the ready images (a class: the folder watcher's thread shares it).
    final class ReadyImages: Sendable {
        /// Changed only through ``change(_:)``.
        let entries = NIOLockedValueBox<[String: (image: Image, checked: ContinuousClock.Instant)]>([:])
        /// How many times ``entries`` changed: a caller that keeps an image it was given
        /// (``ImageCatalog/isReady(_:version:remembered:)``) keeps it while this stays the same.
        let changes = Atomic<Int>(0)
        /// The images being copied from the shelf, answered from there meanwhile (``ImageCatalog/shelvedImage(_:)``),
        /// and when their source was last checked.
        let shelved = NIOLockedValueBox<[String: (image: ShelvedImage, checked: ContinuousClock.Instant)]>([:])

        /// Forgets the image of the folder entry `name` (`photo.jpg`, `kept.tiles`).
        func forget(entry name: String) {
            let id = (name as NSString).deletingPathExtension
            change { $0.removeValue(forKey: id) }
            _ = shelved.withLockedValue { $0.removeValue(forKey: id) }
        }

        /// Changes ``entries`` by `body`, counted in ``changes`` before the lock is released.
        func change(_ body: (inout [String: (image: Image, checked: ContinuousClock.Instant)]) -> Void) {
            entries.withLockedValue { ready in
                body(&ready)
                changes.add(1, ordering: .releasing)
            }
        }
    }

    /// Whether the ready image `id` (a catalogue key) is of `version`, as ``readyImage(_:)`` would
    /// answer it, for a caller that asks about the same image again and again (a connection): its last
    /// look (`remembered`, what an earlier call left there) is taken again without the lock while
    /// nothing in the ready images changed since and the look at the source is as recent as
    /// ``readyImage(_:)`` requires; otherwise the image is looked up and remembered anew. Only the
    /// version is remembered, never the image: a connection keeps no store open.
    nonisolated func isReady(_ id: String, version: String, remembered: inout ReadyLookup?) -> Bool {
        let changes = readyImages.changes.load(ordering: .acquiring)
        if remembered == nil || remembered?.changes != changes || remembered?.id != id {
            let found = readyImages.entries.withLockedValue { $0[id] }
            remembered = ReadyLookup(id: id, version: found.map { $0.image.version }, checked: found?.checked ?? .now, changes: changes)
        }
        guard let last = remembered, let lastVersion = last.version, ContinuousClock.now - last.checked < sourceRecheckInterval else { return false }
        return lastVersion == version
    }

    /// How many times the ready images changed (an image made ready, replaced or forgotten): a caller
    /// that keeps what ``isReady(_:version:remembered:)`` said (``AnswerMemo``) keeps it while this stays the same.
    nonisolated var readyChanges: Int { readyImages.changes.load(ordering: .acquiring) }

    /// What ``isReady(_:version:remembered:)`` found for an identifier: the version of its ready image
    /// (nil: none ready), when its source was last looked at, and the count of the ready images'
    /// changes it was found at.
    struct ReadyLookup {
        let id: String
        let version: String??
        let checked: ContinuousClock.Instant
        let changes: Int
    }

    /// Watches the two folders (where `inotify` is refused, nothing: the periodic checks apply):
    /// - the folder served: the ready image of an entry that changes is forgotten, so that its next
    ///   request looks at the file again;
    /// - the cache folder: a build lock's changes are told to `changes` (one released wakes who waits
    ///   for it), and a store removed from outside (by hand, by another instance) leaves the budget's
    ///   accounts as it goes (``TileActors/DiskCacheBudget/forgetIfRemoved(path:)``, a job of the
    ///   catalog's run).
    static func watch(
        root: String, cache: String, readyImages: ReadyImages, tasks: TaskNursery, budget: DiskCacheBudget, changes: FolderChanges
    ) -> [FolderWatcher] {
        let served = FolderWatcher(folder: root) { name in readyImages.forget(entry: name) }
        let stores = FolderWatcher(folder: cache) { name in
            if name.hasSuffix(".lock") { changes.changed(name) }  // build locks only: other names come and go
            guard name.hasSuffix(".tiles"), !name.hasPrefix(".") else { return }
            _ = tasks.spawn { await budget.forgetIfRemoved(path: "\(cache)/\(name)") }
        }
        return [served, stores].compactMap { $0 }
    }
}
