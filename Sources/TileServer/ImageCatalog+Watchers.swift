import Foundation
import NIOConcurrencyHelpers
import TileActors

extension ImageCatalog {
    /// A lock around the ready images (a class: the folder watcher's thread shares it).
    final class ReadyImages: Sendable {
        let entries = NIOLockedValueBox<[String: (image: Image, checked: ContinuousClock.Instant)]>([:])
        /// The images being copied from the shelf, answered from there meanwhile (``ImageCatalog/shelvedImage(_:)``),
        /// and when their source was last checked.
        let shelved = NIOLockedValueBox<[String: (image: ShelvedImage, checked: ContinuousClock.Instant)]>([:])

        /// Forgets the image of the folder entry `name` (`photo.jpg`, `kept.tiles`).
        func forget(entry name: String) {
            let id = (name as NSString).deletingPathExtension
            _ = entries.withLockedValue { $0.removeValue(forKey: id) }
            _ = shelved.withLockedValue { $0.removeValue(forKey: id) }
        }
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
