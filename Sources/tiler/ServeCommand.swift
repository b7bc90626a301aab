import ArgumentParser
import Foundation
import Hummingbird
import Logging
import NIOCore
import TileCore
import TileServer
import UnixSignals

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve a folder of images (JPEG, PNG, TIFF, JPEG 2000) and stores over IIIF Image API 3.0 and 2.1 and DeepZoom.",
        discussion: """
            Routes: GET /iiif/3/{id}/info.json, /iiif/3/{id}/{region}/{size}/{rotation}/{quality}.{format} (IIIF Image API 3.0; /iiif/2/... the same in 2.1), /iiif/3/{id}/manifest and /iiif/3/collection (IIIF Presentation 3.0 manifests and the folder's collection, for Mirador and other viewers; 2.1 under /iiif/2/), /dzi/{id}.dzi, /dzi/{id}_files/{level}/{col}_{row}.jpg. The identifier is a file's name in DIR without its extension (.jpg, .jpeg, .png, .jp2, .j2k, .j2c, .jph, .tiles, .tif, .tiff). A JPEG, PNG, JPEG 2000 or TIFF master (a TIFF that is not a tiled pyramid) is built into a store in the cache folder on its first request; its tiles are served while it builds (a master with alpha gets WebP tiles, which keep it). GET / lists the images, GET /view/{id} is the viewer. With --allow-uploads, PUT /images/{id} builds an uploaded JPEG, PNG, TIFF or JPEG 2000 into {id}.tiles (JPEG and PNG as they arrive). GET /health (alive), /ready (can serve: 200 or 503), /metrics (Prometheus). SIGTERM or SIGINT stops the server (the requests in flight are finished); SIGHUP reopens --access-log-file.
            """)

    @Argument(help: "The folder of masters (JPEG, PNG, TIFF, JPEG 2000), stores and pyramidal TIFFs to serve (or the setting folder).")
    var folder: String?

    @Option(
        help:
            "A JSON file of settings, keyed as below in camel case ({\"cacheBudget\": 10000000000, \"allowedHosts\": [\"images.example.org\"]}); the environment (TILER_CACHE_BUDGET, TILER_ALLOWED_HOSTS=a,b) overrides it, the command line overrides both (default: $TILER_CONFIG)."
    )
    var config: String?

    @Option(help: "The address to listen on (default 127.0.0.1).")
    var host: String?

    @Option(help: "The port to listen on, 0 for any free port (default 8080).")
    var port: Int?

    @Option(help: "Where masters are built into stores (default: FOLDER/.tiler-cache).")
    var cache: String?

    @Option(
        help:
            "The server's URL as clients see it (https://example.org/images): info.json ids start with it and /iiif/3 or /iiif/2 (default: from a trusted proxy's headers, else each request's Host header)."
    )
    var publicURL: String?

    @Flag(
        inversion: .prefixedNo,
        help: "Accept uploads: PUT /images/{id} with a JPEG, PNG, TIFF or JPEG 2000 body, built as it arrives, with the bearer token (default off).")
    var allowUploads: Bool?

    @Option(help: "The bearer token uploads must present (default: a random one, printed at start; never logged).")
    var uploadToken: String?

    @Option(
        name: .customLong("allowed-host"),
        help: "A host name requests may name in Host (repeatable; default on a loopback address: localhost, 127.0.0.1, ::1; elsewhere any).")
    var allowedHosts: [String] = []

    @Option(
        name: .customLong("upload-origin"), help: "An origin (https://app.example) whose pages may upload across origins (repeatable; default none).")
    var uploadOrigins: [String] = []

    @Option(
        name: .customLong("trusted-proxy"),
        help:
            "An address or range (10.0.0.0/8, ::1) whose Forwarded and X-Forwarded-Proto/Host/Port/Prefix headers name the public URL (repeatable; default none: those headers are ignored)."
    )
    var trustedProxies: [String] = []

    @Flag(
        inversion: .prefixedNo,
        help:
            "Follow a symlink in the folder to a target inside it (default off: symlinks are skipped); with access rules, only to an image the rule of the link's own name decides."
    )
    var followSymlinks: Bool?

    @Option(
        help:
            "Connections open at once at most, lowered to what the descriptor limit allows (default 4096); with all open, the one waiting longest for a request (1 s at least) is closed for the next."
    )
    var maxConnections: Int?

    @Option(help: "Uploads at once at most, lowered to what the descriptor limit allows (default 8).")
    var maxUploads: Int?

    @Option(help: "The largest upload, in bytes (default 1 GiB).")
    var maxUploadBytes: Int?

    @Option(help: "Builds that may wait for their turn; a request needing one more gets 503 with Retry-After (default 16).")
    var maxPendingBuilds: Int?

    @Option(
        help:
            "Bytes of stores in the cache folder past which the least recently used are removed, and /ready says not ready (default: a quarter of the free space of the cache folder's file system, at least 256 MiB). A build whose store does not fit is refused (507)."
    )
    var cacheBudget: Int?

    @Option(
        help:
            "What masters and uploads are built into: tiff (a tiled pyramidal TIFF, level 0 copied losslessly; the default; masters with alpha get WebP tiles, which keep it) or raw (RGBA tiles, one file per level: more disk, no decode on a read)."
    )
    var format: StoreFormatArgument?

    @Option(help: "The JPEG quality of a TIFF store's encoded levels, 1-100 (default 74).")
    var quality: Int?

    @Option(help: "The quantisation tables --quality scales: flattened (the default) or annex-k.")
    var tables: TablesArgument?

    @Option(help: "The JPEG quality of rendered answers (regions, sizes, tiles a store does not keep as JPEG), 1-100 (default 80).")
    var jpegQuality: Int?

    @Option(help: "The WebP quality of .webp answers, 1-100 (default \(OutputEncoding.defaultWebPQuality)).")
    var webpQuality: Int?

    @Flag(inversion: .prefixedNo, help: "Encode .webp answers losslessly (every pixel as rendered; larger; default off).")
    var webpLossless: Bool?

    @Option(help: "The AVIF quality of .avif answers, 1-100 (default \(OutputEncoding.defaultAVIFQuality)).")
    var avifQuality: Int?

    @Option(
        help:
            "libwebp's method for .webp answers, 0 (fastest) to 6 (smallest at the same quality, for about 1.5x the encode time of 4) (default \(OutputEncoding.Effort.defaultWebPMethod))."
    )
    var webpMethod: Int?

    @Flag(
        inversion: .prefixedNo,
        help:
            "Turn .webp answers' colour into YUV with libwebp's sharp conversion: truer colour edges, fewer bytes at the same PSNR, for about 1.5x the encode time (default off)."
    )
    var webpSharpYuv: Bool?

    @Option(help: "libavif's speed for .avif answers, 0 (slowest, smallest) to 10 (default \(OutputEncoding.Effort.defaultAVIFSpeed)).")
    var avifSpeed: Int?

    @Option(
        help:
            "The chroma of .avif answers: 420 (half resolution each way, AVIF's baseline profile; the default) or 444 (full: fewer bytes at the same PSNR, but AV1's High profile, which some hardware decoders cannot show)."
    )
    var avifChroma: String?

    @Option(
        help:
            "MiB the renders running at once may hold (their pixels and their encoders' memory, estimated: about 8 bytes a pixel for a JPEG, 24 for an AVIF); a render past it waits for those running, and one larger than all of it runs alone (default 256)."
    )
    var renderMemory: Int?

    @Option(help: "Seconds caches may keep an image (a tile, a region) of a complete pyramid: Cache-Control max-age (default 86400).")
    var imageMaxAge: Int?

    @Option(help: "Seconds caches may keep info.json and .dzi: Cache-Control max-age (default 300).")
    var documentMaxAge: Int?

    @Flag(inversion: .prefixedNo, help: "Count requests, builds and resources, and answer GET /metrics in Prometheus' text format (default on).")
    var metrics: Bool?

    @Option(help: "The bearer token of the admin API (/admin/...; at least 16 characters; never logged). Without one the admin API is off.")
    var adminToken: String?

    @Option(
        name: .customLong("purge-url"),
        help: "A cache in front (a Varnish, http://127.0.0.1:6081) told of each admin purge with BAN and X-Image-Id (repeatable; default none).")
    var purgeURLs: [String] = []

    @Option(
        help:
            "The rights of every image, in its IIIF manifest (rights; 2.1: license): a Creative Commons or RightsStatements.org URI (default none)."
    )
    var rights: String?

    @Option(help: "Text every IIIF manifest shows as its required statement (\"Provided by the City Archive\"; 2.1: attribution; default none).")
    var requiredStatement: String?

    @Flag(
        inversion: .prefixedNo,
        help: "Offer each master file for download: GET /download/{id}, linked from its IIIF manifest's rendering (default off).")
    var downloads: Bool?

    @Option(
        help: ArgumentHelp(
            "Share the stores with other servers through a bucket (s3://BUCKET/PREFIX): each store built is published there as PREFIX/ID.tiles, and one built there from the same master is copied instead of built (the bucket's endpoint and credentials from TILER_S3_* or AWS_* variables).",
            valueName: "s3-url"))
    var store: String?

    @Option(
        help: ArgumentHelp(
            "Serve the masters of a bucket too (s3://BUCKET/PREFIX): PREFIX/ID.jpg (.png, .tif, .jp2, ...) is the image ID, built on its first request as it downloads, and again when the object is replaced (the bucket's endpoint and credentials from TILER_S3_* or AWS_* variables). Without a folder, --cache is needed.",
            valueName: "s3-url"))
    var source: String?

    @Flag(inversion: .prefixedNo, help: "Write one line per answered request, to standard error or --access-log-file (default on).")
    var accessLog: Bool?

    @Option(
        help: "The file the access log is appended to (created with the umask's mode; reopened on SIGHUP, for logrotate). Default: standard error.")
    var accessLogFile: String?

    @Option(
        help: "The access log's lines: common (the Common Log Format) or combined (nginx's default: the referer and user agent too) (default common)."
    )
    var accessLogFormat: String?

    @Option(help: "The least severe messages logged: trace, debug, info, notice, warning, error or critical (default info; the access log is apart).")
    var logLevel: String?

    @Option(help: "Seconds a connection may send nothing (a stalled request or body) before it is closed (default 60).")
    var idleTimeout: Int?

    @Option(
        help:
            "Seconds a look at a bucket (--store, --source: a lookup, a listing, the start's listing, a tile's read) may take before the server gives up on it: the image is then built here (a master's lookup: 503), a tile's read waits for its store's copy; a publish's part the bucket takes nothing of (32 KiB) for as long is given up and tried again (default 10)."
    )
    var bucketTimeout: Int?

    func run() async throws {
        let s = try await ServeSettings.resolve(self)
        // Log lines are written by a thread of their own: an event loop never waits on standard error.
        let level = Logger.Level(rawValue: s.logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = BackgroundLogHandler(label: label)
            handler.logLevel = level
            return handler
        }
        do {
            var uploads: UploadPolicy?
            if s.allowUploads {
                let token = s.uploadToken ?? (0..<4).map { _ in String(UInt64.random(in: 0...UInt64.max), radix: 36) }.joined()
                if s.uploadToken == nil { FileHandle.standardError.write(Data("tiler: uploads take the bearer token \(token)\n".utf8)) }
                uploads = UploadPolicy(token: token, maximumBytes: s.maxUploadBytes)
            }
            let registry = s.metrics ? ServerMetrics.bootstrapPrometheus() : nil
            let descriptors = DescriptorBudget(
                limit: DescriptorBudget.raisedLimit(), maximumConnections: s.maxConnections, maximumUploads: s.maxUploads)
            let shelf = try await Self.shelf(s.store, timeout: .seconds(s.bucketTimeout))
            let masters = try await Self.masters(s.source, timeout: .seconds(s.bucketTimeout))
            if s.folderIsOwn {
                do { try FileManager.default.createDirectory(atPath: s.folder, withIntermediateDirectories: true) } catch {
                    throw TileError(.io, "cannot create \(s.folder): \(error.localizedDescription)")
                }
            }
            var server = try TileServer(
                root: s.folder, cache: s.cache ?? "\(s.folder)/.tiler-cache", publicBaseURL: s.publicURL, uploads: uploads,
                maximumPendingBuilds: s.maxPendingBuilds, cacheByteBudget: s.cacheBudget, descriptors: descriptors,
                followsSymlinks: s.followSymlinks,
                storeFormat: s.format == .tiff ? .tiff(TIFFWriting(quality: s.quality, tables: s.tables.tables)) : .raw,
                cachePolicy: CachePolicy(imageMaxAge: s.imageMaxAge, documentMaxAge: s.documentMaxAge),
                encoding: OutputEncoding(
                    jpegQuality: s.jpegQuality, webpQuality: s.webpQuality, webpLossless: s.webpLossless, avifQuality: s.avifQuality,
                    effort: OutputEncoding.Effort(
                        webpMethod: s.webpMethod, webpSharpYUV: s.webpSharpYuv, avifSpeed: s.avifSpeed, avifFullChroma: s.avifChroma == "444")),
                renderLimits: RenderLimits(threads: System.coreCount, runningFootprint: s.renderMemory << 18),
                shelf: shelf, masters: masters)
            server.idleTimeout = .seconds(s.idleTimeout)
            await server.routes.catalog.setBucketTimeout(.seconds(s.bucketTimeout))
            server.metricsRegistry = registry
            let format = AccessLog.Format(rawValue: s.accessLogFormat) ?? .common
            if s.accessLog {
                server.accessLog =
                    try s.accessLogFile.map { path throws(TileError) in try AccessLog(path: path, format: format) } ?? AccessLog(format: format)
            }
            server.routes.admin = s.adminToken.map { AdminPolicy(token: $0, purgeURLs: s.purgeURLs) }
            (server.routes.rights, server.routes.requiredStatement) = (s.rights, s.requiredStatement)
            server.routes.downloads = s.downloads
            server.routes.access = s.access
            var rules = RequestGuard.defaults(bind: s.host)
            if !s.allowedHosts.isEmpty { rules.allowedHosts = Set(s.allowedHosts.map { $0.lowercased() }) }
            rules.uploadOrigins = Set(s.uploadOrigins)
            rules.trustedProxies = s.trustedProxies.compactMap(AddressRange.init)
            server.requestGuard = rules
            let (host, root, cache) = (s.host, server.routes.catalog.root, server.routes.catalog.cache)
            // Said at start, not only by /ready: every image that needs a build would fail.
            if access(cache, R_OK | W_OK | X_OK) != 0 {
                let reason = String(cString: strerror(errno))
                FileHandle.standardError.write(
                    Data(
                        "tiler: warning: the cache folder \(escapingControlCharacters(cache)) cannot be written (\(reason)): images that need a build fail until it can (/ready says so)\n"
                            .utf8))
            }
            // SIGHUP reopens the access log's file (after logrotate renamed it); without a file, it is
            // taken and does nothing (its default would end the process).
            let reopen = await SignalHandler(trapping: .sighup) { [accessLog = server.accessLog] in accessLog?.reopen() }
            let app = server.application(host: host, port: s.port, services: [reopen]) { channel in
                let port = channel.localAddress?.port ?? 0
                // On standard error, unbuffered: a script waiting for the port sees it at once.
                FileHandle.standardError.write(
                    Data(
                        "tiler: serving \(escapingControlCharacters(root))\(masters.map { " and the masters of \($0)" } ?? "") at http://\(host):\(port)/ (the list of images; /view/{id} a viewer, /iiif/3/{id}/info.json, /iiif/3/{id}/manifest, /iiif/3/collection, /iiif/2/..., /dzi/{id}.dzi)\n"
                            .utf8))
            }
            try await app.runService()
        } catch let error as TileError {
            throw fail(s.folder, error)
        } catch let error as IOError where error.errnoCode == EADDRINUSE {
            throw fail(
                "\(s.host):\(s.port)",
                TileError(.io, "the address is in use (another server listens there): --port chooses another (0: any free one)", errno: EADDRINUSE))
        }
    }
}
