import Foundation
import TileCore
import TileNetwork
import TileServer

extension ServeCommand {
    /// The store shelf `url` names (`s3://BUCKET/PREFIX`), its bucket's endpoint and credentials from
    /// the environment (``TileNetwork/S3Configuration/fromEnvironment(_:)``); nil without a URL. The
    /// bucket is listed once at start, waited for at most `timeout`: when that fails (no such bucket,
    /// refused credentials, the store down or silent), a warning says so, naming the bucket and the
    /// answer, and the server starts all the same (building every image itself until the bucket answers).
    /// - Throws: what the environment lacks for a client (``TileCore/TileError/Code/invalidArgument``).
    static func shelf(_ url: String?, timeout: Duration) async throws -> S3StoreShelf? {
        guard let (client, location) = try bucket(url, timeout: timeout) else { return nil }
        let shelf = S3StoreShelf(client: client, prefix: location)
        await warnUnlisted("the store shelf \(shelf)", "every image is built here until it can", timeout) { try await shelf.check() }
        return shelf
    }

    /// The master shelf `url` names (`s3://BUCKET/PREFIX`), as ``shelf(_:timeout:)`` makes the store shelf; nil
    /// without a URL. A bucket that cannot be listed at start is said in a warning, and by `/ready`
    /// until it can.
    static func masters(_ url: String?, timeout: Duration) async throws -> S3MasterShelf? {
        guard let (client, location) = try bucket(url, timeout: timeout) else { return nil }
        let masters = S3MasterShelf(client: client, prefix: location)
        await warnUnlisted("the masters' bucket \(masters)", "its images cannot be built until it can", timeout) { try await masters.check() }
        return masters
    }

    /// A client of the bucket `url` names, from the environment, and the location; nil without a URL.
    /// A request's body the bucket stops taking is given up after `timeout` (and tried again).
    private static func bucket(_ url: String?, timeout: Duration) throws -> (S3Client, S3Location)? {
        guard let url, let location = S3Location(url) else { return nil }
        do {
            var configuration = try S3Configuration.fromEnvironment()
            configuration.stallTimeout = timeout
            return (S3Client(configuration: configuration), location)
        } catch { throw fail(url, error) }
    }

    /// Says on standard error that `what` cannot be listed, and `meanwhile`, when `check` fails or
    /// takes longer than `timeout` (the bucket's timeout: a silent bucket holds the start no longer).
    private static func warnUnlisted(
        _ what: String, _ meanwhile: String, _ timeout: Duration, _ check: @escaping @Sendable () async throws -> Void
    ) async {
        do { try await ImageCatalog.within(timeout, "its listing") { try await check() } } catch {
            FileHandle.standardError.write(Data("tiler: warning: \(what) cannot be listed (\(error)): \(meanwhile)\n".utf8))
        }
    }
}
