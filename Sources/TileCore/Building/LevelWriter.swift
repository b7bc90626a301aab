/// How a pyramid's rows reach its level files: one strategy per case, each carrying only the
/// parameters it reads, so an impossible combination cannot be written down. The same two names are
/// used by the C shim (`CJS_WRITER_BANDS`, `CJS_WRITER_WINDOW`), `tiler --writer bands|window` and
/// BENCHMARKS.md.
public enum LevelWriter: Sendable, Hashable {
    /// The band writer (the default): each level's rows are gathered in bands of
    /// ``BandWriting/rowsPerBlock`` rows, and a full band is written as one contiguous block per tile.
    /// Memory per level is a few bands (about 58 MiB in all for an 18000x18000 image), never tile rows.
    case bands(BandWriting = BandWriting())
    /// The window writer: a shared mapping of two tile rows of each level's file; rows are scattered
    /// into it on the caller's thread and the kernel writes the pages back. Simple and light on
    /// memory, slower on ext4 here (see BENCHMARKS.md).
    case window
}

/// The band writer's parameters.
public struct BandWriting: Sendable, Hashable {
    /// Where the band writer's work runs.
    public enum Threading: Sendable, Hashable {
        /// Tiles and writes on the caller's thread, inside `append`.
        case onCaller
        /// A worker thread tiles and writes while the caller decodes; each full band is written
        /// before the next is filled (one band per level).
        case onWorker
        /// As ``onWorker``, and each full band's writes run asynchronously (Linux AIO) while the
        /// next band fills (three bands per level; two when a band is a whole tile row). Where AIO is
        /// refused, the worker writes synchronously. The default.
        case writeBehind
    }

    /// Where the work runs. Default ``Threading/writeBehind``.
    public var threading: Threading
    /// Rows of each tile written as one block: a divisor of the tile size; `nil` (the default) for 64
    /// (64 KiB blocks of 256-pixel tiles), or the tile size where 64 does not divide it. Whole tile
    /// rows (the tile size) write 256 KiB blocks, which some devices take faster, for about twice
    /// the memory (see BENCHMARKS.md).
    public var rowsPerBlock: Int?
    /// Write with `O_DIRECT` where the file system allows it (not tmpfs) and blocks are 4096-aligned,
    /// bypassing the page cache: filling fresh page-cache pages is the single largest cost of a build
    /// on ext4 here (see BENCHMARKS.md). The first read of a tile then comes from the disk.
    /// Default `true`.
    public var bypassesPageCache: Bool

    /// - Parameters:
    ///   - threading: default ``Threading/writeBehind``.
    ///   - rowsPerBlock: default `nil` (64 rows).
    ///   - bypassesPageCache: default `true`.
    public init(threading: Threading = .writeBehind, rowsPerBlock: Int? = nil, bypassesPageCache: Bool = true) {
        self.threading = threading
        self.rowsPerBlock = rowsPerBlock
        self.bypassesPageCache = bypassesPageCache
    }
}
