import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An advisory lock (`flock`, exclusive) on a folder a build is writing, held by the build for as long
/// as the folder is its own: a staging folder is abandoned exactly when no one holds its lock (its
/// process ended, however it ended: the kernel releases the lock), which holds for processes of this
/// host and, where the file system supports `flock` (NFS through its lock manager), of other hosts,
/// which a process id cannot say. The descriptor is this value's own, closed when the value goes.
///
/// A store folder open for reading is held shared (``init(sharing:)``): every process that has the
/// store open holds it so, and a cache eviction, which takes it exclusively, leaves it alone.
final class FolderLock: Sendable {
    private let descriptor: OwnedDescriptor

    /// Takes the lock of the folder at `path` if no one holds it; nil when someone does, or when `path`
    /// is not a folder (a symlink is not followed). Blocking (opens the folder); never waits for the lock.
    convenience init?(holding path: String) { self.init(path, operation: LOCK_EX) }

    /// Takes a shared hold on the folder at `path` (a store open for reading), unless someone holds it
    /// exclusively (a removal under way); nil then, or when `path` is not a folder.
    convenience init?(sharing path: String) { self.init(path, operation: LOCK_SH) }

    private init?(_ path: String, operation: Int32) {
        let raw = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard raw >= 0 else { return nil }
        let fd = OwnedDescriptor(adopting: raw)
        guard flock(fd.raw, operation | LOCK_NB) == 0 else { return nil }
        descriptor = fd
    }

}

extension TileStorage {
    /// Removes, in `folder`, what builds of persistent stores that ended before they were published
    /// (killed, crashed, a machine that went down) left there: their staging folders
    /// (`.NAME.partial-…`) and the stores they had set aside to replace (`NAME.replaced-…`), each only
    /// when no build holds it (``FolderLock``): a build still running here or in another process that
    /// shares the folder keeps its files. A server calls it when it starts; a build calls it for its
    /// own store's name before it begins.
    /// - Parameters:
    ///   - folder: the folder the stores are published in.
    ///   - name: only the leftovers of the store of this name (nil: of every store).
    /// - Returns: how many folders were removed.
    @discardableResult
    public static func removeAbandonedBuilds(in folder: String, name: String? = nil) -> Int {
        let now = time(nil)
        return removeStoreFolders(in: folder) { entry, info in
            isLeftover(entry, of: name) && (!isBeingCreated(entry) || now - info.st_mtim.tv_sec > creationGraceSeconds)
        }
    }

    /// Removes, in `folder`, the stores whose names start with `prefix` (a server's uploads, built and
    /// published under a private name, `.upload-ID-N.tiles`, then renamed to their own): left by a
    /// server that stopped between the two. Only those no one has open (``FolderLock``: a server
    /// still serving one holds it shared) and that hold only a store's files.
    /// - Returns: how many folders were removed.
    @discardableResult
    package static func removeUnpublishedStores(in folder: String, prefix: String) -> Int {
        removeStoreFolders(in: folder) { entry, _ in entry.hasPrefix(prefix) && entry.hasSuffix(".tiles") }
    }

    /// Removes the folders in `folder` that `chosen` picks (by name and `lstat`), hold only a store's
    /// files, and no one holds (``FolderLock``, taken while they are removed).
    private static func removeStoreFolders(in folder: String, where chosen: (String, stat) -> Bool) -> Int {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return 0 }
        var removed = 0
        for entry in entries {
            let path = "\(folder)/\(entry)"
            var info = stat()
            guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, chosen(entry, info), holdsOnlyStoreFiles(path),
                let lock = FolderLock(holding: path)
            else { continue }
            removeStoreFolder(path)
            withExtendedLifetime(lock) {}
            removed += 1
        }
        return removed
    }

    /// How long a folder being made for a build (`.NAME.creating-…`) is left alone although no one
    /// holds it: it is unlocked only between its `mkdir` and its lock, or when its process died there.
    static let creationGraceSeconds = 60

    /// Whether `entry` is named as a staging folder not yet locked (`.NAME.creating-PID-N`).
    static func isBeingCreated(_ entry: String) -> Bool { entry.range(of: ".creating-", options: .backwards) != nil }

    /// Whether `entry` is named as a staging folder (`.NAME.partial-PID-N`, or `.NAME.creating-PID-N`
    /// while it is made) or a set-aside store (`NAME.replaced-PID-N`), of the store `name` if given.
    static func isLeftover(_ entry: String, of name: String?) -> Bool {
        func endsInTwoNumbers(_ rest: Substring) -> Bool {
            let parts = rest.split(separator: "-", omittingEmptySubsequences: false)
            return parts.count == 2 && parts.allSatisfy { !$0.isEmpty && $0.utf8.allSatisfy { (48...57).contains($0) } }
        }
        for marker in [".partial-", ".creating-", ".replaced-"] {
            guard let range = entry.range(of: marker, options: .backwards), endsInTwoNumbers(entry[range.upperBound...]) else { continue }
            let store = entry[..<range.lowerBound]
            let staged = marker != ".replaced-"
            guard !staged || store.hasPrefix(".") else { continue }
            if let name, (staged ? store.dropFirst() : store) != name { continue }
            return true
        }
        return false
    }

    /// Whether a folder holds nothing but a store's files (its manifest, level files, TIFF): a folder of
    /// anything else is never removed, whatever its name.
    static func holdsOnlyStoreFiles(_ path: String) -> Bool {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: path) else { return false }
        return names.allSatisfy { name in
            name == StoreManifest.fileName || name == StoreManifest.tiffFileName || name == StoreManifest.colorProfileFileName
                || (name.hasPrefix("level-") && name.hasSuffix(".tiles"))
        }
    }
}
