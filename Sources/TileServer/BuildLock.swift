import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// An advisory lock (`flock`) on one image's lock file in the cache folder, held for the whole of its
/// build: servers that share a cache folder (several instances behind a load balancer) build each
/// image once, and the others reuse the store. The lock file (`.ID.lock`) stays; its descriptor is
/// this value's own, closed (and the lock released) when the value goes, or by the kernel when the
/// process ends, however it ends.
final class BuildLock: Sendable {
    private let descriptor: Int32

    private init(descriptor: Int32) { self.descriptor = descriptor }

    deinit { close(descriptor) }

    /// Takes the lock of `id` in `cache` when no one holds it. Blocking (opens a file).
    /// - Returns: the lock, or nil when another process (or another build here) holds it.
    /// - Throws: ``TileCore/TileError/Code/io`` when the lock file cannot be opened.
    static func take(_ id: String, in cache: String) throws(TileError) -> BuildLock? {
        let path = "\(cache)/.\(id).lock"
        let raw = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard raw >= 0 else { throw TileError(.io, "cannot open the build lock \(path): \(String(cString: strerror(errno)))") }
        let fd = OwnedDescriptor(adopting: raw)
        guard flock(fd.raw, LOCK_EX | LOCK_NB) == 0 else { return nil }
        return BuildLock(descriptor: fd.take())
    }
}
