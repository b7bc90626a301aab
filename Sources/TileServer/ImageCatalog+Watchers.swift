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
        /// (``ImageCatalog/readyImage(_:remembered:)``) keeps it while this stays the same.
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

    /// ``readyImage(_:)`` for a caller that asks for the same image again and again (a connection):
    /// the image `remembered` (what an earlier call left there) is answered again without the lock
    /// while nothing in the ready images changed since and the look at its source is as recent as
    /// ``readyImage(_:)`` requires; otherwise it is looked up and remembered anew.
    nonisolated func readyImage(_ id: String, remembered: inout ReadyLookup?) -> Image? {
        let changes = readyImages.changes.load(ordering: .acquiring)
        if let last = remembered, last.changes == changes, last.id == id {
            guard let image = last.image, ContinuousClock.now - last.checked < sourceRecheckInterval else { return nil }
            return image
        }
        let found = readyImages.entries.withLockedValue { $0[id] }
        remembered = ReadyLookup(id: id, image: found?.image, checked: found?.checked ?? .now, changes: changes)
        guard let found, ContinuousClock.now - found.checked < sourceRecheckInterval else { return nil }
        return found.image
    }

    /// What ``readyImage(_:remembered:)`` found for an identifier (a catalogue key), and the count of
    /// the ready images' changes it was found at.
    struct ReadyLookup {
        let id: String
        let image: Image?
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
