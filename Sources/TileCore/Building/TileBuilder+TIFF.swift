import Foundation

/// A TIFF store's build: its writer, and how its level 0 is made.
struct TIFFBuild {
    enum LevelZero {
        /// From the source's DCT coefficients (lossless).
        case copied
        /// Decoded and encoded, for `reason`.
        case encoded(reason: String)
        /// The image is turned: its lower levels are built into a scratch raw pyramid first and encoded
        /// upright when it is complete; level 0 is coded into `tiff` (made at the start) from the
        /// source's coefficients turned in the DCT domain as they are decoded (lossless), or, without
        /// `tiff`, encoded from the scratch pyramid too, for `reason`.
        case turned(TurnedTIFF?, reason: String?)
    }

    /// `nil` while a turned image is built into its scratch pyramid (its TIFF, if made yet, is in
    /// ``LevelZero/turned(_:reason:)``).
    var writer: TIFFPyramidWriter?
    var levelZero: LevelZero
    var options: TIFFWriting
}

extension TileBuilder {
    /// A TIFF store's pipeline: the TIFF, its level 0 copied from the coefficients when the JPEG and the
    /// tile size allow it (else encoded from the rows), its lower levels encoded from the shrink. A
    /// turned image is built into a scratch raw pyramid first and encoded upright when complete.
    func makeTIFFPipeline(_ header: SourceHeader, info: ImageInfo, orientation: ImageOrientation, tiff: TIFFWriting)
        throws(TileError) -> Pipeline
    {
        guard options.tileSize % 16 == 0 else {
            throw TileError(.invalidArgument, "a TIFF's tiles are a multiple of 16 pixels, not \(options.tileSize)")
        }
        guard (1...100).contains(tiff.quality) else {
            throw TileError(.invalidArgument, "JPEG quality \(tiff.quality) is not within 1...100")
        }
        guard (1...100).contains(tiff.webpQuality) else {
            throw TileError(.invalidArgument, "WebP quality \(tiff.webpQuality) is not within 1...100")
        }
        if orientation != .identity {
            var (coding, reason) = (TIFFLevelCoding?.none, Optional("WebP tiles"))
            if !tiff.usesWebP(hasAlpha: info.hasAlpha) {
                (coding, reason) = try decoder.transcodePlan(tileSize: options.tileSize, orientation: orientation)
            }
            var p = try makeRawPipeline(
                header, info: info, orientation: orientation, storage: .ephemeral(directory: scratchFolder),
                skipsLevelZero: coding != nil)
            var turned: TurnedTIFF?
            if let coding {
                do throws(TileError) {
                    turned = try makeTurnedTIFF(p.image.geometry, levelZero: coding, tiff: tiff, info: info)
                } catch {
                    p.store.discard()
                    throw error
                }
            }
            p.tiff = TIFFBuild(writer: nil, levelZero: .turned(turned, reason: reason), options: tiff)
            return p
        }
        let geometry = try TileGeometry(
            storedWidth: header.width, storedHeight: header.height, tileSize: options.tileSize, levels: options.levels)
        let webp = tiff.usesWebP(hasAlpha: info.hasAlpha)
        try checkStoreFits(geometry, tiff: true, webpLossless: webp ? tiff.webpLossless : nil)
        let store = try StagedStore.createTIFF(options.storage)
        do {
            try decoder.storeCoefficients(
                options.coefficientStorage, in: store.scratchDirectory, windowBytes: options.coefficientWindowBytes)
            let (copied, reason) =
                webp ? (nil, "WebP tiles") : try decoder.transcodePlan(tileSize: geometry.tileSize, orientation: .identity)
            let codings = try Self.codings(geometry, levelZero: copied, coding: tiff, info: info)
            let progress = TileRowCounters(count: geometry.levels.count)
            let writer = try TIFFPyramidWriter(
                files: store.files, levels: codings, tileSize: geometry.tileSize,
                bigTIFF: Self.needsBigTIFF(tiff.bigTIFF, geometry, bytesPerPixel: Self.bytesPerPixelBound(codings[0], tiff)),
                info: info, progress: progress)
            let image = TiledImage(
                geometry: geometry, files: store.files, storePath: store.finalPath, complete: false,
                tiff: TIFFSource(building: writer, isLevelZeroCopied: copied != nil), progress: progress)
            let pyramid = try PyramidWriter(
                geometry: geometry, files: store.files, progress: progress, writer: nil,
                tiff: (writer, copied == nil ? 0 : 1, tiff))
            if copied != nil { try decoder.transcode(into: writer) }
            let levelZero: TIFFBuild.LevelZero = copied == nil ? .encoded(reason: reason ?? "") : .copied
            return Pipeline(
                image: image, store: store, writer: pyramid, export: nil,
                tiff: TIFFBuild(writer: writer, levelZero: levelZero, options: tiff))
        } catch {
            store.discard()
            throw error
        }
    }

    /// Where a turned image's scratch pyramid goes: beside the store (the same file system).
    private var scratchFolder: String? {
        switch options.storage {
        case .ephemeral(let directory): return directory
        case .persistent(let path):
            let parent = (path as NSString).deletingLastPathComponent
            return parent.isEmpty ? "." : parent
        }
    }

    /// Every level's coding: level 0 `copied`'s, or encoded; the lower levels encoded as `coding` says,
    /// in level 0's colour and sampling.
    static func codings(_ geometry: TileGeometry, levelZero copied: TIFFLevelCoding?, coding: TIFFWriting, info: ImageInfo)
        throws(TileError) -> [TIFFLevelCoding]
    {
        if coding.usesWebP(hasAlpha: info.hasAlpha) {
            return geometry.levels.map { TIFFLevelCoding(webp: coding, width: $0.width, height: $0.height, alpha: info.hasAlpha) }
        }
        let full = geometry.levels[0]
        var first: TIFFLevelCoding
        if let copied {
            first = copied
        } else {
            first = try TIFFLevelCoding(encodedAs: coding, width: full.width, height: full.height, like: template(info))
        }
        var codings = [first]
        for level in geometry.levels.dropFirst() {
            codings.append(try TIFFLevelCoding(encodedAs: coding, width: level.width, height: level.height, like: first))
        }
        return codings
    }

    /// The colour and sampling of an encoded level 0: gray for a grayscale source, else YCbCr with the
    /// source's subsampling where TIFF can state it (4:2:0 otherwise).
    static func template(_ info: ImageInfo) -> TIFFLevelCoding {
        let gray = info.components == 1
        let sampling: [String: (Int, Int)] = ["4:4:4": (1, 1), "4:2:2": (2, 1), "4:2:0": (2, 2), "4:1:1": (4, 1)]
        let (h, v) = gray ? (1, 1) : sampling[info.subsampling] ?? (2, 2)
        return TIFFLevelCoding(photometric: gray ? 1 : 6, horizontalSubsampling: h, verticalSubsampling: v)
    }

    /// The most bytes a pixel of a level coded as `coding` takes: JPEG and lossy WebP of RGB 3 (no
    /// photograph approaches it), one more for alpha, one more for lossless WebP (noise).
    static func bytesPerPixelBound(_ coding: TIFFLevelCoding, _ options: TIFFWriting) -> Int {
        guard coding.isWebP else { return 3 }
        return coding.samples + (options.webpLossless ? 1 : 0)
    }

    /// Whether the file needs BigTIFF: asked for, or a file that could pass 4 GiB at `bytesPerPixel`
    /// over the whole pyramid (``bytesPerPixelBound(_:_:)``).
    static func needsBigTIFF(_ choice: TIFFWriting.BigTIFF, _ geometry: TileGeometry, bytesPerPixel: Int = 3) -> Bool {
        switch choice {
        case .always: return true
        case .never: return false
        case .automatic:
            let pixels = geometry.levels.reduce(0) { $0 + $1.columns * $1.rows * geometry.tileSize * geometry.tileSize }
            return pixels * bytesPerPixel >= 1 << 32
        }
    }

    /// Completes a TIFF store: level 0's last tiles, the directories, the manifest. A turned image's
    /// scratch pyramid is encoded upright into the TIFF first.
    func completeTIFF(_ p: Pipeline, _ tiff: TIFFBuild) throws(TileError) -> TiledImage {
        guard let writer = tiff.writer else { return try completeTurnedTIFF(p.image, tiff) }
        if case .copied = tiff.levelZero { try decoder.waitForTranscode() }
        try writer.finish()
        if case .persistent = options.storage {
            try p.store.publish(
                manifest(for: p.image.geometry, tiff: details(tiff.levelZero, tiff.options, writer, orientation: .identity)))
        }
        return p.image
    }

    func details(
        _ levelZero: TIFFBuild.LevelZero, _ options: TIFFWriting, _ writer: TIFFPyramidWriter, orientation: ImageOrientation
    ) -> StoreManifest.TIFFDetails {
        var reason: String?
        var copied = false
        switch levelZero {
        case .copied: copied = true
        case .encoded(let why): reason = why
        case .turned(let turned, let why):
            copied = turned != nil
            reason =
                copied
                ? "turned upright in the DCT domain (orientation \(orientation.rawValue)): every tile lossless"
                : why ?? "the image is turned upright (orientation \(orientation.rawValue))"
        }
        if writer.levels.first?.isWebP == true { reason = "WebP tiles" }
        let webp = writer.levels.first?.isWebP == true
        return StoreManifest.TIFFDetails(
            file: StoreManifest.tiffFileName, levelZero: copied ? "copied" : "encoded", levelZeroReason: reason,
            quality: options.quality, tables: options.tables, bigTIFF: writer.isBigTIFF, sourceOrientation: orientation.rawValue,
            compression: webp ? "webp" : nil, webpQuality: webp ? options.webpQuality : nil, webpLossless: webp ? options.webpLossless : nil)
    }
}
