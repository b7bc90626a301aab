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
        var mappings: [MappedFile?]
        /// Per level, a bit per stored tile this image has brought into the page cache (see readTile).
        var cachedTiles: [[UInt64]]
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
    /// For a TIFF pyramid (``StoreFormat/tiff(_:)``, ``open(tiff:)``): where its tiles are and how they
    /// decode; `nil` for raw level files.
    let tiff: TIFFSource?
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
        self.tiff = tiff
        let count = geometry.levels.count
        progress = given ?? TileRowCounters(count: count, initialValues: complete ? geometry.levels.map(\.storedRows) : nil)
        previewProgress = TileRowCounters(count: count)
        state = NIOLockedValueBox(
            State(
                failure: nil, mappings: Array(repeating: nil, count: count),
                cachedTiles: geometry.levels.map { Array(repeating: 0, count: ($0.storedColumns * $0.storedRows + 63) / 64) }))
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

    /// Reads one tile with one `pread` (display orientation; a transformed tile is flipped in memory).
    /// The first read of a tile by this image also asks the kernel to bring the tile's 2 MiB
    /// neighbourhood into the page cache as one large folio (`MADV_POPULATE_READ` on a huge-page
    /// mapping): a cold read costs more (it reads 2 to 4 MiB), warm reads of any tile near it less.
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
        if tiff != nil { return try readTIFFTile(level: level, column: column, row: row, into: destination) }
        guard geometry.readsWholeTiles else {
            return try readAssembledTile(level: level, column: column, row: row, into: destination)
        }
        let (offset, _) = try checkedLocation(level: level, column: column, row: row)
        if geometry.orientation != .identity {
            let view = try mapping(level: level)
            TileTransform.apply(geometry.orientation, from: view.base + offset, to: destination, side: geometry.tileSize)
            view.release(offset: offset, byteCount: byteCount)
            return
        }
        let tile = offset / byteCount
        if !state.withLockedValue({ $0.cachedTiles[level][tile / 64] & (1 << (tile % 64)) != 0 }) {
            // A tile's first read brings it into the page cache through the level's huge-page mapping:
            // the kernel then reads its 2 MiB neighbourhood as one large folio, and later reads copy
            // from large folios (21 us here) instead of the 4 KiB pages a plain cold pread leaves
            // (35 to 45 us). Errors surface in the pread below. Not when the page cache holds the
            // tile already (another image of the same store, an earlier process): mapping and
            // unmapping it would cost a TLB flush on every core for nothing.
            let view = try mapping(level: level)
            if !view.isResident(offset: offset, byteCount: byteCount) { view.populate(offset: offset, byteCount: byteCount) }
            state.withLockedValue { $0.cachedTiles[level][tile / 64] |= 1 << (tile % 64) }
        }
        try SystemCall.readFully(
            files.descriptors[level], into: destination, count: byteCount, offset: offset, what: "a tile of level \(level)",
            path: storePath)
    }

    /// Reads rows `rows` of a tile (0 ..< tile size) into the start of `buffer`, one `pread` of just
    /// those rows, where tiles are stored upright (identity orientation); else the whole tile, as
    /// ``readTile(level:column:row:into:)`` does. Returns the row of the tile that `buffer` starts with.
    func readTileRows(level: Int, column: Int, row: Int, rows: Range<Int>, into buffer: UnsafeMutableRawBufferPointer)
        throws(TileError) -> Int
    {
        guard tiff == nil, geometry.orientation == .identity, geometry.readsWholeTiles, rows.count < geometry.tileSize else {
            try readTile(level: level, column: column, row: row, into: buffer)
            return 0
        }
        let rowBytes = geometry.tileSize * 4
        guard let destination = buffer.baseAddress, buffer.count >= rows.count * rowBytes,
            rows.lowerBound >= 0, rows.upperBound <= geometry.tileSize
        else { throw TileError(.invalidArgument, "rows \(rows) do not fit a tile or the buffer") }
        let (offset, _) = try checkedLocation(level: level, column: column, row: row)
        try SystemCall.readFully(
            files.descriptors[level], into: destination, count: rows.count * rowBytes,
            offset: offset + rows.lowerBound * rowBytes, what: "a tile of level \(level)", path: storePath)
        return rows.lowerBound
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

    /// Calls `body` with the tile's bytes, without copying when the orientation is identity (a view of
    /// the mapped level file); a transformed tile is flipped into a temporary buffer first.
    /// The bytes are valid only inside `body`.
    /// - Throws: what ``readTile(level:column:row:into:)`` throws, or what `body` throws.
    public func withTile<R>(level: Int, column: Int, row: Int, _ body: (UnsafeRawBufferPointer) throws -> R)
        throws -> R
    {
        guard geometry.readsWholeTiles, tiff == nil else {
            let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: geometry.tileByteCount, alignment: 16)
            defer { scratch.deallocate() }
            if tiff != nil {
                try readTIFFTile(level: level, column: column, row: row, into: scratch.baseAddress!)
            } else {
                try readAssembledTile(level: level, column: column, row: row, into: scratch.baseAddress!)
            }
            return try body(UnsafeRawBufferPointer(scratch))
        }
        let (offset, _) = try checkedLocation(level: level, column: column, row: row)
        let view = try mapping(level: level)
        let byteCount = geometry.tileByteCount
        if geometry.orientation == .identity {
            defer { view.release(offset: offset, byteCount: byteCount) }
            return try body(UnsafeRawBufferPointer(start: view.base + offset, count: byteCount))
        }
        let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: byteCount, alignment: 16)
        defer { scratch.deallocate() }
        TileTransform.apply(geometry.orientation, from: view.base + offset, to: scratch.baseAddress!, side: geometry.tileSize)
        view.release(offset: offset, byteCount: byteCount)
        return try body(UnsafeRawBufferPointer(scratch))
    }

    // MARK: - Internals shared with the builder

    func markFailed(_ error: TileError) { state.withLockedValue { $0.failure = error } }

    /// Whether the build behind this image failed (its reads throw).
    var hasFailed: Bool { state.withLockedValue { $0.failure != nil } }

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

    /// A display tile assembled pixel by pixel from the stored tiles it straddles (up to four, one
    /// `pread` each): for a store reopened with an orientation whose padding lies elsewhere than the
    /// build's (see ``TileGeometry/readsWholeTiles``). Only complete levels are read this way.
    private func readAssembledTile(level: Int, column: Int, row: Int, into destination: UnsafeMutableRawPointer)
        throws(TileError)
    {
        _ = try locate(level: level, column: column, row: row)
        if let failure = state.withLockedValue({ $0.failure }) { throw failure }
        let l = geometry.levels[level]
        guard isLevelComplete(level) else {
            throw TileError(.notReady, "tile (\(column), \(row)) of level \(level) is not written yet")
        }
        let side = geometry.tileSize
        let byteCount = geometry.tileByteCount
        destination.initializeMemory(as: UInt8.self, repeating: 0, count: byteCount)
        var stored: [Int: UnsafeMutableRawBufferPointer] = [:]
        defer { stored.values.forEach { $0.deallocate() } }
        let (x0, y0) = (column * side, row * side)
        for y in y0..<min(y0 + side, l.height) {
            for x in x0..<min(x0 + side, l.width) {
                let p = geometry.orientation.storedPosition(ofDisplay: x, y, width: l.storedWidth, height: l.storedHeight)
                let (px, py) = (p.x + l.storedXOffset, p.y + l.storedYOffset)
                let index = (py / side) * l.storedColumns + px / side
                let tile: UnsafeMutableRawBufferPointer
                if let cached = stored[index] {
                    tile = cached
                } else {
                    tile = UnsafeMutableRawBufferPointer.allocate(byteCount: byteCount, alignment: 16)
                    stored[index] = tile
                    try readStoredTile(level: level, offset: index * byteCount, into: tile.baseAddress!)
                }
                (destination + ((y - y0) * side + (x - x0)) * 4)
                    .copyMemory(from: tile.baseAddress! + ((py % side) * side + px % side) * 4, byteCount: 4)
            }
        }
    }

    private func readStoredTile(level: Int, offset: Int, into destination: UnsafeMutableRawPointer) throws(TileError) {
        try SystemCall.readFully(
            files.descriptors[level], into: destination, count: geometry.tileByteCount, offset: offset,
            what: "a tile of level \(level)", path: storePath)
    }

    func mapping(level: Int) throws(TileError) -> MappedFile {
        let result: Result<MappedFile, TileError> = state.withLockedValue { s in
            if let existing = s.mappings[level] { return .success(existing) }
            do throws(TileError) {
                let mapped = try MappedFile(
                    fd: files.descriptors[level], byteCount: geometry.byteCount(ofLevel: level), path: storePath ?? "level")
                s.mappings[level] = mapped
                return .success(mapped)
            } catch { return .failure(error) }
        }
        return try result.get()
    }
}
