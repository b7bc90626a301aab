import Synchronization

extension TiledImage {
    /// What the readable tiles of a level are.
    public enum TileQuality: Sendable, Hashable {
        /// Written by the build from the whole image (or nothing of the level is readable yet).
        case final
        /// From the whole-image preview made after scan `scan` of a progressive JPEG still arriving:
        /// blurred, and rewritten when the image is complete.
        case preliminary(scan: Int)
    }

    /// Whether the readable tiles of `level` are final, or some of them come from a preview and are
    /// not rewritten yet. Only the levels at 1/8 scale and below ever have a preview
    /// (``BuildOptions/preview``). While a preliminary tile is being rewritten, a read may return a
    /// tile part preview, part final.
    public func quality(ofLevel level: Int) -> TileQuality {
        guard geometry.levels.indices.contains(level), previewProgress[level] > progress[level] else { return .final }
        return .preliminary(scan: previewScanNumber.load(ordering: .acquiring))
    }

    /// The same for one tile: `.final` once the build has written it, `.preliminary` while it is
    /// readable only from a preview; `nil` when it is not readable (or does not exist).
    public func quality(level: Int, column: Int, row: Int) -> TileQuality? {
        guard isTileReady(level: level, column: column, row: row) else { return nil }
        let stored = geometry.storedTile(level: geometry.levels[level], column: column, row: row)
        guard stored.row >= progress[level] else { return .final }
        return .preliminary(scan: previewScanNumber.load(ordering: .acquiring))
    }

    /// Stored tile rows of a level a preview has made readable (0 when none).
    public func previewTileRows(level: Int) -> Int {
        geometry.levels.indices.contains(level) ? previewProgress[level] : 0
    }

    /// The scan the latest preview shows, if a preview was made.
    public var previewScan: Int? {
        let scan = previewScanNumber.load(ordering: .acquiring)
        return scan > 0 ? scan : nil
    }

    /// Stored tile rows of `level` readable now: the build's, or a preview's.
    func readableRows(_ level: Int) -> Int { max(progress[level], previewProgress[level]) }

    /// Makes levels `first...` readable from a preview of scan `scan` whose tiles are written.
    func publishPreview(scan: Int, levelsFrom first: Int) {
        previewScanNumber.store(scan, ordering: .releasing)
        for level in first..<levelCount { previewProgress[level] = geometry.levels[level].storedRows }
    }
}
