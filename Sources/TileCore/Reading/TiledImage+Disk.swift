#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension TiledImage {
    /// Bytes of complete tile rows written to the level files so far (a TIFF pyramid: its tiles' bytes
    /// written so far, or the file's size).
    public var bytesWritten: Int { store.bytesWritten }

    /// What the store will take when complete, known from the header alone, for a disk budget to
    /// reserve before the build writes: exact for raw level files (every tile, padding included); for
    /// a TIFF pyramid of JPEG tiles an estimate of 2 bits a pixel over every level (photos at the
    /// default quality take about 1; a budget stops a build that writes past what fits).
    public var estimatedStoreByteCount: Int { store.estimatedByteCount }

    /// Complete tile rows of a level, in stored order (rows of the file, top to bottom).
    /// 0 for a level that does not exist.
    public func storedTileRowsComplete(level: Int) -> Int {
        geometry.levels.indices.contains(level) ? progress[level] : 0
    }

    /// Bytes the level files take when complete (a TIFF pyramid: the TIFF file's size, final once the
    /// pyramid is complete; JPEG sizes are not known before).
    public var totalByteCount: Int { store.totalByteCount }

    /// Pushes written tile data to the disk (`fdatasync`) and drops its pages from the page cache
    /// (`posix_fadvise(POSIX_FADV_DONTNEED)` over the complete tile rows), so written data does not
    /// pile up in memory. Blocks for as long as the disk takes.
    /// - Throws: ``TileError/Code/io`` when the sync fails (the data may not be on the disk).
    public func flushWrittenData() throws(TileError) { try store.flushWrittenData() }

    /// Removes a store folder written by a persistent build (its manifest and level files).
    /// Images already open on it keep working until released; nothing else is touched.
    /// - Throws: ``TileError/Code/invalidStore`` when the folder is not a store.
    public static func removeStore(at path: String) throws(TileError) {
        guard access("\(path)/\(StoreManifest.fileName)", F_OK) == 0 else {
            throw TileError(.invalidStore, "\(path) is not a tile store")
        }
        removeStoreFolder(path)
    }

    /// Removes a store folder as ``removeStore(at:)`` does, unless an image has it open, in this process
    /// or another that shares the folder (a store open for reading holds its folder shared: see
    /// ``open(store:orientation:)``): what a cache eviction calls.
    /// - Returns: false, touching nothing, when the store is open somewhere.
    /// - Throws: ``TileError/Code/invalidStore`` when the folder is not a store.
    public static func removeStoreIfUnused(at path: String) throws(TileError) -> Bool {
        guard access("\(path)/\(StoreManifest.fileName)", F_OK) == 0 else {
            throw TileError(.invalidStore, "\(path) is not a tile store")
        }
        guard let lock = FolderLock(holding: path) else { return false }
        removeStoreFolder(path)
        withExtendedLifetime(lock) {}
        return true
    }
}
