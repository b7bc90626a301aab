import Foundation

extension TiledImage {
    /// Reopens a complete persistent store without decoding anything: raw level files, or a TIFF store
    /// (``StoreFormat/tiff(_:)``), whose tiles are then decoded one at a time.
    /// - Parameters:
    ///   - path: the store folder a build with ``TileStorage/persistent(path:)`` published.
    ///   - option: the display orientation, applied at read time as for a build: ``OrientationOption/fromExif``
    ///     (the default) keeps the orientation the store was built with (its EXIF tag's, or the
    ///     build's override); ``OrientationOption/none`` shows the pixels as stored;
    ///     ``OrientationOption/fixed(_:)`` applies that one. The files are the same either way:
    ///     a store keeps source order. Where the new orientation puts the padding elsewhere than the
    ///     build's did (a flip along another axis), each tile is assembled from the up to four stored
    ///     tiles it straddles: up to four reads instead of one. A TIFF store is written upright, in the
    ///     orientation it was built with: it is read only so (an option that resolves to another
    ///     orientation is refused, never ignored).
    /// - Throws: ``TileError/Code/invalidStore`` when the folder is not a complete store of this format
    ///   (a half-written store never has a manifest at its final path), ``TileError/Code/io``;
    ///   ``TileError/Code/unsupported`` for an orientation a TIFF store was not built with.
    ///   Opening changes nothing on disk (leftovers of builds that died are the next build's to remove).
    public static func open(store path: String, orientation option: OrientationOption = .fromExif) throws(TileError)
        -> TiledImage
    {
        let manifest = try StoreManifest.read(store: path)
        if manifest.format == "tiff" {
            let built = manifest.tiff.flatMap { ImageOrientation(rawValue: $0.sourceOrientation) } ?? .identity
            let asked = option.resolve(exif: built.rawValue)
            guard asked == built else {
                throw TileError(
                    .unsupported,
                    "\(path) is a TIFF store, written upright in orientation \(built.rawValue) when it was built: it cannot be read in orientation \(asked.rawValue); build the master again with that orientation, or into a raw store (which turns its tiles when read)"
                )
            }
            return try openTIFFStore(path, manifest)
        }
        guard manifest.formatVersion == StoreManifest.currentFormatVersion else {
            throw TileError(.invalidStore, "\(path): store format \(manifest.formatVersion) is not supported")
        }
        guard let orientation = ImageOrientation(rawValue: manifest.orientation) else {
            throw TileError(.invalidStore, "\(path): the manifest's orientation \(manifest.orientation) is not within 1...8")
        }
        let geometry: TileGeometry
        do {
            geometry = try TileGeometry(
                storedWidth: manifest.storedWidth, storedHeight: manifest.storedHeight,
                orientation: option.resolve(exif: orientation.rawValue), placement: orientation,
                tileSize: manifest.tileSize, levels: .count(manifest.levels.count))
        } catch { throw TileError(.invalidStore, "\(path): the manifest's \(error.message)") }
        guard
            geometry.levels.map({ StoreManifest.Level(storedWidth: $0.storedWidth, storedHeight: $0.storedHeight) })
                == manifest.levels
        else { throw TileError(.invalidStore, "\(path): the manifest's levels do not match its size") }
        let files = try LevelFiles.opening(geometry.levels.count) { index throws(TileError) in
            let file = "\(path)/\(StoreManifest.levelFileName(index))"
            var info = stat()
            let fd = try SystemCall.openRegularFile(file, info: &info)
            guard Int(info.st_size) == geometry.byteCount(ofLevel: index) else {
                throw TileError(.invalidStore, "\(file) has \(info.st_size) bytes, not \(geometry.byteCount(ofLevel: index))")
            }
            return fd
        }
        let colorProfile = try manifest.colorProfile.map { name throws(TileError) in try readColorProfile(store: path, name: name) }
        return TiledImage(
            geometry: geometry, files: files, storePath: path, complete: true,
            colorProfile: colorProfile, storeHold: FolderLock(sharing: path))
    }

    /// A raw store's ICC profile, the file its manifest names (in the store folder, a regular file).
    private static func readColorProfile(store path: String, name: String) throws(TileError) -> ColorProfile {
        guard name == StoreManifest.colorProfileFileName else {
            throw TileError(.invalidStore, "\(path): the manifest's colour profile `\(name)` is not \(StoreManifest.colorProfileFileName)")
        }
        let bytes = try InputFile(regularFile: "\(path)/\(name)").readAll(limit: ColorProfile.maximumByteCount)
        guard let profile = ColorProfile(bytes) else { throw TileError(.invalidStore, "\(path)/\(name) is not an ICC profile") }
        return profile
    }
}

extension TiledImage {
    /// The byte count of the JPEG a persistent store was built from (its manifest's), or nil when
    /// `path` holds no readable store: for callers that reuse a store while its source is unchanged.
    public static func sourceByteCount(ofStore path: String) -> Int? {
        (try? StoreManifest.read(store: path))?.sourceByteCount
    }

    /// The file in a store folder whose modification time says when the store was published.
    public static let storeManifestName = StoreManifest.fileName
}

extension TiledImage {
    /// Whether the persistent store at `store` was built from the bytes of the file at `source`: the
    /// same byte count and the same fingerprint (FNV-1a over the bytes, as the store's manifest keeps
    /// it). Reads the whole source, a megabyte at a time: blocking; call it off the cooperative pool.
    /// - Returns: false when `store` holds no readable store, or the two differ.
    /// - Throws: ``TileError/Code/io`` when `source` cannot be read.
    public static func isStore(_ store: String, builtFrom source: String) throws(TileError) -> Bool {
        guard let manifest = try? StoreManifest.read(store: store) else { return false }
        let file = try InputFile(regularFile: source)
        guard file.byteCount == manifest.sourceByteCount else { return false }
        var byteCount = 0
        return try sourceFingerprint(of: file, counting: &byteCount) == manifest.sourceFingerprint
    }

    /// The byte count and fingerprint (FNV-1a 64 over the bytes, in hex) of the file at `source`, as
    /// the manifest of a store built from it keeps them: to tell whether a store found elsewhere (a
    /// bucket's) was built from this file. Reads the whole file, a megabyte at a time: blocking.
    /// - Throws: ``TileError/Code/io`` when `source` cannot be read.
    public static func sourceFingerprint(ofFile source: String) throws(TileError) -> (byteCount: Int, fingerprint: String) {
        var byteCount = 0
        let fingerprint = try sourceFingerprint(of: try InputFile(regularFile: source), counting: &byteCount)
        return (byteCount, fingerprint)
    }

    private static func sourceFingerprint(of file: InputFile, counting byteCount: inout Int) throws(TileError) -> String {
        var fingerprint = Fingerprint()
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { chunk.deallocate() }
        while true {
            let n = try file.read(into: chunk)
            if n == 0 { break }
            byteCount += n
            fingerprint.add(UnsafeRawBufferPointer(rebasing: chunk[..<n]))
        }
        return fingerprint.hex
    }
}
