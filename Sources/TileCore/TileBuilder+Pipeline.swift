extension TileBuilder {
    /// Checks the header against the limits, then sizes the files: nothing touches the disk before.
    func makePipelineParts(_ header: JPEGHeader) throws(TileError)
        -> (image: TiledImage, store: StagedStore, writer: PyramidWriter, info: ImageInfo)
    {
        guard header.width > 0, header.height > 0 else {
            throw TileError(.corrupt, "the frame header declares an empty image (\(header.width)x\(header.height))")
        }
        guard header.width * header.height <= options.maximumPixelCount else {
            throw TileError(
                .tooLarge,
                "\(header.width)x\(header.height) is over the limit of \(options.maximumPixelCount) pixels")
        }
        let info = ImageInfo(header: header, segments: headerReader.segments)
        let orientation = options.orientation.resolve(exif: info.exifOrientation)
        let geometry = try TileGeometry(
            storedWidth: header.width, storedHeight: header.height, orientation: orientation,
            tileSize: options.tileSize, levels: options.levels)
        let store = try StagedStore.create(options.storage, levelCount: geometry.levels.count)
        do {
            let image = TiledImage(
                geometry: geometry, files: store.files, storePath: store.finalPath, complete: false)
            let writer = try PyramidWriter(
                geometry: geometry, files: store.files, progress: image.progress, writer: options.writer)
            return (image, store, writer, info)
        } catch {
            store.discard()
            throw error
        }
    }
}
