import Foundation
#if canImport(Glibc)
import Glibc
#endif

extension StagedStore {
    /// The files of a TIFF store being built: the TIFF, then an anonymous spool file the lower levels'
    /// tiles wait in until level 0 is written (``TIFFPyramidWriter``). A persistent store's TIFF is
    /// `pyramid.tif` in the staging folder, published with it; an ephemeral one's is anonymous.
    static func createTIFF(_ storage: TileStorage) throws(TileError) -> StagedStore {
        switch storage {
        case .ephemeral(let directory):
            let folder = directory ?? LevelFiles.defaultDirectory
            let files = try LevelFiles.opening(2, closesInBackground: true) { index throws(TileError) in
                try SystemCall.createAnonymous(in: folder, what: index == 0 ? "a TIFF file" : "a spool file")
            }
            return StagedStore(files: files, stagingPath: nil, finalPath: nil, scratchDirectory: folder)
        case .persistent(let path):
            let url = URL(fileURLWithPath: path)
            let (staging, lock) = try makeStagingFolder(for: url)
            let files: LevelFiles
            do {
                files = try LevelFiles.opening(2) { index throws(TileError) in
                    index == 0
                        ? try SystemCall.createExclusive("\(staging)/\(StoreManifest.tiffFileName)", mode: publishedFileMode)
                        : try SystemCall.createAnonymous(in: staging, what: "a spool file")
                }
            } catch {
                removeStoreFolder(staging)
                throw error
            }
            return StagedStore(
                files: files, stagingPath: staging, finalPath: url.path, scratchDirectory: staging,
                publishedDescriptors: [files.descriptors[0]], lock: lock)
        }
    }
}
