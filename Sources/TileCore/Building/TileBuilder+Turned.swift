/// A turned image's TIFF: its store, writer, upright geometry and tile-row counters.
struct TurnedTIFF {
    var store: StagedStore
    var writer: TIFFPyramidWriter
    var geometry: TileGeometry
    var progress: TileRowCounters
}

extension TileBuilder {
    /// A turned image's TIFF store and writer, upright, for the scratch pyramid of `scratch`'s
    /// geometry. With `levelZero` (a turned plan's coding), made before the decode starts: the
    /// decoder codes level 0 into it from the coefficients, turned, a tile's rows at a time.
    func makeTurnedTIFF(_ scratch: TileGeometry, levelZero coding: TIFFLevelCoding?, tiff: TIFFWriting, info: ImageInfo)
        throws(TileError) -> TurnedTIFF
    {
        let geometry = try TileGeometry(
            uprightLevels: scratch.levels.map { ($0.width, $0.height) }, tileSize: scratch.tileSize)
        let store = try StagedStore.createTIFF(options.storage)
        do throws(TileError) {
            let codings = try Self.codings(geometry, levelZero: coding, coding: tiff, info: info)
            let progress = TileRowCounters(count: geometry.levels.count)
            let writer = try TIFFPyramidWriter(
                files: store.files, levels: codings, tileSize: geometry.tileSize,
                bigTIFF: Self.needsBigTIFF(tiff.bigTIFF, geometry, bytesPerPixel: Self.bytesPerPixelBound(codings[0], tiff)),
                info: info, progress: progress)
            if coding != nil { try decoder.transcode(into: writer) }
            return TurnedTIFF(store: store, writer: writer, geometry: geometry, progress: progress)
        } catch {
            store.discard()
            throw error
        }
    }

    /// A turned image's TIFF store completed: level 0's last tiles when they were coded from the
    /// coefficients (``TIFFBuild/LevelZero/turned(_:reason:)``), else level 0 encoded from the scratch
    /// raw pyramid (`raw`, complete, read upright); the lower levels encoded from it level by level,
    /// row by row; then published. The scratch pyramid's files go when `raw` is released.
    /// - Returns: the TIFF's image, which replaces `raw` as the build's result.
    func completeTurnedTIFF(_ raw: TiledImage, _ tiff: TIFFBuild) throws(TileError) -> TiledImage {
        guard let info else { preconditionFailure("a build completes after its header") }
        guard case .turned(let made, _) = tiff.levelZero else { preconditionFailure("a turned image's TIFF") }
        let t: TurnedTIFF
        if let made { t = made } else { t = try makeTurnedTIFF(raw.geometry, levelZero: nil, tiff: tiff.options, info: info) }
        do throws(TileError) {
            if made != nil { try decoder.waitForTranscode() }
            try encodeLevels(of: raw, into: t.writer, from: made == nil ? 0 : 1, coding: tiff.options)
            try t.writer.finish()
            let image = TiledImage(
                geometry: t.geometry, files: t.store.files, storePath: t.store.finalPath, complete: true,
                tiff: TIFFSource(building: t.writer, isLevelZeroCopied: made != nil), progress: t.progress)
            if case .persistent = options.storage {
                try t.store.publish(
                    manifest(
                        for: t.geometry,
                        tiff: details(tiff.levelZero, tiff.options, t.writer, orientation: raw.geometry.orientation)))
            }
            return image
        } catch {
            t.store.discard()
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
