import ArgumentParser
import Foundation
import Hummingbird
import Logging
import TileCore
import TileServer

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve a folder of JPEGs and stores over IIIF Image API 3.0 and DeepZoom.",
        discussion: """
            Routes: GET /iiif/3/{id}/info.json, /iiif/3/{id}/{region}/{size}/{rotation}/{quality}.{format}, /dzi/{id}.dzi, /dzi/{id}_files/{level}/{col}_{row}.jpg. The identifier is a file's name in DIR without its extension (.jpg, .jpeg, .tiles). A JPEG is built into a store in the cache folder on its first request; its tiles are served while it builds. GET / lists the images, GET /view/{id} is the viewer. With --allow-uploads, PUT /images/{id} builds an uploaded JPEG into {id}.tiles as it arrives. SIGTERM or SIGINT stops the server.
            """)

    @Argument(help: "The folder of JPEGs and stores to serve.")
    var folder: String

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The port to listen on (0: any free port).")
    var port = 8080

    @Option(help: "Where JPEGs are built into stores (default: FOLDER/.tiler-cache).")
    var cache: String?

    @Option(help: "The base URL of the IIIF service as clients see it (default: from each request's Host header).")
    var publicURL: String?

    @Flag(help: "Accept uploads: PUT /images/{id} with a JPEG body, built as it arrives.")
    var allowUploads = false

    @Option(help: "The bearer token uploads must present (default: $TILER_UPLOAD_TOKEN); required unless the server listens on loopback only.")
    var uploadToken: String?

    @Option(help: "The largest upload, in bytes.")
    var maxUploadBytes = 1 << 30

    @Option(help: "Builds that may wait for their turn; a request needing one more gets 503 with Retry-After.")
    var maxPendingBuilds = 16

    @Option(help: "Bytes of stores in the cache folder past which the least recently used are removed (default: a quarter of the free space of $TMPDIR, at least 1 GiB).")
    var cacheBudget: Int?

    @Option(help: "Seconds a connection may send nothing (a stalled request or body) before it is closed.")
    var idleTimeout = 60

    var token: String? { uploadToken ?? ProcessInfo.processInfo.environment["TILER_UPLOAD_TOKEN"] }

    func validate() throws {
        let loopback = ["127.0.0.1", "::1", "localhost"].contains(host)
        if allowUploads && token == nil && !loopback {
            throw ValidationError("--allow-uploads on \(host) needs --upload-token (or TILER_UPLOAD_TOKEN): only a loopback server may take uploads without one.")
        }
        guard maxUploadBytes > 0 else { throw ValidationError("--max-upload-bytes must be positive.") }
        guard maxPendingBuilds >= 0 else { throw ValidationError("--max-pending-builds must not be negative.") }
        guard cacheBudget.map({ $0 > 0 }) ?? true else { throw ValidationError("--cache-budget must be positive.") }
        guard idleTimeout > 0 else { throw ValidationError("--idle-timeout must be positive.") }
    }

    func run() async throws {
        // Log lines are written by a thread of their own: an event loop never waits on standard error.
        LoggingSystem.bootstrap(BackgroundLogHandler.init)
        do {
            let uploads = allowUploads ? UploadPolicy(token: token, maximumBytes: maxUploadBytes) : nil
            var server = try TileServer(
                root: folder, cache: cache ?? "\(folder)/.tiler-cache", publicBaseURL: publicURL, uploads: uploads,
                maximumPendingBuilds: maxPendingBuilds, cacheByteBudget: cacheBudget)
            server.idleTimeout = .seconds(idleTimeout)
            let (host, root) = (self.host, server.routes.catalog.root)
            let app = server.application(host: host, port: port) { channel in
                let port = channel.localAddress?.port ?? 0
                // On standard error, unbuffered: a script waiting for the port sees it at once.
                FileHandle.standardError.write(
                    Data("tiler: serving \(escapingControlCharacters(root)) at http://\(host):\(port)/iiif/3/ and /dzi/\n".utf8))
            }
            try await app.runService()
        } catch let error as TileError {
            throw fail(folder, error)
        }
    }
}
