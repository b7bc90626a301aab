import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The files of a build in progress, and how they are published or thrown away.
struct StagedStore {
    let files: LevelFiles
    /// The folder being written (persistent stores only).
    let stagingPath: String?
    /// Where the folder is renamed to when complete.
    let finalPath: String?
    /// Where the build's other temporary files go (a progressive JPEG's coefficient file): the
    /// staging folder, or the ephemeral files' folder.
    let scratchDirectory: String
    /// The descriptors publishing syncs (`nil`: every file's; a TIFF store's spool is not synced).
    var publishedDescriptors: [Int32]? = nil
    /// The staging folder's lock, held while the build lives: its folder is not taken for a leftover.
    var lock: FolderLock? = nil

    static func create(_ storage: TileStorage, levelCount: Int) throws(TileError) -> StagedStore {
        switch storage {
        case .ephemeral(let directory):
            let files = try LevelFiles.ephemeral(count: levelCount, directory: directory ?? LevelFiles.defaultDirectory)
            return StagedStore(
                files: files, stagingPath: nil, finalPath: nil,
                scratchDirectory: directory ?? LevelFiles.defaultDirectory)
        case .persistent(let path):
            return try createPersistent(path: path, levelCount: levelCount)
        }
    }

    private static func createPersistent(path: String, levelCount: Int) throws(TileError) -> StagedStore {
        let url = URL(fileURLWithPath: path)
        let (staging, lock) = try makeStagingFolder(for: url)
        let files: LevelFiles
        do {
            files = try LevelFiles.opening(levelCount) { index throws(TileError) in
                try SystemCall.createExclusive("\(staging)/\(StoreManifest.levelFileName(index))", mode: publishedFileMode)
            }
        } catch {
            removeStoreFolder(staging)
            throw error
        }
        return StagedStore(
            files: files, stagingPath: staging, finalPath: url.path, scratchDirectory: staging, lock: lock)
    }

    /// The modes a store's folder and files are made with, the process's umask applied as to any file
    /// it makes: a store built by one user can be served by a server running as another (with the
    /// usual umask 022: folder 0755, files 0644). Temporary files (spools) stay 0600.
    static let publishedFolderMode: mode_t = 0o777
    static let publishedFileMode: mode_t = 0o666

    /// A new staging folder for the store at `url` (after removing its abandoned builds), and its lock.
    /// It is made as `.NAME.creating-PID-N`, locked, and only then renamed to `.NAME.partial-PID-N`: a
    /// folder of that name is never without its lock, so another process cleaning up leftovers at that
    /// moment cannot take it for an abandoned build (a rename keeps the lock, which is the folder's).
    static func makeStagingFolder(for url: URL) throws(TileError) -> (path: String, lock: FolderLock) {
        let (name, parent) = (url.lastPathComponent, url.deletingLastPathComponent().path)
        TileStorage.removeAbandonedBuilds(in: parent, name: name)
        let suffix = "\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let (creating, staging) = ("\(parent)/.\(name).creating-\(suffix)", "\(parent)/.\(name).partial-\(suffix)")
        guard mkdir(creating, publishedFolderMode) == 0 else { throw SystemCall.error("cannot create the store", path: url.path) }
        guard let lock = FolderLock(holding: creating), rename(creating, staging) == 0 else {
            let error = SystemCall.error("cannot create the store", path: url.path)
            rmdir(creating)
            throw error
        }
        return (staging, lock)
    }

    /// Makes the store visible at its final path: data synced, manifest written, one rename.
    func publish(_ manifest: StoreManifest, colorProfile: ColorProfile? = nil) throws(TileError) {
        guard let stagingPath, let finalPath else { return }
        for fd in publishedDescriptors ?? files.descriptors where fdatasync(fd) != 0 {
            throw SystemCall.error("cannot sync a level file in", path: stagingPath)
        }
        if let name = manifest.colorProfile, let colorProfile {
            try SystemCall.createSynced("\(stagingPath)/\(name)", colorProfile.bytes, mode: Self.publishedFileMode)
        }
        try SystemCall.createSynced("\(stagingPath)/\(StoreManifest.fileName)", try manifest.encoded(), mode: Self.publishedFileMode)
        try Self.moveIntoPlace(stagingPath, finalPath)
    }

    /// Renames the whole staging folder `stagingPath` to `finalPath`, setting aside the store there
    /// (only a store folder: a symlink or file planted at the path is refused, never followed) and
    /// removing it once the new one is in place.
    static func moveIntoPlace(_ stagingPath: String, _ finalPath: String) throws(TileError) {
        var displaced: String?
        var asideLock: FolderLock?
        defer { withExtendedLifetime(asideLock) {} }
        var existing = stat()
        if lstat(finalPath, &existing) == 0 {
            // Only a store folder is replaced; a symlink or file planted at the path is refused, never
            // followed.
            guard existing.st_mode & S_IFMT == S_IFDIR, access("\(finalPath)/\(StoreManifest.fileName)", F_OK) == 0
            else { throw TileError(.invalidStore, "\(finalPath) exists and is not a tile store: not replaced") }
            let aside = "\(finalPath).replaced-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            // Held until it is removed, so that a cleanup elsewhere does not take it for a leftover.
            asideLock = FolderLock(holding: finalPath)
            guard rename(finalPath, aside) == 0 else { throw SystemCall.error("cannot replace", path: finalPath) }
            displaced = aside
        }
        guard rename(stagingPath, finalPath) == 0 else {
            let error = SystemCall.error("cannot publish the store at", path: finalPath)
            if let displaced { _ = rename(displaced, finalPath) }
            throw error
        }
        SystemCall.syncFolder(containing: finalPath)
        if let displaced { removeStoreFolder(displaced) }
    }

    /// Removes the staging folder (persistent stores); ephemeral files vanish on close.
    func discard() {
        if let stagingPath { removeStoreFolder(stagingPath) }
    }
}

/// Removes a store folder: the files directly inside it, then the folder. Stores have no subfolders.
func removeStoreFolder(_ path: String) {
    if let names = try? FileManager.default.contentsOfDirectory(atPath: path) {
        for name in names { unlink("\(path)/\(name)") }
    }
    rmdir(path)
}
