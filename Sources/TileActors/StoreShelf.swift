public import Foundation
public import TileCore

/// A place beyond a cache folder where TIFF stores are kept for every server to find (a bucket:
/// `TileNetwork`'s `S3StoreShelf`): a server publishes there each store it builds, and before it
/// builds an image, copies the image's store from there when one was built from the same master
/// (whatever settings it was built with: servers sharing a shelf are given the same). Servers that
/// share a shelf, each image's requests going to one of them at a time (a shard director), build each
/// image once between them; two that build one image at the same moment both publish it, the later
/// replacing the earlier.
public protocol StoreShelf: Sendable, CustomStringConvertible {
    /// Checks that the shelf can be read (a listing of its first entry).
    /// - Throws: why not (no such bucket, credentials refused, the store down), naming where.
    func check() async throws

    /// The store shelved for the image `id`, or nil when the shelf holds none.
    /// - Throws: why the shelf could not be asked (the store down, refused): the server then builds.
    func find(_ id: String) async throws -> ShelvedStore?

    /// Copies `store` into a new store folder at `path` (``TileCore/IncomingStore``: nothing appears
    /// there until the whole TIFF is written; a store there before is replaced).
    /// - Throws: when the copy fails or its source changed since ``find(_:)`` (nothing is left at `path`).
    func copy(_ store: ShelvedStore, to path: String) async throws

    /// Opens `store` where it lies, to answer its stored tiles one at a time (each a ranged read)
    /// while a copy of it is made: nil when the shelf cannot (then requests wait for the copy).
    /// - Throws: why the store could not be opened (the copy is tried all the same).
    func open(_ store: ShelvedStore) async throws -> (any ShelvedPyramid)?

    /// Publishes the TIFF store folder at `path` as `id`'s, replacing the one shelved before.
    /// - Parameter masterVersion: the version of the master it was built from (a
    ///   `SourceFingerprint`'s text), kept with it: a master in a bucket is known by its version, not
    ///   by a hash of bytes a server has not read (``ShelvedStore/masterVersion``).
    func publish(_ id: String, store path: String, masterVersion: String?) async throws

    /// Whether `error`, thrown by one of these calls, says the shelf cannot be used now (unreachable,
    /// refusing this server, failing) rather than something of one store (a store replaced meanwhile):
    /// the server then rests it, says so on `/ready`, and publishes what it missed once it answers.
    func isUnavailable(_ error: any Error) -> Bool
}

/// A store on a ``StoreShelf``: what its manifest says of the master it was built from, and which
/// version of its TIFF it is.
public struct ShelvedStore: Sendable, Hashable {
    /// The image's identifier.
    public var id: String
    /// Its manifest's bytes: a TIFF store's, as a build writes it (with what the shelf adds).
    public var manifest: Data
    /// The TIFF's size and where the shelf keeps it (a key), and its version there (an entity tag).
    public var tiffByteCount: Int
    public var tiffLocation: String
    public var tiffVersion: String
    /// The master's size and FNV-1a 64 fingerprint (hex), as the manifest gives them (nil when absent).
    public var sourceByteCount: Int?
    public var sourceFingerprint: String
    /// The master's version its publisher named (``StoreShelf/publish(_:store:masterVersion:)``), if any.
    public var masterVersion: String?

    public init(
        id: String, manifest: Data, tiffByteCount: Int, tiffLocation: String, tiffVersion: String, sourceByteCount: Int?,
        sourceFingerprint: String, masterVersion: String? = nil
    ) {
        (self.id, self.manifest, self.tiffByteCount, self.tiffLocation, self.tiffVersion) = (id, manifest, tiffByteCount, tiffLocation, tiffVersion)
        (self.sourceByteCount, self.sourceFingerprint, self.masterVersion) = (sourceByteCount, sourceFingerprint, masterVersion)
    }
}

extension StoreShelf {
    /// None: requests wait for the copy.
    public func open(_ store: ShelvedStore) async throws -> (any ShelvedPyramid)? { nil }
}

/// A store of a ``StoreShelf`` read where it lies (``StoreShelf/open(_:)``): its geometry, read once,
/// then each stored tile by itself, as the bytes a local server sends for it.
public protocol ShelvedPyramid: Sendable {
    /// The pyramid's levels and tiles, as ``TileCore/TiledImage/geometry`` gives them for the same store.
    var geometry: TileGeometry { get }
    /// Whether the store carries a colour profile (as ``TileCore/TiledImage/colorProfile`` says).
    var hasColorProfile: Bool { get }
    /// Whether `level`'s stored tiles are JPEG.
    func isJPEG(level: Int) -> Bool
    /// A stored tile as a whole JPEG: the bytes ``TileCore/TiledImage/storedJPEGTile(level:column:row:)``
    /// gives for the same store on a disk; nil when the level's tiles are not JPEG.
    /// - Throws: ``TileCore/TileError/Code/invalidArgument`` outside the pyramid; why the read failed.
    func storedJPEGTile(level: Int, column: Int, row: Int) async throws -> [UInt8]?
}
