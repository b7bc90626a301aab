#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// Owns the open file descriptors of a pyramid's level files and closes them when released.
///
/// Sendable: the descriptors never change after init, and `pread`/`pwrite` at explicit offsets are
/// safe from several threads at once.
final class LevelFiles: Sendable {
    let descriptors: [Int32]
    /// Unlinked files: the last close frees their blocks, which takes the kernel a while (0.4 s for
    /// the 1.7 GB of an 18000x18000 pyramid here), so they are closed on a short-lived thread of
    /// their own rather than on the thread that drops the pyramid (which may be an event loop or
    /// Swift's cooperative pool).
    private let closesInBackground: Bool
    /// For a view of some of another's files: that owner, kept alive, which closes them.
    private let owner: LevelFiles?

    private init(descriptors: [Int32], closesInBackground: Bool) {
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
            let closing = Thread { SystemCall.close(descriptors) }
            closing.name = "tile-close"
            closing.start()
        } else {
            SystemCall.close(descriptors)
        }
    }

    /// The files `open` opens, one for each of `0 ..< count`, owned from the moment each is opened: when
    /// one fails, those opened before it are closed.
    static func opening(
        _ count: Int, closesInBackground: Bool = false, _ open: (Int) throws(TileError) -> OwnedDescriptor
    ) throws(TileError) -> LevelFiles {
        var descriptors: [Int32] = []
        descriptors.reserveCapacity(count)
        do {
            for index in 0..<count { descriptors.append(try open(index).take()) }
        } catch {
            SystemCall.close(descriptors)
            throw error
        }
        return LevelFiles(descriptors: descriptors, closesInBackground: closesInBackground)
    }

    /// Opens `count` anonymous files in `directory`: each is created exclusively with mode 0600 and
    /// unlinked at once, so it vanishes when closed, even if the process dies.
    static func ephemeral(count: Int, directory: String) throws(TileError) -> LevelFiles {
        try opening(count, closesInBackground: true) { _ throws(TileError) in try SystemCall.createAnonymous(in: directory) }
    }

    /// The default folder for ephemeral files: `$TMPDIR`, else `/tmp`.
    static var defaultDirectory: String {
        if let value = getenv("TMPDIR"), value.pointee != 0 { return String(cString: value) }
        return "/tmp"
    }
}
