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
    /// For a view of some of another's files: that owner, kept alive, which closes them.
    private let owner: LevelFiles?

    init(descriptors: [Int32], closesInBackground: Bool = false) {
        self.descriptors = descriptors
        self.closesInBackground = closesInBackground
        owner = nil
    }

    /// The files of levels `first...` of `owner`, which stays their only owner (a preview's writer
    /// writes the coarse levels of a pyramid through this).
    init(levelsFrom first: Int, of owner: LevelFiles) {
        descriptors = Array(owner.descriptors[first...])
        closesInBackground = false
        self.owner = owner
    }

    deinit {
        guard owner == nil else { return }
        let descriptors = self.descriptors
        if closesInBackground {
            DispatchQueue.global(qos: .utility).async { SystemCall.close(descriptors) }
        } else {
            SystemCall.close(descriptors)
        }
    }

    /// Opens `count` anonymous files in `directory`: each is created exclusively with mode 0600 and
    /// unlinked at once, so it vanishes when closed, even if the process dies.
    static func ephemeral(count: Int, directory: String) throws(TileError) -> LevelFiles {
        var fds: [Int32] = []
        for _ in 0..<count {
            do { fds.append(try SystemCall.createAnonymous(in: directory)) } catch {
                SystemCall.close(fds)
                throw error
            }
        }
        return LevelFiles(descriptors: fds, closesInBackground: true)
    }

    /// The default folder for ephemeral files: `$TMPDIR`, else `/tmp`.
    static var defaultDirectory: String {
        if let value = getenv("TMPDIR"), value.pointee != 0 { return String(cString: value) }
        return "/tmp"
    }
}
