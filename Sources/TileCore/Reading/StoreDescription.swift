import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What a store folder (or a bare TIFF) holds, for `tiler info`: its format, how its level 0 was
/// made, and its size on disk.
public struct StoreDescription: Sendable, Hashable {
    /// `"raw"` (RGBA level files) or `"tiff"`.
    public var format: String
    /// A TIFF store's level 0: `"copied"` (the source's DCT coefficients, lossless) or `"encoded"`;
    /// `nil` for raw stores and bare TIFFs.
    public var levelZero: String?
    /// Why level 0 was encoded rather than copied, when it was; how a turned image's was copied.
    public var levelZeroReason: String?
    /// JPEG quality of a TIFF store's encoded levels (`nil` for WebP tiles).
    public var quality: Int?
    /// A TIFF store's WebP tiles: their quality and whether they are lossless (`nil` for JPEG tiles).
    public var webp: (quality: Int, lossless: Bool)? {
        webpQuality.map { ($0, webpLossless ?? false) }
    }
    /// The quantisation tables `quality` scaled (stores written before there was a choice: Annex K's).
    public var tables: TIFFWriting.Tables?
    /// Bytes of the JPEG the store was built from (`nil` for a bare TIFF).
    public var sourceByteCount: Int?
    /// Bytes of the store's files on disk (their sizes; the TIFF's for a bare TIFF).
    public var byteCount: Int
    var webpQuality: Int?
    var webpLossless: Bool?

    /// Describes the store folder or TIFF file at `path` from its manifest and its files' sizes,
    /// without opening the pyramid.
    /// - Parameter path: a store folder (``TileStorage/persistent(path:)``) or a TIFF file.
    /// - Returns: the description; a file is taken for a TIFF (``TiledImage/open(tiff:)`` checks it).
    /// - Throws: ``TileError/Code/invalidStore`` when the folder holds no store,
    ///   ``TileError/Code/io`` when `path` cannot be read.
    public static func read(at path: String) throws(TileError) -> StoreDescription {
        var info = stat()
        guard stat(path, &info) == 0 else { throw SystemCall.error("cannot read", path: path) }
        if info.st_mode & S_IFMT != S_IFDIR {
            return StoreDescription(format: "tiff", byteCount: Int(info.st_size))
        }
        let manifest = try StoreManifest.read(store: path)
        var bytes = 0
        for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] {
            var file = stat()
            if stat("\(path)/\(name)", &file) == 0, file.st_mode & S_IFMT == S_IFREG { bytes += Int(file.st_size) }
        }
        return StoreDescription(
            format: manifest.format ?? "raw", levelZero: manifest.tiff?.levelZero,
            levelZeroReason: manifest.tiff?.levelZeroReason,
            quality: manifest.tiff?.compression == "webp" ? nil : manifest.tiff?.quality,
            tables: manifest.tiff.flatMap { $0.compression == "webp" ? nil : $0.tables ?? .annexK },
            sourceByteCount: manifest.sourceByteCount, byteCount: bytes, webpQuality: manifest.tiff?.webpQuality,
            webpLossless: manifest.tiff?.webpLossless)
    }
}
