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

    @Flag(help: "Accept uploads: PUT /images/{id} with a JPEG body, built as it arrives (with the bearer token).")
    var allowUploads = false

    @Option(help: "The bearer token uploads must present (default: $TILER_UPLOAD_TOKEN, else a random one, printed at start).")
    var uploadToken: String?

    @Option(name: .customLong("allowed-host"), help: "A host name requests may name in Host (repeatable; default on a loopback address: localhost, 127.0.0.1, ::1; elsewhere any).")
    var allowedHosts: [String] = []

    @Option(name: .customLong("upload-origin"), help: "An origin (https://app.example) whose pages may upload across origins (repeatable; default none).")
    var uploadOrigins: [String] = []

    @Flag(help: "Follow a symlink in the folder to a target inside it (by default symlinks are skipped).")
    var followSymlinks = false

    @Option(help: "Connections open at once at most (lowered to what the descriptor limit allows).")
    var maxConnections = 4096

    @Option(help: "Uploads at once at most (lowered to what the descriptor limit allows).")
    var maxUploads = 8

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
        guard maxConnections > 0, maxUploads > 0 else { throw ValidationError("--max-connections and --max-uploads must be positive.") }
        guard maxUploadBytes > 0 else { throw ValidationError("--max-upload-bytes must be positive.") }
        guard maxPendingBuilds >= 0 else { throw ValidationError("--max-pending-builds must not be negative.") }
        guard cacheBudget.map({ $0 > 0 }) ?? true else { throw ValidationError("--cache-budget must be positive.") }
        guard idleTimeout > 0 else { throw ValidationError("--idle-timeout must be positive.") }
    }

    func run() async throws {
        // Log lines are written by a thread of their own: an event loop never waits on standard error.
        LoggingSystem.bootstrap(BackgroundLogHandler.init)
        do {
            var uploads: UploadPolicy?
            if allowUploads {
                let token = self.token ?? (0..<4).map { _ in String(UInt64.random(in: 0...UInt64.max), radix: 36) }.joined()
                if self.token == nil { FileHandle.standardError.write(Data("tiler: uploads take the bearer token \(token)\n".utf8)) }
                uploads = UploadPolicy(token: token, maximumBytes: maxUploadBytes)
            }
            let descriptors = DescriptorBudget(limit: DescriptorBudget.raisedLimit(), maximumConnections: maxConnections, maximumUploads: maxUploads)
            var server = try TileServer(
                root: folder, cache: cache ?? "\(folder)/.tiler-cache", publicBaseURL: publicURL, uploads: uploads,
                maximumPendingBuilds: maxPendingBuilds, cacheByteBudget: cacheBudget, descriptors: descriptors,
                followsSymlinks: followSymlinks)
            server.idleTimeout = .seconds(idleTimeout)
            var rules = RequestGuard.defaults(bind: host)
            if !allowedHosts.isEmpty { rules.allowedHosts = Set(allowedHosts.map { $0.lowercased() }) }
            rules.uploadOrigins = Set(uploadOrigins)
            server.requestGuard = rules
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
