extension TileBuilder {
    /// A turned image's TIFF store: its scratch raw pyramid (`raw`, complete, read upright) encoded
    /// level by level, row by row, into a new TIFF (level 0 encoded too: turning JPEG blocks losslessly
    /// is not done), then published. The scratch pyramid's files go when `raw` is released.
    /// - Returns: the TIFF's image, which replaces `raw` as the build's result.
    func completeTurnedTIFF(_ raw: TiledImage, _ tiff: TIFFBuild) throws(TileError) -> TiledImage {
        guard let info else { preconditionFailure("a build completes after its header") }
        let geometry = try TileGeometry(
            uprightLevels: raw.geometry.levels.map { ($0.width, $0.height) }, tileSize: raw.geometry.tileSize)
        let store = try StagedStore.createTIFF(options.storage)
        do throws(TileError) {
            let codings = try Self.codings(
                geometry, levelZero: nil, coding: tiff.options, info: info)
            let progress = TileRowCounters(count: geometry.levels.count)
            let writer = try TIFFPyramidWriter(
                files: store.files, levels: codings, tileSize: geometry.tileSize,
                bigTIFF: Self.needsBigTIFF(
                    tiff.options.bigTIFF, geometry, bytesPerPixel: Self.bytesPerPixelBound(codings[0], tiff.options)),
                info: info, progress: progress)
            for level in geometry.levels.indices {
                let encoder = try TIFFLevelEncoder(writer: writer, level: level, coding: tiff.options)
                do {
                    try raw.forEachRow(level: level) { _, row in try encoder.push(row) }
                } catch let error as TileError {
                    throw error
                } catch {
                    throw TileError(.io, "cannot turn the image into its TIFF: \(error)")
                }
            }
            try writer.finish()
            let image = TiledImage(
                geometry: geometry, files: store.files, storePath: store.finalPath, complete: true,
                tiff: TIFFSource(building: writer, isLevelZeroCopied: false), progress: progress)
            if case .persistent = options.storage {
                try store.publish(
                    manifest(
                        for: geometry,
                        tiff: details(tiff.levelZero, tiff.options, writer, orientation: raw.geometry.orientation)))
            }
            return image
        } catch {
            store.discard()
            throw error
        }
    }
}
