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
