#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch

/// Owns the open file descriptors of a pyramid's level files and closes them when released.
///
/// Sendable: the descriptors never change after init, and `pread`/`pwrite` at explicit offsets are
/// safe from several threads at once.
final class LevelFiles: Sendable {
    let descriptors: [Int32]
    /// Unlinked files: the last close frees their blocks, which takes the kernel a while (0.4 s for
    /// the 1.7 GB of an 18000x18000 pyramid here), so they are closed on a background queue rather
    /// than on the thread that drops the pyramid.
    private let closesInBackground: Bool

    init(descriptors: [Int32], closesInBackground: Bool = false) {
        self.descriptors = descriptors
        self.closesInBackground = closesInBackground
    }

    deinit {
        let descriptors = self.descriptors
        if closesInBackground {
            DispatchQueue.global(qos: .utility).async { for fd in descriptors { close(fd) } }
        } else {
            for fd in descriptors { close(fd) }
        }
    }

    /// Opens `count` anonymous files in `directory`: each is created exclusively with mode 0600 and
    /// unlinked at once, so it vanishes when closed, even if the process dies.
    static func ephemeral(count: Int, directory: String) throws(TileError) -> LevelFiles {
        var fds: [Int32] = []
        for _ in 0..<count {
            var template = Array("\(directory)/tiledimage-XXXXXX".utf8CString)
            let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
            guard fd >= 0 else {
                let error = SystemCall.error("cannot create a tile file in", path: directory)
                fds.forEach { close($0) }
                throw error
            }
            template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            fds.append(fd)
        }
        return LevelFiles(descriptors: fds, closesInBackground: true)
    }

    /// The default folder for ephemeral files: `$TMPDIR`, else `/tmp`.
    static var defaultDirectory: String {
        if let value = getenv("TMPDIR"), value.pointee != 0 { return String(cString: value) }
        return "/tmp"
    }
}
