/// Where a build writes its level files.
public enum TileStorage: Sendable, Hashable {
    /// Anonymous files in `directory` (default `$TMPDIR`, else `/tmp`), unlinked as soon as they are
    /// opened: they vanish when the ``TiledImage`` is released, or when the process dies.
    case ephemeral(directory: String? = nil)
    /// A store folder at `path`: a `manifest.json` and one `level-N.tiles` file per level, written
    /// under a temporary name beside it and renamed into place only when complete. An existing store
    /// at `path` is replaced. Reopen it with ``TiledImage/open(store:)``.
    case persistent(path: String)
}

/// How level 0 rows reach the level files.
public enum TileWriterKind: Sendable, Hashable {
    /// Bands of 64 rows per level in memory, each written as one contiguous block per tile when full
    /// (asynchronously with ``BuildOptions/writesBehind``).
    case stripWrite
    /// A shared mapping of two tile rows of each level's file; rows are scattered into it.
    case mappedWindow
}
