import NIOCore
public import NIOPosix
public import TileActors
public import TileCore

/// A pyramid published to a bucket (``S3Client/publishStore(at:to:masterVersion:threadPool:)``), read where it lies:
/// its manifest, then its TIFF's directories by ranged GETs, read once; then each stored tile by one
/// ranged GET, sent as its bytes made a whole JPEG without decoding anything. Every GET of the TIFF
/// names the entity tag the manifest gives it: a store replaced meanwhile fails (412 or 404), never
/// mixes two versions.
///
/// A tile's bytes equal what ``TiledImage/storedJPEGTile(level:column:row:)`` gives for the same TIFF
/// on a local disk.
public final class S3StoredPyramid: ShelvedPyramid {
    public let client: S3Client
    /// The store read: its manifest and TIFF object.
    public let store: S3Store
    /// The requests that opening took: the GETs of the ranges of the TIFF read for its directories, and
    /// when opened by its location, the manifest's GET and the TIFF's `HEAD` before them.
    public let openingRequests: Int
    let index: TIFFPyramidIndex

    /// The pyramid's levels and tiles.
    public var geometry: TileGeometry { index.geometry }
    /// Whether the TIFF carries a colour profile (its whole JPEG tiles carry it too).
    public var hasColorProfile: Bool { index.hasColorProfile }

    /// Whether `level`'s stored tiles are JPEG.
    public func isJPEG(level: Int) -> Bool { index.isJPEG(level: level) }

    /// The bytes of the TIFF read at a time while its directories are read (a directory, its tile
    /// tables and its JPEGTables usually lie within one).
    public static let openingBlock = 256 << 10
    /// The most bytes of directories read (a pyramid of 2^24 tiles keeps 256 MiB of tile tables; ours
    /// of a 324-megapixel photo about 80 KiB).
    public static let mostDirectoryBytes = 64 << 20
    /// The most ranges read for the directories (each read parses the directories held again): a TIFF
    /// whose directories lie in more places is refused.
    public static let mostOpeningRanges = 64

    private init(client: S3Client, store: S3Store, openingRequests: Int, index: TIFFPyramidIndex) {
        (self.client, self.store, self.openingRequests, self.index) = (client, store, openingRequests, index)
    }

    /// Opens the store published at `location` (`s3://BUCKET/PREFIX`); the directories are parsed on
    /// `threadPool`.
    /// - Returns: the pyramid, or nil when no store is published there.
    /// - Throws: ``TileError/Code/invalidStore`` when the manifest or the TIFF is not a store's,
    ///   ``TileError/Code/tooLarge`` for directories past ``mostDirectoryBytes`` or
    ///   ``mostOpeningRanges``, ``S3Error``.
    public static func open(client: S3Client, location: S3Location, threadPool: NIOThreadPool = .singleton) async throws -> S3StoredPyramid? {
        guard let store = try await client.store(at: location) else { return nil }
        return try await open(client: client, store: store, threadPool: threadPool, requestsBefore: 2)
    }

    /// Opens `store`, its manifest read already (``S3Client/store(at:)``): its TIFF's directories read
    /// by ranged GETs, each naming the TIFF's entity tag.
    /// - Throws: as ``open(client:location:threadPool:)``.
    public static func open(client: S3Client, store: S3Store, threadPool: NIOThreadPool = .singleton) async throws -> S3StoredPyramid {
        try await open(client: client, store: store, threadPool: threadPool, requestsBefore: 0)
    }

    /// - Parameter requestsBefore: the requests that found `store` (counted in ``openingRequests``).
    private static func open(client: S3Client, store: S3Store, threadPool: NIOThreadPool, requestsBefore: Int) async throws -> S3StoredPyramid {
        let location = store.location
        let size = store.tiffByteCount
        guard size >= 8 else { throw TileError(.invalidStore, "\(location): its TIFF holds \(size) bytes, less than a TIFF's header") }
        var parts: [(offset: Int, bytes: [UInt8])] = []
        var (requests, held) = (requestsBefore, 0)
        var wanted = 0..<min(size, openingBlock)
        while true {
            guard requests - requestsBefore < mostOpeningRanges else {
                throw TileError(.tooLarge, "\(location): its TIFF's directories lie in more than \(mostOpeningRanges) places")
            }
            guard !parts.contains(where: { $0.offset <= wanted.lowerBound && wanted.upperBound <= $0.offset + $0.bytes.count }) else {
                throw TileError(.invalidStore, "\(location): its TIFF's directories ask again for bytes \(wanted) already read")
            }
            // The block around what libtiff wants (at least `openingBlock` from its start), less what is held.
            let start = wanted.lowerBound - wanted.lowerBound % openingBlock
            var range = start..<min(size, max(wanted.upperBound, start + openingBlock))
            if let before = parts.last(where: { $0.offset <= wanted.lowerBound }) {
                range = max(range.lowerBound, before.offset + before.bytes.count)..<range.upperBound
            }
            if let after = parts.first(where: { $0.offset > wanted.lowerBound }) {
                range = range.lowerBound..<max(min(range.upperBound, after.offset), wanted.upperBound)
            }
            held += range.count
            guard held <= mostDirectoryBytes else {
                throw TileError(.tooLarge, "\(location): its TIFF's directories take more than \(mostDirectoryBytes) bytes")
            }
            let bytes = try await client.get(
                bucket: location.bucket, key: store.tiffKey, range: range.lowerBound...(range.upperBound - 1), ifMatch: store.ifMatch,
                limit: range.count)
            requests += 1
            guard bytes.readableBytes == range.count else {
                throw TileError(.invalidStore, "\(location): the TIFF gave \(bytes.readableBytes) bytes for the range \(range)")
            }
            parts = Self.merged(parts, (range.lowerBound, Array(bytes.readableBytesView)))
            let known = parts
            let opening = try await threadPool.blocking { () throws(TileError) in
                try TIFFPyramidIndex.open(parts: known, byteCount: size, name: "\(location)")
            }
            switch opening {
            case .index(let index):
                return S3StoredPyramid(client: client, store: store, openingRequests: requests, index: index)
            case .needs(let range):
                wanted = range
            }
        }
    }

    /// `parts` with `part` added, sorted by offset, parts that touch joined into one.
    static func merged(_ parts: [(offset: Int, bytes: [UInt8])], _ part: (offset: Int, bytes: [UInt8])) -> [(offset: Int, bytes: [UInt8])] {
        var out: [(offset: Int, bytes: [UInt8])] = []
        for next in (parts + [part]).sorted(by: { $0.offset < $1.offset }) {
            if let last = out.last, next.offset <= last.offset + last.bytes.count {
                let end = last.offset + last.bytes.count
                if next.offset + next.bytes.count > end { out[out.count - 1].bytes += next.bytes[(end - next.offset)...] }
            } else {
                out.append(next)
            }
        }
        return out
    }

    /// A stored tile as a whole JPEG, read with one ranged GET: the bytes
    /// ``TiledImage/storedJPEGTile(level:column:row:)`` gives for the TIFF on a disk.
    /// - Returns: nil when the level's tiles are not JPEG.
    /// - Throws: ``TileError/Code/invalidArgument`` outside the pyramid, ``TileError/Code/corrupt`` for
    ///   stored bytes that are not a JPEG stream, ``S3Error`` (412 or 404 once the store is replaced).
    public func storedJPEGTile(level: Int, column: Int, row: Int) async throws -> [UInt8]? {
        let range = try index.tileRange(level: level, column: column, row: row)
        guard index.isJPEG(level: level) else { return nil }
        let bytes = try await client.get(
            bucket: store.location.bucket, key: store.tiffKey, range: range.lowerBound...(range.upperBound - 1), ifMatch: store.ifMatch,
            limit: range.count)
        return try index.completeJPEG(level: level, column: column, row: row, stored: Array(bytes.readableBytesView))
    }
}

extension S3Store {
    /// The TIFF's entity tag for `If-Match`; nil when the store gave none (then nothing is checked).
    var ifMatch: String? { tiffEntityTag.isEmpty ? nil : tiffEntityTag }
}
