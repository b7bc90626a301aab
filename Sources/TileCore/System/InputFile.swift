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
    private let fd: OwnedDescriptor
    /// Whether the input is a regular file (it can be read again from the start, and has a size).
    package let isRegularFile: Bool
    /// The size of a regular file, else `nil`.
    package let byteCount: Int?

    /// The path that means standard input.
    package static let standardInputPath = "-"

    /// Opens `path` for reading (`-`: standard input).
    /// - Throws: ``TileError/Code/io`` naming the path and the cause (`ENOENT`, `EACCES`, `EISDIR`, ...).
    package init(path: String) throws(TileError) {
        BlockingCallCheck.check("open \(path)")
        let raw: Int32
        if path == Self.standardInputPath {
            name = "stdin"
            raw = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0)
        } else {
            name = path
            raw = SystemCall.retrying { open(path, O_RDONLY | O_CLOEXEC) }
        }
        guard raw >= 0 else { throw SystemCall.error("cannot open", path: path == "-" ? "stdin" : path) }
        let fd = OwnedDescriptor(adopting: raw)
        var info = stat()
        guard fstat(fd.raw, &info) == 0 else { throw SystemCall.error("cannot read", path: name) }
        if (info.st_mode & S_IFMT) == S_IFDIR { throw SystemCall.error("cannot read", path: name, errno: EISDIR) }
        self.fd = fd
        isRegularFile = (info.st_mode & S_IFMT) == S_IFREG
        byteCount = isRegularFile ? Int(info.st_size) : nil
    }

    /// Reads the next bytes into `buffer`; 0 at the end.
    /// - Throws: ``TileError/Code/io`` naming the input and the cause.
    package func read(into buffer: UnsafeMutableRawBufferPointer) throws(TileError) -> Int {
        try SystemCall.read(fd.raw, into: buffer, path: name)
    }

    /// Goes back to the start of a regular file.
    func rewind() throws(TileError) {
        guard lseek(fd.raw, 0, SEEK_SET) == 0 else { throw SystemCall.error("cannot read", path: name) }
    }

    /// Whether this is the same file as `path` (same device and inode, through any link).
    package func isSameFile(as path: String) -> Bool {
        var mine = stat()
        var other = stat()
        guard fstat(fd.raw, &mine) == 0, stat(path, &other) == 0 else { return false }
        return mine.st_dev == other.st_dev && mine.st_ino == other.st_ino
    }

    /// Opens a regular file only, never blocking on a FIFO or device planted at the path and never
    /// following a final symlink.
    /// - Throws: ``TileError/Code/io`` (`ENOENT`, ...); ``TileError/Code/invalidStore`` when the path
    ///   is not a regular file.
    package init(regularFile path: String) throws(TileError) {
        name = path
        var info = stat()
        fd = try SystemCall.openRegularFile(path, info: &info)
        isRegularFile = true
        byteCount = Int(info.st_size)
    }

    /// Reads everything that is left into memory.
    /// - Parameter limit: the most bytes accepted; more is ``TileError/Code/invalidArgument``.
    func readAll(limit: Int = .max) throws(TileError) -> [UInt8] {
        var bytes: [UInt8] = []
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { chunk.deallocate() }
        while true {
            let n = try read(into: chunk)
            if n == 0 { return bytes }
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[0..<n]))
            guard bytes.count <= limit else { throw TileError(.invalidArgument, "\(name) is larger than \(limit) bytes") }
        }
    }
}
