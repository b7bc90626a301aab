extension TileBuilder {
    /// A turned image's TIFF store: level 0 from the source's coefficients turned in the DCT domain when
    /// the build planned it (``TIFFBuild/LevelZero/turned(coding:reason:)``), else encoded from the
    /// scratch raw pyramid (`raw`, complete, read upright); the lower levels encoded from it level by
    /// level, row by row, into a new TIFF, then published. The scratch pyramid's files go when `raw`
    /// is released.
    /// - Returns: the TIFF's image, which replaces `raw` as the build's result.
    func completeTurnedTIFF(_ raw: TiledImage, _ tiff: TIFFBuild) throws(TileError) -> TiledImage {
        guard let info else { preconditionFailure("a build completes after its header") }
        let geometry = try TileGeometry(
            uprightLevels: raw.geometry.levels.map { ($0.width, $0.height) }, tileSize: raw.geometry.tileSize)
        let store = try StagedStore.createTIFF(options.storage)
        do throws(TileError) {
            var turned: TIFFLevelCoding?
            if case .turned(let coding, _) = tiff.levelZero { turned = coding }
            let codings = try Self.codings(geometry, levelZero: turned, coding: tiff.options, info: info)
            let progress = TileRowCounters(count: geometry.levels.count)
            let writer = try TIFFPyramidWriter(
                files: store.files, levels: codings, tileSize: geometry.tileSize,
                bigTIFF: Self.needsBigTIFF(
                    tiff.options.bigTIFF, geometry, bytesPerPixel: Self.bytesPerPixelBound(codings[0], tiff.options)),
                info: info, progress: progress)
            // The turned level 0 is coded on the decoder's thread while the lower levels are encoded
            // here; the writer stays until that thread is done with it, also when this fails.
            if turned != nil { try decoder.startTurnedLevelZero(into: writer) }
            do throws(TileError) {
                try encodeLevels(of: raw, into: writer, from: turned == nil ? 0 : 1, coding: tiff.options)
            } catch {
                if turned != nil { try? decoder.waitForTurnedLevelZero() }
                throw error
            }
            if turned != nil { try decoder.waitForTurnedLevelZero() }
            try writer.finish()
            let image = TiledImage(
                geometry: geometry, files: store.files, storePath: store.finalPath, complete: true,
                tiff: TIFFSource(building: writer, isLevelZeroCopied: turned != nil), progress: progress)
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

    /// Levels `first` on of `raw`, read upright row by row, encoded into `writer`.
    private func encodeLevels(of raw: TiledImage, into writer: TIFFPyramidWriter, from first: Int, coding: TIFFWriting)
        throws(TileError)
    {
        for level in first..<raw.geometry.levels.count {
            let encoder = try TIFFLevelEncoder(writer: writer, level: level, coding: coding)
            do {
                try raw.forEachRow(level: level) { _, row in try encoder.push(row) }
            } catch let error as TileError {
                throw error
            } catch {
                throw TileError(.io, "cannot turn the image into its TIFF: \(error)")
            }
        }
    }
}
