import Foundation

extension TiledImage {
    /// Reopens a complete persistent store without decoding anything.
    /// - Parameter path: the store folder a build with ``TileStorage/persistent(path:)`` published.
    /// - Throws: ``TileError/Code/invalidStore`` when the folder is not a complete store of this format
    ///   (a half-written store never has a manifest at its final path), ``TileError/Code/io``.
    ///   Leftovers of builds of this store that died (staging folders) are removed first.
    public static func open(store path: String) throws(TileError) -> TiledImage {
        let url = URL(fileURLWithPath: path)
        StagedStore.removeLeftovers(of: url.lastPathComponent, in: url.deletingLastPathComponent().path)
        let manifestPath = "\(path)/\(StoreManifest.fileName)"
        guard let data = FileManager.default.contents(atPath: manifestPath) else {
            throw TileError(.invalidStore, "\(path) is not a tile store (no readable \(StoreManifest.fileName))")
        }
        let manifest = try StoreManifest.decode(data, path: path)
        guard manifest.formatVersion == StoreManifest.currentFormatVersion,
            let orientation = ImageOrientation(rawValue: manifest.orientation)
        else { throw TileError(.invalidStore, "\(path): store format \(manifest.formatVersion) is not supported") }
        let geometry = try TileGeometry(
            storedWidth: manifest.storedWidth, storedHeight: manifest.storedHeight, orientation: orientation,
            tileSize: manifest.tileSize, levels: .count(manifest.levels.count))
        guard geometry.levels.map({ StoreManifest.Level(storedWidth: $0.storedWidth, storedHeight: $0.storedHeight) })
            == manifest.levels
        else { throw TileError(.invalidStore, "\(path): the manifest's levels do not match its size") }
        var fds: [Int32] = []
        for index in geometry.levels.indices {
            let file = "\(path)/\(StoreManifest.levelFileName(index))"
            let fd = Glibc.open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
            var info = stat()
            guard fd >= 0, fstat(fd, &info) == 0 else {
                let error = SystemCall.error("cannot open", path: file)
                fds.forEach { close($0) }
                if fd >= 0 { close(fd) }
                throw error
            }
            fds.append(fd)
            guard Int(info.st_size) == geometry.fileByteCount(level: index) else {
                fds.forEach { close($0) }
                throw TileError(.invalidStore, "\(file) has \(info.st_size) bytes, not \(geometry.fileByteCount(level: index))")
            }
        }
        return TiledImage(geometry: geometry, files: LevelFiles(descriptors: fds), storePath: path, complete: true)
    }
}
