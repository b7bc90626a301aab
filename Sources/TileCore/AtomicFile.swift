import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Writes a whole file under a temporary name beside it (created exclusively, mode 0644), syncs it,
/// then renames it into place: a crash never leaves a half-written file at the path.
enum AtomicFile {
    static func write(_ data: Data, to path: String) throws(TileError) {
        let temporary = "\(path).partial-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw SystemCall.error("cannot create", path: path) }
        let written = data.withUnsafeBytes { raw -> Bool in
            var done = 0
            while done < raw.count {
                let n = SystemCall.retrying { Glibc.write(fd, raw.baseAddress! + done, raw.count - done) }
                if n <= 0 { return false }
                done += n
            }
            return true
        }
        let number = errno
        guard written, fsync(fd) == 0 else {
            close(fd)
            unlink(temporary)
            throw SystemCall.error("cannot write", path: path, errno: written ? errno : number)
        }
        close(fd)
        guard rename(temporary, path) == 0 else {
            let error = SystemCall.error("cannot rename into place", path: path)
            unlink(temporary)
            throw error
        }
    }
}
