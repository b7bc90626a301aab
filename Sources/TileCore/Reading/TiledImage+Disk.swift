#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension TiledImage {
    /// Bytes of complete tile rows written to the level files so far (a TIFF pyramid: its tiles' bytes
    /// written so far, or the file's size).
    public var bytesWritten: Int {
        if let tiff { return tiff.byteCount }
        return geometry.levels.indices.reduce(0) { sum, index in
            sum + progress[index] * geometry.levels[index].storedColumns * geometry.tileByteCount
        }
    }

    /// What the store will take when complete, known from the header alone, for a disk budget to
    /// reserve before the build writes: exact for raw level files (every tile, padding included); for
    /// a TIFF pyramid of JPEG tiles an estimate of 2 bits a pixel over every level (photos at the
    /// default quality take about 1; a budget stops a build that writes past what fits).
    public var estimatedStoreByteCount: Int { TileBuilder.storeByteEstimate(geometry, tiff: tiff != nil) }

    /// Complete tile rows of a level, in stored order (rows of the file, top to bottom).
    /// 0 for a level that does not exist.
    public func storedTileRowsComplete(level: Int) -> Int {
        geometry.levels.indices.contains(level) ? progress[level] : 0
    }

    /// Bytes the level files take when complete (a TIFF pyramid: the TIFF file's size, final once the
    /// pyramid is complete; JPEG sizes are not known before).
    public var totalByteCount: Int {
        if let tiff { return tiff.fileByteCount }
        return geometry.levels.indices.reduce(0) { $0 + geometry.byteCount(ofLevel: $1) }
    }

    /// Pushes written tile data to the disk (`fdatasync`) and drops its pages from the page cache
    /// (`posix_fadvise(POSIX_FADV_DONTNEED)` over the complete tile rows), so written data does not
    /// pile up in memory. Blocks for as long as the disk takes.
    /// - Throws: ``TileError/Code/io`` when the sync fails (the data may not be on the disk).
    public func flushWrittenData() throws(TileError) {
        if tiff != nil {
            // A TIFF's tiles are appended: the whole file so far is written data.
            for fd in files.descriptors {
                guard fdatasync(fd) == 0 else { throw SystemCall.error("cannot sync the TIFF", path: storePath) }
                _ = posix_fadvise(fd, 0, 0, Int32(POSIX_FADV_DONTNEED))
            }
            return
        }
        for (index, fd) in files.descriptors.enumerated() {
            guard fdatasync(fd) == 0 else { throw SystemCall.error("cannot sync level \(index)", path: storePath) }
            let rows = progress[index]
            let length = rows * geometry.levels[index].storedColumns * geometry.tileByteCount
            if length > 0 { _ = posix_fadvise(fd, 0, off_t(length), Int32(POSIX_FADV_DONTNEED)) }
        }
    }

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
