#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NIOConcurrencyHelpers
import Synchronization

/// A tile pyramid on disk: one file per level, each tile one contiguous block of RGBA pixels.
///
/// Tiles are read in display orientation: tile (column, row) of a level is the upright tile, whatever
/// the stored orientation. A tile can be read as soon as its tile row is complete, also while the
/// pyramid is still being built; before that, a read throws ``TileError/Code/notReady``.
/// Thread-safe: reads may run from any number of threads at once.
public final class TiledImage: Sendable {
    private struct State {
        var failure: TileError?
    }

    /// Level sizes, tile grids and the orientation.
    public let geometry: TileGeometry
    /// Where the level files live: a store folder for persistent pyramids, `nil` for ephemeral ones.
    public let storePath: String?
    let files: LevelFiles
    let progress: TileRowCounters
    /// Per level, stored tile rows a preview wrote (a progressive JPEG's coarse levels, before its
    /// last scan): readable, not final. See ``quality(ofLevel:)``.
    let previewProgress: TileRowCounters
    /// The scan the preview shows (0: no preview).
    let previewScanNumber = Atomic<Int>(0)
    /// Where the tiles are kept and how they are read: raw level files, or a TIFF pyramid
    /// (``StoreFormat/tiff(_:)``, ``open(tiff:)``).
    let store: any TileStore
    /// Behind a pthread mutex (NIO's lock), not the standard library's `Mutex`: on Linux the latter's
    /// contended path (a futex) is compiled outside the package, so ThreadSanitizer cannot see it
    /// order two threads' accesses and reports races that are not there. The server's locks are NIO's
    /// for the same reason.
    private let state: NIOLockedValueBox<State>
    private let scratchBytes = Atomic<Int>(0)
    /// A store opened from its folder holds the folder shared while the image lives, so that no cache
    /// eviction (``removeStoreIfUnused(at:)``, here or in another process) removes it meanwhile.
    let storeHold: FolderLock?
    /// The source's ICC profile, carried into the outputs it describes (``ColorProfile``): JPEG tiles and
    /// regions, stored tiles as sent, PNGs. A TIFF pyramid's is its first directory's InterColorProfile.
    public let colorProfile: ColorProfile?

    init(
        geometry: TileGeometry, files: LevelFiles, storePath: String?, complete: Bool, tiff: TIFFSource? = nil,
        colorProfile: ColorProfile? = nil, progress given: TileRowCounters? = nil, storeHold: FolderLock? = nil
    ) {
        self.storeHold = storeHold
        self.colorProfile = tiff?.colorProfile ?? colorProfile
        self.geometry = geometry
        self.files = files
        self.storePath = storePath
        let count = geometry.levels.count
        let progress = given ?? TileRowCounters(count: count, initialValues: complete ? geometry.levels.map(\.storedRows) : nil)
        self.progress = progress
        previewProgress = TileRowCounters(count: count)
        state = NIOLockedValueBox(State(failure: nil))
        store =
            if let tiff { TIFFTileStore(source: tiff, geometry: geometry, files: files, storePath: storePath) } else {
                RawLevelStore(geometry: geometry, files: files, storePath: storePath, progress: progress)
            }
    }

    /// Number of levels; level 0 is the full-resolution image.
    public var levelCount: Int { geometry.levels.count }

    /// Level `index` (display orientation).
    /// - Throws: ``TileError/Code/invalidArgument`` when the level does not exist (0 ..< ``levelCount``).
    public func level(_ index: Int) throws(TileError) -> PyramidLevel { try geometry.checkedLevel(index) }

    /// Whether every tile of every level has been written.
    public var isComplete: Bool {
        geometry.levels.indices.allSatisfy(isLevelComplete)
    }

    /// Whether every tile of `level` has been written (`false` for a level that does not exist).
    public func isLevelComplete(_ level: Int) -> Bool {
        geometry.levels.indices.contains(level) && progress[level] == geometry.levels[level].storedRows
    }

    /// Whether the tile can be read now.
    public func isTileReady(level: Int, column: Int, row: Int) -> Bool {
        guard let (_, stored) = try? locate(level: level, column: column, row: row) else { return false }
        guard state.withLockedValue({ $0.failure == nil }) else { return false }
        return geometry.readsWholeTiles ? stored.row < readableRows(level) : isLevelComplete(level)
    }

    /// Reads one tile (display orientation): from raw level files one `pread` (a transformed tile is
    /// flipped in memory; the first read of a tile also brings its 2 MiB neighbourhood into the page
    /// cache as one large folio); from a TIFF one `pread` and one decode.
    /// - Parameters:
    ///   - level: 0 ..< ``levelCount``.
    ///   - column: the tile's column, in display orientation.
    ///   - row: the tile's row, in display orientation.
    ///   - buffer: at least ``TileGeometry/tileByteCount`` bytes.
    /// - Throws: ``TileError/Code/invalidArgument`` for coordinates out of range or a small buffer,
    ///   ``TileError/Code/notReady`` before the tile's row is complete, ``TileError/Code/io``.
    public func readTile(level: Int, column: Int, row: Int, into buffer: UnsafeMutableRawBufferPointer)
        throws(TileError)
    {
        let byteCount = geometry.tileByteCount
        guard buffer.count >= byteCount, let destination = buffer.baseAddress else {
            throw TileError(.invalidArgument, "a tile needs \(byteCount) bytes, the buffer has \(buffer.count)")
        }
        try checkReadable(level: level, column: column, row: row)
        try store.readTile(level: level, column: column, row: row, into: destination)
    }

    /// Reads rows `rows` of a tile (0 ..< tile size) into the start of `buffer`, one `pread` of just
    /// those rows, where tiles are stored upright in raw level files; else the whole tile, as
    /// ``readTile(level:column:row:into:)`` does. Returns the row of the tile that `buffer` starts with.
    func readTileRows(level: Int, column: Int, row: Int, rows: Range<Int>, into buffer: UnsafeMutableRawBufferPointer)
        throws(TileError) -> Int
    {
        try checkReadable(level: level, column: column, row: row)
        return try store.readTileRows(level: level, column: column, row: row, rows: rows, into: buffer)
    }

    /// Reads one tile into a new array (see ``readTile(level:column:row:into:)``).
    public func readTile(level: Int, column: Int, row: Int) throws(TileError) -> [UInt8] {
        var result = [UInt8](repeating: 0, count: geometry.tileByteCount)
        var failure: TileError?
        result.withUnsafeMutableBytes { buffer in
            do throws(TileError) { try readTile(level: level, column: column, row: row, into: buffer) } catch {
                failure = error
            }
        }
        if let failure { throw failure }
        return result
    }

    /// Calls `body` with the tile's bytes, without copying where it can (a view of a raw level file's
    /// mapping when the orientation is identity); else the tile is read into a temporary buffer first.
    /// The bytes are valid only inside `body`.
    /// - Throws: what ``readTile(level:column:row:into:)`` throws, or what `body` throws.
    public func withTile<R>(level: Int, column: Int, row: Int, _ body: (UnsafeRawBufferPointer) throws -> R)
        throws -> R
    {
        try checkReadable(level: level, column: column, row: row)
        return try store.withTile(level: level, column: column, row: row, body)
    }

    // MARK: - Internals shared with the builder

    func markFailed(_ error: TileError) { state.withLockedValue { $0.failure = error } }

    /// Whether the build behind this image failed: its reads throw the build's error (a master that
    /// is no image, cut short), not one of the store's own.
    public var hasFailed: Bool { state.withLockedValue { $0.failure != nil } }

    /// Bytes of the temporary files the build uses beside the level files (a progressive JPEG's
    /// coefficient file) while they exist; 0 once the build has ended, or when it needs none. Disk
    /// budgets count them (``bytesWritten`` counts the tiles).
    public var scratchByteCount: Int { scratchBytes.load(ordering: .relaxed) }

    func setScratchByteCount(_ count: Int) { scratchBytes.store(count, ordering: .relaxed) }

    private func locate(level: Int, column: Int, row: Int) throws(TileError) -> (Int, (column: Int, row: Int)) {
        let l = try geometry.checkedLevel(level)
        guard (0..<l.columns).contains(column), (0..<l.rows).contains(row) else {
            throw TileError(.invalidArgument, "tile (\(column), \(row)) is outside level \(level)'s \(l.columns)x\(l.rows) grid")
        }
        let stored = geometry.storedTile(level: l, column: column, row: row)
        return ((stored.row * l.storedColumns + stored.column) * geometry.tileByteCount, stored)
    }

    /// The byte offset of a tile that can be read now (``TileError/Code/notReady`` or the build's
    /// failure otherwise).
    func checkedTileOffset(level: Int, column: Int, row: Int) throws(TileError) -> Int {
        try checkedLocation(level: level, column: column, row: row).0
    }

    private func checkedLocation(level: Int, column: Int, row: Int) throws(TileError) -> (Int, (column: Int, row: Int)) {
        let location = try locate(level: level, column: column, row: row)
        if let failure = state.withLockedValue({ $0.failure }) { throw failure }
        if location.1.row >= readableRows(level) {
            throw TileError(.notReady, "tile (\(column), \(row)) of level \(level) is not written yet")
        }
        return location
    }

    /// Throws unless the tile can be read now: it exists, the build has not failed, and its row is
    /// written (a store read with display tiles assembled from stored ones: its level is complete).
    private func checkReadable(level: Int, column: Int, row: Int) throws(TileError) {
        guard geometry.readsWholeTiles else {
            _ = try locate(level: level, column: column, row: row)
            if let failure = state.withLockedValue({ $0.failure }) { throw failure }
            guard isLevelComplete(level) else { throw TileError(.notReady, "tile (\(column), \(row)) of level \(level) is not written yet") }
            return
        }
        _ = try checkedLocation(level: level, column: column, row: row)
    }
}
