#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What is at a path itself (`lstat`: a symlink is a symlink, never what it points to). Blocking.
package enum FolderEntry {
    case none, file, folder, symlink, other

    package init(at path: String) {
        BlockingCallCheck.check("lstat \(path)")
        var info = stat()
        guard lstat(path, &info) == 0 else {
            self = .none
            return
        }
        switch info.st_mode & S_IFMT {
        case S_IFREG: self = .file
        case S_IFDIR: self = .folder
        case S_IFLNK: self = .symlink
        default: self = .other
        }
    }
}

extension FolderEntry {
    /// The real path of `path` (every symlink resolved) when it lies inside the folder `root` (itself
    /// resolved) and not inside a hidden folder of it (a cache, an upload being staged) nor a store
    /// folder (`.tiles`), else nil. Blocking.
    package static func resolved(_ path: String, inside root: String) -> String? {
        BlockingCallCheck.check("realpath \(path)")
        guard let real = realpath(path, nil), let base = realpath(root, nil) else { return nil }
        defer { free(real); free(base) }
        let (target, folder) = (String(cString: real), String(cString: base))
        guard target.hasPrefix(folder + "/") else { return nil }
        let below = target.dropFirst(folder.count + 1).split(separator: "/")
        return below.contains { $0.hasPrefix(".") || $0.hasSuffix(".tiles") } ? nil : target
    }

    /// Renames `source` to `target` only if nothing is at `target` (Linux `renameat2` with
    /// `RENAME_NOREPLACE`, looked up at run time: glibc has it, Swift's `Glibc` module does not show
    /// it): nothing at `target` is ever replaced or removed. Blocking.
    /// - Throws: ``TileError/Code/io`` with `EEXIST` when `target` exists, or the call's error
    ///   (`ENOSYS` where the kernel or C library lacks it).
    package static func rename(_ source: String, toNew target: String) throws(TileError) {
        BlockingCallCheck.check("rename \(source)")
        typealias RenameAt2 = @convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "renameat2") else {  // RTLD_DEFAULT
            throw SystemCall.error("cannot rename without replacing to", path: target, errno: ENOSYS)
        }
        let renameat2 = unsafeBitCast(symbol, to: RenameAt2.self)
        let noReplace: UInt32 = 1  // RENAME_NOREPLACE
        guard renameat2(AT_FDCWD, source, AT_FDCWD, target, noReplace) == 0 else {
            throw SystemCall.error("cannot rename \(source) to", path: target)
        }
    }
}
