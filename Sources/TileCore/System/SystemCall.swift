import Foundation
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
    /// - Parameter info: set to the file's `stat`.
    /// - Throws: ``TileError/Code/io`` naming the path and the cause; ``TileError/Code/invalidStore``
    ///   when the path is not a regular file.
    static func openRegularFile(_ path: String, info: inout stat) throws(TileError) -> OwnedDescriptor {
        BlockingCallCheck.check("open \(path)")
        let raw = retrying { open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK) }
        guard raw >= 0 else { throw error("cannot open", path: path) }
        let fd = OwnedDescriptor(adopting: raw)
        guard fstat(fd.raw, &info) == 0 else { throw error("cannot read", path: path) }
        guard (info.st_mode & S_IFMT) == S_IFREG else { throw TileError(.invalidStore, "\(path) is not a regular file") }
        return fd
    }

    /// ``openRegularFile(_:info:)`` without the `stat`.
    static func openRegularFile(_ path: String) throws(TileError) -> OwnedDescriptor {
        var info = stat()
        return try openRegularFile(path, info: &info)
    }

    /// Writes all of `bytes` at the descriptor's position (retrying short writes and signals).
    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, path: String) throws(TileError) {
        BlockingCallCheck.check("write \(path)")
        guard let base = bytes.baseAddress else { return }
        var done = 0
        while done < bytes.count {
            let n = retrying { Glibc.write(fd, base + done, bytes.count - done) }
            if n < 0 { throw error("cannot write", path: path) }
            if n == 0 { throw error("cannot write", path: path, errno: EIO) }
            done += n
        }
    }

    /// Reads exactly `count` bytes at `offset` (retrying short reads and signals).
    /// - Throws: ``TileError/Code/io`` with the errno, or `EIO` when the file ends first.
    static func readFully(_ fd: Int32, into destination: UnsafeMutableRawPointer, count: Int, offset: Int, what: String, path: String?)
        throws(TileError)
    {
        BlockingCallCheck.check("pread \(what)")
        var done = 0
        while done < count {
            let n = retrying { pread(fd, destination + done, count - done, off_t(offset + done)) }
            if n < 0 { throw error("cannot read \(what)", path: path) }
            if n == 0 { throw TileError(.io, "cannot read \(what)\(path.map { " in \($0)" } ?? ""): the file is shorter than its tiles", errno: EIO) }
            done += n
        }
    }

    /// Reads the next bytes at the descriptor's position; 0 at the end.
    static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, path: String) throws(TileError) -> Int {
        guard let base = buffer.baseAddress, !buffer.isEmpty else { return 0 }
        BlockingCallCheck.check("read \(path)")
        let n = retrying { Glibc.read(fd, base, buffer.count) }
        guard n >= 0 else { throw error("cannot read", path: path) }
        return n
    }

    /// Creates a file exclusively (never through a symlink), writes `bytes` and syncs it: for files
    /// inside a folder that is itself published by one rename (a store's manifest).
    static func createSynced(_ path: String, _ bytes: some ContiguousBytes, mode: mode_t = 0o600) throws(TileError) {
        let fd = try createExclusive(path, mode: mode)
        var failure: TileError?
        bytes.withUnsafeBytes { raw in
            do throws(TileError) { try writeAll(fd.raw, raw, path: path) } catch { failure = error }
        }
        if let failure { throw failure }
        guard fsync(fd.raw) == 0 else { throw error("cannot write", path: path) }
    }

    /// Creates a file for reading and writing, exclusively and never through a symlink
    /// (`O_CREAT | O_EXCL | O_NOFOLLOW`, close-on-exec).
    static func createExclusive(_ path: String, mode: mode_t = 0o600) throws(TileError) -> OwnedDescriptor {
        BlockingCallCheck.check("create \(path)")
        let fd = retrying { open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode) }
        guard fd >= 0 else { throw error("cannot create", path: path) }
        return OwnedDescriptor(adopting: fd)
    }

    /// Creates an anonymous file in `directory`: made exclusively with mode 0600 (`mkstemp`) and
    /// unlinked at once, so it vanishes when closed, even if the process dies.
    /// - Returns: the descriptor (close-on-exec).
    static func createAnonymous(in directory: String, what: String = "a tile file") throws(TileError) -> OwnedDescriptor {
        var template = Array("\(directory)/tiledimage-XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { throw error("cannot create \(what) in", path: directory) }
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        return OwnedDescriptor(adopting: fd)
    }

    /// Closes descriptors this process owns (errors ignored: nothing is left to do about them).
    static func close(_ descriptors: [Int32]) {
        for fd in descriptors where fd >= 0 { _ = Glibc.close(fd) }
    }

    /// Syncs the folder that holds `path`, so a rename into it survives a crash. Best effort.
    static func syncFolder(containing path: String) {
        let folder = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
        let raw = open(folder.isEmpty ? "/" : folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard raw >= 0 else { return }
        let fd = OwnedDescriptor(adopting: raw)
        fsync(fd.raw)
    }

    /// Retries a call interrupted by a signal.
    static func retrying<T: BinaryInteger>(_ body: () -> T) -> T {
        while true {
            let result = body()
            if result >= 0 || errno != EINTR { return result }
        }
    }
}
