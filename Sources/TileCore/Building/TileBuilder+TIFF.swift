import Foundation

/// A TIFF store's build: its writer, how its level 0 is made, and the orientation its levels are
/// turned upright by.
struct TIFFBuild {
    enum LevelZero {
        /// From the source's DCT coefficients (lossless; turned in the DCT domain for a turned image).
        case copied
        /// Decoded and encoded, for `reason`.
        case encoded(reason: String)
    }

    var writer: TIFFPyramidWriter
    var levelZero: LevelZero
    var options: TIFFWriting
    var orientation: ImageOrientation
}

extension TileBuilder {
    /// A TIFF store's pipeline: the TIFF, its level 0 copied from the coefficients when the JPEG and the
    /// tile size allow it (else encoded from the rows), its lower levels encoded from the shrink. A
    /// turned image's TIFF is upright: each level holds a band of a tile's stored rows and encodes the
    /// upright tiles it holds once it is whole (level 0 turned in the DCT domain when it is copied).
    /// - Throws: ``TileError/Code/tooLarge`` for a turned image whose bands would pass
    ///   ``turnedBandBudget``.
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
        // The pyramid's levels as stored; the TIFF's upright (a turned image's levels are turned a band
        // of tile rows at a time as their rows come, level 0 in the DCT domain when it is copied).
        let stored = try TileGeometry(
            storedWidth: header.width, storedHeight: header.height, orientation: orientation, tileSize: options.tileSize,
            levels: options.levels)
        let geometry =
            orientation == .identity
            ? stored : try TileGeometry(uprightLevels: stored.levels.map { ($0.width, $0.height) }, tileSize: stored.tileSize)
        if orientation != .identity {
            // A band of every level's RGBA rows (about 8 bytes a pixel of a band's width in all), or level
            // 0's two bands of coefficients (6 bytes a pixel for 4:2:0, 12 for 4:4:4) and the lower
            // levels' (4): at most twice the RGBA bands.
            let bytes = Self.webpTileRowBytes(side: header.width, tileSize: options.tileSize) * 2
            guard bytes <= Self.turnedBandBudget else {
                throw TileError(
                    .tooLarge,
                    "turning an image \(header.width) pixels wide holds about \(bytes) bytes of its rows in \(options.tileSize)-pixel bands, over \(Self.turnedBandBudget): build a raw store (its tiles are turned when read) or use smaller tiles"
                )
            }
        }
        let webp = tiff.usesWebP(hasAlpha: info.hasAlpha)
        try checkStoreFits(geometry, tiff: true, webpLossless: webp ? tiff.webpLossless : nil)
        let store = try StagedStore.createTIFF(options.storage)
        do {
            try decoder.storeCoefficients(
                options.coefficientStorage, in: store.scratchDirectory, windowBytes: options.coefficientWindowBytes)
            let (copied, reason) =
                webp ? (nil, "WebP tiles") : try decoder.transcodePlan(tileSize: geometry.tileSize, orientation: orientation)
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
                geometry: stored, files: store.files, progress: progress, writer: nil,
                tiff: (writer, copied == nil ? 0 : 1, tiff), orientation: orientation)
            if copied != nil { try decoder.transcode(into: writer) }
            let levelZero: TIFFBuild.LevelZero = copied == nil ? .encoded(reason: reason ?? "") : .copied
            return Pipeline(
                image: image, store: store, writer: pyramid, export: nil,
                tiff: TIFFBuild(writer: writer, levelZero: levelZero, options: tiff, orientation: orientation))
        } catch {
            store.discard()
            throw error
        }
    }

    /// The most a turned image's bands may hold (``makeTIFFPipeline(_:info:orientation:tiff:)``).
    static let turnedBandBudget = 320 << 20

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

    /// Completes a TIFF store: level 0's last tiles, the directories, the manifest.
    func completeTIFF(_ p: Pipeline, _ tiff: TIFFBuild) throws(TileError) -> TiledImage {
        if case .copied = tiff.levelZero { try decoder.waitForTranscode() }
        try tiff.writer.finish()
        if case .persistent = options.storage {
            try p.store.publish(manifest(for: p.image.geometry, tiff: details(tiff)))
        }
        return p.image
    }

    /// The manifest's account of a TIFF store: how level 0 was made (and why, or how it was turned),
    /// the coding, and the orientation the levels were turned upright by.
    func details(_ tiff: TIFFBuild) -> StoreManifest.TIFFDetails {
        let (options, writer, orientation) = (tiff.options, tiff.writer, tiff.orientation)
        var reason: String?
        var copied = false
        switch tiff.levelZero {
        case .copied:
            copied = true
            if orientation != .identity {
                reason = "every tile turned upright in the DCT domain (orientation \(orientation.rawValue))"
            }
        case .encoded(let why): reason = why
        }
        if writer.levels.first?.isWebP == true { reason = "WebP tiles" }
        let webp = writer.levels.first?.isWebP == true
        return StoreManifest.TIFFDetails(
            file: StoreManifest.tiffFileName, levelZero: copied ? "copied" : "encoded", levelZeroReason: reason,
            quality: options.quality, tables: options.tables, bigTIFF: writer.isBigTIFF, sourceOrientation: orientation.rawValue,
            compression: webp ? "webp" : nil, webpQuality: webp ? options.webpQuality : nil, webpLossless: webp ? options.webpLossless : nil)
    }
}
