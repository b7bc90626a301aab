import Foundation

/// Where a build writes its level files.
public enum TileStorage: Sendable, Hashable {
    /// Anonymous files in `directory` (default `$TMPDIR`, else `/tmp`), unlinked as soon as they are
    /// opened: they vanish when the ``TiledImage`` is released, or when the process dies.
    case ephemeral(directory: String? = nil)
    /// A store folder at `path`: a `manifest.json` and one `level-N.tiles` file per level, written
    /// under a temporary name beside it and renamed into place only when complete. An existing store
    /// at `path` is replaced. Reopen it with ``TiledImage/open(store:orientation:)``.
    case persistent(path: String)
}

extension TileStorage {
    /// Where a build spools a master it must read as a whole file (a TIFF pushed as bytes): the
    /// ephemeral files' folder, or the folder the store is published in (the same disk).
    var spoolDirectory: String {
        switch self {
        case .ephemeral(let directory): directory ?? LevelFiles.defaultDirectory
        case .persistent(let path): URL(fileURLWithPath: path).deletingLastPathComponent().path
        }
    }
}
