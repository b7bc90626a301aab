#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An input opened once and read front to back: a file, a FIFO, or standard input (`-`).
///
/// The one owner of its descriptor (standard input is duplicated, so closing it never closes the
/// process's own). Not thread-safe; one reader at a time.
package final class InputFile {
    /// The path as given, or `stdin` for `-`: for messages.
    package let name: String
    private let fd: Int32
    /// Whether the input is a regular file (it can be read again from the start, and has a size).
    package let isRegularFile: Bool
    /// The size of a regular file, else `nil`.
    package let byteCount: Int?

    /// The path that means standard input.
    package static let standardInputPath = "-"

    /// Opens `path` for reading (`-`: standard input).
    /// - Throws: ``TileError/Code/io`` naming the path and the cause (`ENOENT`, `EACCES`, `EISDIR`, ...).
    package init(path: String) throws(TileError) {
        let fd: Int32
        if path == Self.standardInputPath {
            name = "stdin"
            fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0)
        } else {
            name = path
            fd = SystemCall.retrying { open(path, O_RDONLY | O_CLOEXEC) }
        }
        guard fd >= 0 else { throw SystemCall.error("cannot open", path: path == "-" ? "stdin" : path) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let error = SystemCall.error("cannot read", path: name)
            close(fd)
            throw error
        }
        if (info.st_mode & S_IFMT) == S_IFDIR {
            close(fd)
            throw SystemCall.error("cannot read", path: name, errno: EISDIR)
        }
        self.fd = fd
        isRegularFile = (info.st_mode & S_IFMT) == S_IFREG
        byteCount = isRegularFile ? Int(info.st_size) : nil
    }

    deinit { close(fd) }

    /// Reads the next bytes into `buffer`; 0 at the end.
    /// - Throws: ``TileError/Code/io`` naming the input and the cause.
    package func read(into buffer: UnsafeMutableRawBufferPointer) throws(TileError) -> Int {
        guard let base = buffer.baseAddress, !buffer.isEmpty else { return 0 }
        let n = SystemCall.retrying { Glibc.read(fd, base, buffer.count) }
        guard n >= 0 else { throw SystemCall.error("cannot read", path: name) }
        return n
    }

    /// Goes back to the start of a regular file.
    func rewind() throws(TileError) {
        guard lseek(fd, 0, SEEK_SET) == 0 else { throw SystemCall.error("cannot read", path: name) }
    }

    /// Whether this is the same file as `path` (same device and inode, through any link).
    package func isSameFile(as path: String) -> Bool {
        var mine = stat()
        var other = stat()
        guard fstat(fd, &mine) == 0, stat(path, &other) == 0 else { return false }
        return mine.st_dev == other.st_dev && mine.st_ino == other.st_ino
    }

    /// Reads everything that is left into memory.
    func readAll() throws(TileError) -> [UInt8] {
        var bytes: [UInt8] = []
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { chunk.deallocate() }
        while true {
            let n = try read(into: chunk)
            if n == 0 { return bytes }
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[0..<n]))
        }
    }
}
