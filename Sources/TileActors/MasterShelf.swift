import Foundation

/// A place beyond the served folder where masters are kept (a bucket: `TileNetwork`'s
/// `S3MasterShelf`): a server looks there for an image its folder does not hold, builds it from the
/// master's bytes as they download, and builds it again when the master is replaced (another
/// ``ShelvedMaster/version``).
public protocol MasterShelf: Sendable, CustomStringConvertible {
    /// Checks that the shelf can be read (a listing of its first entry).
    /// - Throws: why not (no such bucket, credentials refused, the store down), naming where.
    func check() async throws

    /// The master of the image `id` (`maps/rome`): the first of `suffixes`' names (`maps/rome.jpg`)
    /// the shelf holds, or nil when it holds none.
    /// - Throws: why the shelf could not be asked.
    func find(_ id: String, suffixes: [String]) async throws -> ShelvedMaster?

    /// What a folder of the shelf holds (`""` its top, else `maps/old`): the identifiers of its
    /// entries named with one of `suffixes` (`maps/old/rome`), and its sub-folders' paths, each sorted.
    func contents(ofFolder folder: String, suffixes: [String]) async throws -> (images: [String], folders: [String])

    /// A source of `master`'s bytes for a build, streamed as they download, every byte of the version
    /// ``find(_:suffixes:)`` saw (one replaced since fails the build, never mixes two).
    func source(of master: ShelvedMaster) -> any ImageSource

    /// Whether `error`, thrown by one of these calls, says the shelf cannot be used now (unreachable,
    /// refusing this server, failing) rather than something of one master.
    func isUnavailable(_ error: any Error) -> Bool
}

/// A master on a ``MasterShelf``: where it is, its size, and which version of it.
public struct ShelvedMaster: Sendable, Hashable {
    /// The image's identifier.
    public var id: String
    /// Where the shelf keeps it (a key), whose suffix (`jpg`, `tif`) is its name's.
    public var location: String
    public var byteCount: Int
    /// Its version there (an entity tag): another when it is replaced.
    public var version: String
    /// When it was last written, nanoseconds since the epoch (0 when unknown).
    public var lastModified: Int64

    public init(id: String, location: String, byteCount: Int, version: String, lastModified: Int64) {
        (self.id, self.location, self.byteCount, self.version, self.lastModified) = (id, location, byteCount, version, lastModified)
    }

    /// The suffix of its name (`jpg`, `tif`).
    public var suffix: String { (location as NSString).pathExtension }
}
