import Foundation
import TileCore
import TileNetwork

extension ServeCommand {
    /// The store shelf `url` names (`s3://BUCKET/PREFIX`), its bucket's endpoint and credentials from
    /// the environment (``TileNetwork/S3Configuration/fromEnvironment(_:)``); nil without a URL. The
    /// bucket is listed once at start: when that fails (no such bucket, refused credentials, the store
    /// down), a warning says so, naming the bucket and the answer, and the server starts all the same
    /// (building every image itself until the bucket answers).
    /// - Throws: what the environment lacks for a client (``TileCore/TileError/Code/invalidArgument``).
    static func shelf(_ url: String?) async throws -> S3StoreShelf? {
        guard let url, let location = S3Location(url) else { return nil }
        let client: S3Client
        do { client = S3Client(configuration: try S3Configuration.fromEnvironment()) } catch { throw fail(url, error) }
        let shelf = S3StoreShelf(client: client, prefix: location)
        do { try await shelf.check() } catch {
            FileHandle.standardError.write(
                Data("tiler: warning: the store shelf \(shelf) cannot be listed (\(error)): every image is built here until it can\n".utf8))
        }
        return shelf
    }

    /// The master shelf `url` names (`s3://BUCKET/PREFIX`), as ``shelf(_:)`` makes the store shelf; nil
    /// without a URL. A bucket that cannot be listed at start is said in a warning, and by `/ready`
    /// until it can.
    static func masters(_ url: String?) async throws -> S3MasterShelf? {
        guard let url, let location = S3Location(url) else { return nil }
        let client: S3Client
        do { client = S3Client(configuration: try S3Configuration.fromEnvironment()) } catch { throw fail(url, error) }
        let masters = S3MasterShelf(client: client, prefix: location)
        do { try await masters.check() } catch {
            FileHandle.standardError.write(
                Data("tiler: warning: the masters' bucket \(masters) cannot be listed (\(error)): its images cannot be built until it can\n".utf8))
        }
        return masters
    }
}
