import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Which sanitizer the tests (and the `tiler` built with them) run under. Memory bounds are checked
/// only without AddressSanitizer: its quarantine and redzones grow every heap by design.
public enum Sanitizers {
    /// Whether this process was built with AddressSanitizer (its runtime's entry point is linked in).
    public static let address: Bool = dlsym(dlopen(nil, RTLD_NOW), "__asan_init") != nil
}

/// File system facts the tests check, through the C library (no other module's view of its types).
public enum FileFacts {
    /// Bytes the file at `path` takes on disk (its blocks), 0 when it cannot be read.
    public static func diskBytes(_ path: String) -> Int {
        var info = stat()
        guard stat(path, &info) == 0 else { return 0 }
        return Int(info.st_blocks) * 512
    }

    /// Bytes every file below `folder` takes on disk, 0 when it cannot be read.
    public static func diskBytes(below folder: String) -> Int {
        guard let walker = FileManager.default.enumerator(atPath: folder) else { return 0 }
        var total = 0
        while let name = walker.nextObject() as? String { total += diskBytes("\(folder)/\(name)") }
        return total
    }

    /// The text of a small file whose size `stat` does not tell (`/proc`), read with the C library
    /// (Foundation's reader leaks its buffer on such files, which LeakSanitizer reports); nil when it
    /// cannot be read.
    public static func procText(_ path: String, limit: Int = 4096) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: limit)
        let count = read(fd, &bytes, limit)
        return count < 0 ? nil : String(decoding: bytes[..<count], as: UTF8.self)
    }

    /// When the file at `path` last changed, in whole seconds since the epoch: the later of its
    /// modification and change (`st_ctim`) times; nil when it cannot be read.
    public static func lastChange(_ path: String) -> Int? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return max(info.st_mtim.tv_sec, info.st_ctim.tv_sec)
    }

    /// Sets the file's access and modification times to `seconds` since the epoch (and `nanoseconds`).
    @discardableResult
    public static func setModificationTime(_ path: String, seconds: Int, nanoseconds: Int = 0) -> Bool {
        var times = [timespec(tv_sec: seconds, tv_nsec: nanoseconds), timespec(tv_sec: seconds, tv_nsec: nanoseconds)]
        return utimensat(AT_FDCWD, path, &times, 0) == 0
    }
}

/// A small tmpfs of the test's own, to fill a disk on purpose (mounting needs root with
/// `CAP_SYS_ADMIN`: ``isAvailable`` says whether this process may).
public enum Tmpfs {
    /// Whether a tmpfs can be mounted here (tried once, on a folder of its own).
    public static let isAvailable: Bool = {
        guard let path = mount(bytes: 1 << 20) else { return false }
        unmount(path)
        return true
    }()

    public static let unavailableMessage = "mounting a tmpfs needs root with CAP_SYS_ADMIN"

    /// Mounts a tmpfs of `bytes` on a new temporary folder (`readOnly`: a file system nothing can be
    /// written to, whoever asks); nil when refused.
    public static func mount(bytes: Int, readOnly: Bool = false) -> String? {
        var template = Array("/tmp/tiledimagekit-tmpfs-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { return nil }
        let path = String(cString: made)
        guard Glibc.mount("tmpfs", path, "tmpfs", readOnly ? UInt(MS_RDONLY) : 0, "size=\(bytes)") == 0 else {
            rmdir(path)
            return nil
        }
        return path
    }

    /// Unmounts and removes a folder ``mount(bytes:)`` made.
    public static func unmount(_ path: String) {
        umount2(path, Int32(MNT_DETACH))
        rmdir(path)
    }
}
