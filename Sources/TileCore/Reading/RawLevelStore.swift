#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NIOConcurrencyHelpers

/// A raw store's tiles: one file per level, each stored tile one contiguous block of RGBA pixels, tile
/// rows one after the other. Display tiles of a turned image are flipped in memory, or assembled from
/// the stored tiles they straddle where the padding lies elsewhere (``TileGeometry/readsWholeTiles``).
final class RawLevelStore: TileStore {
    private struct State {
        var mappings: [MappedFile?]
        /// Per level, a bit per stored tile this store has brought into the page cache (see readTile).
        var cachedTiles: [[UInt64]]
    }

    let geometry: TileGeometry
    let files: LevelFiles
    /// The store's folder, for messages (nil: ephemeral files).
    let storePath: String?
    /// Complete stored tile rows per level (the writer's counts).
    let progress: TileRowCounters
    /// Behind a pthread mutex (NIO's lock): see ``TiledImage``.
    private let state: NIOLockedValueBox<State>

    init(geometry: TileGeometry, files: LevelFiles, storePath: String?, progress: TileRowCounters) {
        (self.geometry, self.files, self.storePath, self.progress) = (geometry, files, storePath, progress)
        state = NIOLockedValueBox(
            State(
                mappings: Array(repeating: nil, count: geometry.levels.count),
                cachedTiles: geometry.levels.map { Array(repeating: 0, count: ($0.storedColumns * $0.storedRows + 63) / 64) }))
    }

    func coding(ofLevel level: Int) -> TileCoding { .rawRGBA }

    /// The byte offset of a display tile's stored tile in its level file: the image checked that the tile
    /// exists, so nothing is checked again here (a tile read's path).
    private func offset(level: Int, column: Int, row: Int) -> Int {
        let l = geometry.levels[level]
        let stored = geometry.storedTile(level: l, column: column, row: row)
        return (stored.row * l.storedColumns + stored.column) * geometry.tileByteCount
    }

    /// One `pread` (a transformed tile is flipped in memory). The first read of a tile by this store
    /// also asks the kernel to bring the tile's 2 MiB neighbourhood into the page cache as one large
    /// folio (`MADV_POPULATE_READ` on a huge-page mapping): a cold read costs more (it reads 2 to 4
    /// MiB), warm reads of any tile near it less.
    func readTile(level: Int, column: Int, row: Int, into destination: UnsafeMutableRawPointer) throws(TileError) {
        guard geometry.readsWholeTiles else { return try readAssembledTile(level: level, column: column, row: row, into: destination) }
        let byteCount = geometry.tileByteCount
        let offset = offset(level: level, column: column, row: row)
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
        try read(level: level, offset: offset, count: byteCount, into: destination)
    }

    /// One `pread` of just those rows where tiles are stored upright.
    func readTileRows(level: Int, column: Int, row: Int, rows: Range<Int>, into buffer: UnsafeMutableRawBufferPointer)
        throws(TileError) -> Int
    {
        guard geometry.orientation == .identity, geometry.readsWholeTiles, rows.count < geometry.tileSize else {
            guard buffer.count >= geometry.tileByteCount, let destination = buffer.baseAddress else {
                throw TileError(.invalidArgument, "a tile needs \(geometry.tileByteCount) bytes, the buffer has \(buffer.count)")
            }
            try readTile(level: level, column: column, row: row, into: destination)
            return 0
        }
        let rowBytes = geometry.tileSize * 4
        guard let destination = buffer.baseAddress, buffer.count >= rows.count * rowBytes,
            rows.lowerBound >= 0, rows.upperBound <= geometry.tileSize
        else { throw TileError(.invalidArgument, "rows \(rows) do not fit a tile or the buffer") }
        let offset = offset(level: level, column: column, row: row) + rows.lowerBound * rowBytes
        try read(level: level, offset: offset, count: rows.count * rowBytes, into: destination)
        return rows.lowerBound
    }

    /// A view of the mapped level file when the orientation is identity; a transformed tile is flipped
    /// into a temporary buffer first.
    func withTile<R>(level: Int, column: Int, row: Int, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        let byteCount = geometry.tileByteCount
        guard geometry.readsWholeTiles else {
            return try Self.withScratch(byteCount) { scratch throws in
                try readAssembledTile(level: level, column: column, row: row, into: scratch)
                return try body(UnsafeRawBufferPointer(start: scratch, count: byteCount))
            }
        }
        let offset = offset(level: level, column: column, row: row)
        let view = try mapping(level: level)
        if geometry.orientation == .identity {
            defer { view.release(offset: offset, byteCount: byteCount) }
            return try body(UnsafeRawBufferPointer(start: view.base + offset, count: byteCount))
        }
        return try Self.withScratch(byteCount) { scratch throws in
            TileTransform.apply(geometry.orientation, from: view.base + offset, to: scratch, side: geometry.tileSize)
            view.release(offset: offset, byteCount: byteCount)
            return try body(UnsafeRawBufferPointer(start: scratch, count: byteCount))
        }
    }

    /// Calls `body` with a temporary buffer of `byteCount` bytes.
    private static func withScratch<R>(_ byteCount: Int, _ body: (UnsafeMutableRawPointer) throws -> R) throws -> R {
        let scratch = UnsafeMutableRawPointer.allocate(byteCount: byteCount, alignment: 16)
        defer { scratch.deallocate() }
        return try body(scratch)
    }

    func uprightMapping(level: Int) throws(TileError) -> MappedFile? {
        geometry.orientation == .identity && geometry.readsWholeTiles ? try mapping(level: level) : nil
    }

    /// Complete tile rows written to the level files so far.
    var bytesWritten: Int {
        geometry.levels.indices.reduce(0) { sum, index in sum + progress[index] * geometry.levels[index].storedColumns * geometry.tileByteCount }
    }

    /// Every tile, padding included: exact before anything is written.
    var totalByteCount: Int { geometry.levels.indices.reduce(0) { $0 + geometry.byteCount(ofLevel: $1) } }
    var estimatedByteCount: Int { totalByteCount }

    /// `fdatasync`, then `posix_fadvise(POSIX_FADV_DONTNEED)` over the complete tile rows.
    func flushWrittenData() throws(TileError) {
        for (index, fd) in files.descriptors.enumerated() {
            guard fdatasync(fd) == 0 else { throw SystemCall.error("cannot sync level \(index)", path: storePath) }
            let length = progress[index] * geometry.levels[index].storedColumns * geometry.tileByteCount
            if length > 0 { _ = posix_fadvise(fd, 0, off_t(length), Int32(POSIX_FADV_DONTNEED)) }
        }
    }

    /// A display tile assembled pixel by pixel from the stored tiles it straddles (up to four, one
    /// `pread` each): for a store reopened with an orientation whose padding lies elsewhere than the
    /// build's (see ``TileGeometry/readsWholeTiles``). Only complete levels are read this way.
    private func readAssembledTile(level: Int, column: Int, row: Int, into destination: UnsafeMutableRawPointer) throws(TileError) {
        let l = geometry.levels[level]
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
                    try read(level: level, offset: index * byteCount, count: byteCount, into: tile.baseAddress!)
                }
                (destination + ((y - y0) * side + (x - x0)) * 4)
                    .copyMemory(from: tile.baseAddress! + ((py % side) * side + px % side) * 4, byteCount: 4)
            }
        }
    }

    private func read(level: Int, offset: Int, count: Int, into destination: UnsafeMutableRawPointer) throws(TileError) {
        try SystemCall.readFully(
            files.descriptors[level], into: destination, count: count, offset: offset, what: "a tile of level \(level)", path: storePath)
    }

    private func mapping(level: Int) throws(TileError) -> MappedFile {
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
