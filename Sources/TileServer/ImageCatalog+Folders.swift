import Foundation
import TileCore

#if canImport(Glibc)
import Glibc
#endif

extension ImageCatalog {
    /// The name an upload's store is built and published under before it is renamed to `ID.tiles`.
    static let uploadStagingPrefix = ".upload-"

    /// `path` resolved (symlinks, `.`, `..`) to an absolute path.
    static func absolute(_ path: String) throws(TileError) -> String {
        guard let resolved = realpath(path, nil) else { throw TileError(.io, "cannot resolve the folder \(path)", errno: errno) }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// Refuses a cache folder that is the served folder or a visible folder inside it: the cache's
    /// stores and its evictions would then be the folder's own images (an admin purge would delete a
    /// store someone put there). A hidden folder inside it (the default, `FOLDER/.tiler-cache`) is
    /// never served.
    static func checkSeparate(root: String, cache: String) throws(TileError) {
        var cache = cache
        while cache.count > 1, cache.hasSuffix("/") { cache.removeLast() }
        guard cache != root else {
            throw TileError(.invalidArgument, "the cache folder \(cache) is the folder served: give a cache folder of its own")
        }
        guard cache.hasPrefix(root + "/") else { return }
        let first = cache.dropFirst(root.count + 1).prefix { $0 != "/" }
        guard first.hasPrefix(".") else {
            throw TileError(
                .invalidArgument,
                "the cache folder \(cache) is inside the folder served, where its stores would be served as images: give one outside it, or a hidden one (\(root)/.tiler-cache)"
            )
        }
    }
}
