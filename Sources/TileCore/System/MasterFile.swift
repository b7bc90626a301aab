internal import CSpool
#if canImport(Glibc)
import Glibc
#endif

/// The file a decoder reads a master from when it needs more than the bytes in order (a JPEG 2000's
/// tiles, found through its header): the master's own file, opened read-only when it is a regular
/// file, or an anonymous spool file in a folder that the bytes fed are written to as they arrive (on
/// disk, never in memory), readable once the input has ended. The one owner of its descriptor.
final class MasterFile {
    private let file: OwnedDescriptor
    /// The descriptor, lent to the decoder for its reads; this value owns it.
    var descriptor: Int32 { file.raw }
    /// Whether the bytes fed are written here (a spool) rather than only counted (the master's file).
    let isSpool: Bool
    private let name: String
    private(set) var bytesFed = 0
    private(set) var hasEnded = false

    /// The master's own file at `path` (through a symlink too, as a TIFF master is read), opened
    /// without blocking (a FIFO fails at once).
    /// - Throws: ``TileError/Code/invalidArgument`` when it is not a regular file, ``TileError/Code/io``.
    init(path: String) throws(TileError) {
        BlockingCallCheck.check("open \(path)")
        let raw = SystemCall.retrying { open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK) }
        guard raw >= 0 else { throw SystemCall.error("cannot open", path: path) }
        let fd = OwnedDescriptor(adopting: raw)
        var info = stat()
        guard fstat(fd.raw, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            throw TileError(.invalidArgument, "\(path) is not a regular file")
        }
        file = fd
        isSpool = false
        name = path
    }

    /// An anonymous spool file in `directory` (`O_TMPFILE`; where the file system has none, a file
    /// made and unlinked at once).
    /// - Throws: ``TileError/Code/io``.
    init(spoolIn directory: String) throws(TileError) {
        BlockingCallCheck.check("create a spool file in \(directory)")
        let raw = SystemCall.retrying { cspool_create(directory) }
        guard raw >= 0 else { throw SystemCall.error("cannot make a spool file in", path: directory) }
        file = OwnedDescriptor(adopting: raw)
        isSpool = true
        name = "a spool file in \(directory)"
    }

    /// The next bytes of the master: written at the end of a spool, counted for the master's own file.
    func append(_ bytes: UnsafeRawBufferPointer) throws(TileError) {
        precondition(!hasEnded, "bytes appended after the end of the input")
        if isSpool { try SystemCall.writeAll(descriptor, bytes, path: name) }
        bytesFed += bytes.count
    }

    /// No more bytes will come.
    func end() { hasEnded = true }

    /// The file's size now.
    func size() throws(TileError) -> Int {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw SystemCall.error("cannot read", path: name) }
        return Int(info.st_size)
    }

    /// Of `count` rows, those whose share of the master's own file has been fed (all of them once the
    /// input has ended): rows keep pace with the bytes read, so a build stays cancellable and reports
    /// progress. A spool is read only once it is complete.
    func rowsAllowed(of count: Int, fileSize: Int) -> Int {
        if hasEnded || fileSize <= 0 || bytesFed >= fileSize { return count }
        return isSpool ? 0 : Int(Int64(count) * Int64(bytesFed) / Int64(fileSize))
    }
}
