#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The one place TileCore turns failed system calls into ``TileError``s.
enum SystemCall {
    static var lastErrno: Int32 { errno }

    static func describe(_ number: Int32) -> String { String(cString: strerror(number)) }

    static func error(_ operation: String, path: String?, errno number: Int32 = errno) -> TileError {
        let subject = path.map { " \($0)" } ?? ""
        return TileError(.io, "\(operation)\(subject): \(describe(number))", errno: number)
    }

    /// Opens a regular file for reading, never following a final symlink and never blocking: a FIFO
    /// or device planted in its place fails at once instead of hanging the caller.
    /// - Returns: the descriptor; the caller owns it.
    /// - Throws: ``TileError/Code/io`` naming the path and the cause; ``TileError/Code/invalidStore``
    ///   when the path is not a regular file.
    static func openRegularFile(_ path: String) throws(TileError) -> Int32 {
        let fd = retrying { open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK) }
        guard fd >= 0 else { throw error("cannot open", path: path) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let failure = error("cannot read", path: path)
            close(fd)
            throw failure
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            throw TileError(.invalidStore, "\(path) is not a regular file")
        }
        return fd
    }

    /// Retries a call interrupted by a signal.
    static func retrying<T: BinaryInteger>(_ body: () -> T) -> T {
        while true {
            let result = body()
            if result >= 0 || errno != EINTR { return result }
        }
    }
}
