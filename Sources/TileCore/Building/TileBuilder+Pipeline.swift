extension TileBuilder {
    /// Checks the header against the limits, then sizes the files: nothing touches the disk before.
    /// A TIFF store's pipeline is made by ``makeTIFFPipeline(_:info:orientation:)``.
    func makePipeline(_ header: SourceHeader) throws(TileError) -> (Pipeline, ImageInfo) {
        guard header.width > 0, header.height > 0 else {
            throw TileError(.corrupt, "the frame header declares an empty image (\(header.width)x\(header.height))")
        }
        guard header.width * header.height <= options.maximumPixelCount else {
            throw TileError(
                .tooLarge,
                "\(header.width)x\(header.height) is over the limit of \(options.maximumPixelCount) pixels")
        }
        let info: ImageInfo
        switch header {
        case .jpeg(let jpeg): info = ImageInfo(header: jpeg, segments: headerReader.segments)
        case .other(let other): info = other
        }
        let orientation = options.orientation.resolve(exif: info.exifOrientation)
        if case .tiff(let tiff) = options.format {
            var webp = tiff.usesWebP(hasAlpha: info.hasAlpha)
            let rows = Self.webpTileRowBytes(side: max(header.width, header.height), tileSize: options.tileSize)
            if webp && rows > Self.webpTileRowBudget {
                guard tiff.compression == .automatic else {
                    throw TileError(
                        .tooLarge,
                        "WebP tiles of an image \(max(header.width, header.height)) pixels wide hold \(rows) bytes of tile rows while they are encoded, over \(Self.webpTileRowBudget): build JPEG tiles or a raw store"
                    )
                }
                webp = false  // a master with alpha so wide goes into a raw store, as with JPEG tiles
            }
            if !info.hasAlpha || webp {
                return (try makeTIFFPipeline(header, info: info, orientation: orientation, tiff: tiff), info)
            }
            // JPEG tiles keep no alpha: a raw store keeps it, unless the caller would rather fail.
            guard tiff.mastersWithAlpha == .rawStore else {
                throw TileError(
                    .unsupported,
                    "a TIFF store's JPEG tiles keep no alpha: build a raw store, or WebP tiles, of this \(info.format.rawValue.uppercased())")
            }
        }
        return (try makeRawPipeline(header, info: info, orientation: orientation, storage: options.storage), info)
    }

    /// What a store of `geometry` takes: raw level files exactly (every tile, padding included); a
    /// TIFF pyramid of JPEG tiles about 2 bits a pixel over every level (photos at the default quality
    /// take about 1), of lossy WebP tiles 1 byte a pixel (0.53 for the benchmark's RGBA photo, whose
    /// alpha is noise kept losslessly), of lossless WebP tiles 4; and its directories.
    package static func storeByteEstimate(_ geometry: TileGeometry, tiff: Bool, webpLossless: Bool? = nil) -> Int {
        guard tiff else { return geometry.levels.indices.reduce(0) { $0 + geometry.byteCount(ofLevel: $1) } }
        let pixels = geometry.levels.reduce(0) { $0 + $1.width * $1.height }
        switch webpLossless {
        case nil: return pixels / 4 + 64 * 1024
        case false?: return pixels + 64 * 1024
        case true?: return pixels * 4 + 64 * 1024
        }
    }

    /// The most RGBA the writers of a TIFF of WebP tiles hold at once: libwebp encodes whole pictures,
    /// so each level holds one tile row (about twice level 0's row over the pyramid). 256 MiB: an image
    /// about 130,000 pixels wide in 256-pixel tiles.
    static let webpTileRowBudget = 256 << 20

    /// The tile rows of every level of an image `side` pixels wide, padded to whole tiles.
    static func webpTileRowBytes(side: Int, tileSize: Int) -> Int {
        var (total, width) = (0, side)
        while true {
            total += (width + tileSize - 1) / tileSize * tileSize * tileSize * 4
            if width <= tileSize { return total }
            width = (width + 1) / 2
        }
    }

    /// Refuses a store of `geometry` larger than ``storeByteLimit``, before any of its files is made.
    func checkStoreFits(_ geometry: TileGeometry, tiff: Bool, webpLossless: Bool? = nil) throws(TileError) {
        guard let limit = storeByteLimit else { return }
        let bytes = Self.storeByteEstimate(geometry, tiff: tiff, webpLossless: webpLossless)
        guard bytes <= limit else {
            throw TileError(
                .overBudget,
                "the store of \(geometry.width)x\(geometry.height) takes about \(bytes) bytes, over the \(limit) bytes the disk budget has room for")
        }
    }

    /// Raw level files in `storage`: the default format.
    func makeRawPipeline(_ header: SourceHeader, info: ImageInfo, orientation: ImageOrientation, storage: TileStorage)
        throws(TileError) -> Pipeline
    {
        // An export streams when the rows come out upright; else it reads the finished store.
        let streams = exportTarget != nil && orientation == .identity
        let geometry = try TileGeometry(
            storedWidth: header.width, storedHeight: header.height, orientation: orientation,
            tileSize: options.tileSize, levels: streams ? .count(64) : options.levels)
        try checkStoreFits(geometry, tiff: false)
        let store = try StagedStore.create(storage, levelCount: geometry.levels.count)
        do {
            let image = TiledImage(
                geometry: geometry, files: store.files, storePath: store.finalPath, complete: false,
                colorProfile: info.colorProfile)
            var export: ExportSession?
            if streams, let target = exportTarget {
                let plan = try ExportPlan(
                    name: target.name, width: geometry.width, height: geometry.height, options: target.options)
                export = try ExportSession(plan: plan, root: target.root, colorProfile: info.colorProfile)
            }
            let writer = try PyramidWriter(
                geometry: geometry, files: store.files, progress: image.progress,
                writer: export == nil || exportTarget?.writesStore == true ? options.writer : nil, export: export)
            try decoder.storeCoefficients(
                options.coefficientStorage, in: store.scratchDirectory, windowBytes: options.coefficientWindowBytes)
            return Pipeline(image: image, store: store, writer: writer, export: export)
        } catch {
            store.discard()
            throw error
        }
    }

    /// Waits for the writers, publishes a persistent store, and completes the build.
    func complete(_ p: Pipeline) throws(TileError) {
        try p.writer.finish()
        try p.export?.waitUntilWritten()
        if let tiff = p.tiff {
            let image = try completeTIFF(p, tiff)
            stopPreviews()
            state = .complete(image)
            return
        }
        if case .persistent = options.storage {
            var manifest = manifest(for: p.image.geometry)
            if p.image.colorProfile != nil { manifest.colorProfile = StoreManifest.colorProfileFileName }
            try p.store.publish(manifest, colorProfile: p.image.colorProfile)
        }
        stopPreviews()
        state = .complete(p.image)
    }

    /// The manifest of a store of this build's source.
    func manifest(for geometry: TileGeometry, tiff: StoreManifest.TIFFDetails? = nil) -> StoreManifest {
        StoreManifest(
            formatVersion: tiff == nil ? StoreManifest.currentFormatVersion : StoreManifest.tiffFormatVersion,
            storedWidth: geometry.storedWidth, storedHeight: geometry.storedHeight,
            orientation: geometry.orientation.rawValue, tileSize: geometry.tileSize,
            levels: geometry.levels.map { .init(storedWidth: $0.storedWidth, storedHeight: $0.storedHeight) },
            sourceByteCount: bytesReceived, sourceFingerprint: fingerprint.hex, warningCount: decoder.warningCount,
            wasTruncated: decoder.isTruncated, format: tiff == nil ? nil : "tiff", tiff: tiff)
    }
}
