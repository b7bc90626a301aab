package import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The one way TileCore (and `tiler`) writes a whole file: under a temporary name beside it, created
/// exclusively (`O_EXCL`, no symlink followed), written in pieces, synced, then renamed into place
/// and the folder synced. A crash or an error never leaves a half-written file at the path; ``abort()``
/// (or releasing an uncommitted writer) removes the temporary file.
///
/// Not thread-safe; one owner. The one owner of its descriptor (an ``OwnedDescriptor``, closed when
/// the file is committed or aborted, or the writer released).
package final class AtomicFile {
    /// Where the file appears on ``commit()``.
    package let path: String
    private let temporary: String
    private var descriptor: OwnedDescriptor?

    /// Creates the temporary file beside `path`.
    /// - Parameter mode: the file's permissions (default 0644).
    /// - Throws: ``TileError/Code/io`` naming `path` (not the temporary name) and the cause.
    package init(path: String, mode: UInt32 = 0o644) throws(TileError) {
        self.path = path
        let temporary = "\(path).partial-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let raw = SystemCall.retrying { open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode_t(mode)) }
        guard raw >= 0 else { throw SystemCall.error("cannot create", path: path) }
        self.temporary = temporary
        descriptor = OwnedDescriptor(adopting: raw)
    }

    deinit { abort() }

    /// Appends `bytes`.
    package func write(_ bytes: UnsafeRawBufferPointer) throws(TileError) {
        guard let fd = descriptor?.raw else { throw TileError(.invalidArgument, "\(path) is already committed or aborted") }
        do throws(TileError) { try SystemCall.writeAll(fd, bytes, path: path) } catch {
            abort()
            throw error
        }
    }

    /// Appends `bytes` (`Data`, `[UInt8]`, ...).
    package func write(_ bytes: some ContiguousBytes) throws(TileError) {
        var failure: TileError?
        bytes.withUnsafeBytes { raw in
            do throws(TileError) { try write(raw) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    /// Syncs the data, renames the file into place and syncs the folder.
    package func commit() throws(TileError) {
        guard let fd = descriptor?.raw else { throw TileError(.invalidArgument, "\(path) is already committed or aborted") }
        guard fsync(fd) == 0 else {
            let error = SystemCall.error("cannot write", path: path)
            abort()
            throw error
        }
        descriptor = nil
        guard rename(temporary, path) == 0 else {
            let error = SystemCall.error("cannot write", path: path)
            unlink(temporary)
            throw error
        }
        SystemCall.syncFolder(containing: path)
    }

    /// Drops the temporary file (nothing appears at the path).
    package func abort() {
        guard descriptor != nil else { return }
        descriptor = nil
        unlink(temporary)
    }

    /// Writes a whole file at once.
    static func write(_ bytes: some ContiguousBytes, to path: String) throws(TileError) {
        let file = try AtomicFile(path: path)
        try file.write(bytes)
        try file.commit()
    }
}
