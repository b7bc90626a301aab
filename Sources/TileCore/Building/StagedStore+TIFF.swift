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
            let tiff = try SystemCall.createAnonymous(in: folder, what: "a TIFF file")
            let spool: Int32
            do { spool = try SystemCall.createAnonymous(in: folder, what: "a spool file") } catch {
                SystemCall.close([tiff])
                throw error
            }
            return StagedStore(
                files: LevelFiles(descriptors: [tiff, spool], closesInBackground: true), stagingPath: nil, finalPath: nil,
                scratchDirectory: folder)
        case .persistent(let path):
            let url = URL(fileURLWithPath: path)
            let (staging, lock) = try makeStagingFolder(for: url)
            var fds: [Int32] = []
            do {
                fds.append(try SystemCall.createExclusive("\(staging)/\(StoreManifest.tiffFileName)", mode: 0o644))
                fds.append(try SystemCall.createAnonymous(in: staging, what: "a spool file"))
            } catch {
                SystemCall.close(fds)
                removeStoreFolder(staging)
                throw error
            }
            return StagedStore(
                files: LevelFiles(descriptors: fds), stagingPath: staging, finalPath: url.path, scratchDirectory: staging,
                publishedDescriptors: [fds[0]], lock: lock)
        }
    }
}
