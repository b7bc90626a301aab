#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A regular file opened for reading by offset, from any thread: a master sent as it is (a
/// download). Opened never through a final symlink and never blocking (a FIFO or device planted at
/// the path fails at once); the one owner of its descriptor, closed when the value is released.
package final class ReadOnlyFile: Sendable {
    private let descriptor: OwnedDescriptor
    /// The path as opened: for messages.
    package let path: String
    /// The file's size, device and inode when it was opened.
    package let byteCount: Int
    package let device: UInt64
    package let inode: UInt64
    private let changed: (Int, Int)

    /// Opens `path`. Blocking.
    /// - Throws: ``TileError/Code/io`` naming the path and the cause; ``TileError/Code/invalidStore``
    ///   when it is not a regular file.
    package init(path: String) throws(TileError) {
        var info = stat()
        descriptor = try SystemCall.openRegularFile(path, info: &info)
        self.path = path
        byteCount = Int(info.st_size)
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        changed = (Int(info.st_mtim.tv_sec) * 1_000_000_000 + info.st_mtim.tv_nsec, Int(info.st_ctim.tv_sec) * 1_000_000_000 + info.st_ctim.tv_nsec)
    }

    /// Whether the file is as it was opened: same size, modification and change times (a file
    /// rewritten in place while it was read gave bytes of two versions).
    package func isUnchanged() -> Bool {
        var info = stat()
        guard fstat(descriptor.raw, &info) == 0 else { return false }
        let now = (Int(info.st_mtim.tv_sec) * 1_000_000_000 + info.st_mtim.tv_nsec, Int(info.st_ctim.tv_sec) * 1_000_000_000 + info.st_ctim.tv_nsec)
        return Int(info.st_size) == byteCount && now == changed
    }

    /// Reads `count` bytes at `offset` into `destination`. Blocking.
    /// - Throws: ``TileError/Code/io``, `EIO` when the file ends first (it was cut since it was opened).
    package func read(at offset: Int, count: Int, into destination: UnsafeMutableRawBufferPointer) throws(TileError) {
        precondition(count <= destination.count, "a read past the buffer")
        guard count > 0, let base = destination.baseAddress else { return }
        try SystemCall.readFully(descriptor.raw, into: base, count: count, offset: offset, what: "bytes", path: path)
    }
}
