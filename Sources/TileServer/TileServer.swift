public import TileCore
public import Hummingbird
import HummingbirdCore
public import Logging
public import NIOCore

/// A tile server over a folder of JPEGs and stores: ``TileRoutes`` on a Hummingbird application,
/// with CORS preflight answered and an access log through swift-log.
///
/// ```swift
/// let server = try TileServer(root: "images", cache: "cache")
/// try await server.application(host: "127.0.0.1", port: 8080).runService()  // stops on SIGTERM/SIGINT
/// ```
public struct TileServer: Sendable {
    public var routes: TileRoutes
    /// How long a connection may send nothing (no request, or a request or body that stalls) before it
    /// is closed; a body that never ends ends there. Default 60 s, as nginx's `client_body_timeout`.
    public var idleTimeout: Duration = .seconds(60)

    /// - Parameters:
    ///   - root: the folder whose JPEGs and stores are served.
    ///   - cache: where JPEGs are built into stores.
    ///   - publicBaseURL: the IIIF base URL ids start with; nil: from each request's `Host`.
    ///   - uploads: who may upload (`PUT /images/{id}`); nil refuses uploads.
    ///   - maximumPendingBuilds: builds that may wait for their turn; a request needing one more is
    ///     answered 503 with `Retry-After` (default 16).
    ///   - cacheByteBudget: bytes of stores in `cache` past which the least recently used unopened ones
    ///     are removed; nil: `DiskCacheBudget`'s default.
    /// - Throws: `.invalidArgument` when `root` is not a folder, `.io` when `cache` cannot be created.
    public init(
        root: String, cache: String, publicBaseURL: String? = nil, uploads: UploadPolicy? = nil,
        maximumPendingBuilds: Int = 16, cacheByteBudget: Int? = nil
    ) throws(TileError) {
        let catalog = try ImageCatalog(
            root: root, cache: cache, maximumPendingBuilds: maximumPendingBuilds, cacheByteBudget: cacheByteBudget)
        routes = TileRoutes(catalog: catalog, publicBaseURL: publicBaseURL)
        routes.uploads = uploads
    }

    /// A server over a catalog made by the caller (to share its build queue, or set its limits).
    /// - Parameters:
    ///   - catalog: the images served.
    ///   - publicBaseURL: the IIIF base URL ids start with; nil: from each request's `Host`.
    ///   - uploads: who may upload (`PUT /images/{id}`); nil refuses uploads.
    public init(catalog: ImageCatalog, publicBaseURL: String? = nil, uploads: UploadPolicy? = nil) {
        routes = TileRoutes(catalog: catalog, publicBaseURL: publicBaseURL)
        routes.uploads = uploads
    }

    /// The router: the routes, `HEAD` for each, CORS (preflight and `Access-Control-Allow-Origin: *`),
    /// and one log line a request.
    public func router() -> Router<BasicRequestContext> {
        let router = Router()
        router.add(middleware: LogRequestsMiddleware(.info))
        router.add(middleware: HeadMiddleware())
        router.add(middleware: CORSMiddleware(allowOrigin: .all, allowHeaders: [.accept, .contentType, .ifNoneMatch, .authorization], allowMethods: [.get, .head, .put, .options]))
        routes.register(on: router)
        routes.registerPages(on: router)
        routes.registerUploads(on: router)
        return router
    }

    /// The application on `host:port` (port 0: any free port, reported to `onServerRunning`), with the
    /// catalog as a service of its own: when the application shuts down (SIGTERM, SIGINT with
    /// `runService()`), the server stops accepting and finishes the requests in flight, then the builds
    /// still running are cancelled and their unfinished files removed.
    public func application(
        host: String = "127.0.0.1", port: Int = 8080, logger: Logger? = nil,
        onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        var log = logger ?? Logger(label: "tiler.serve")
        if logger == nil { log.logLevel = .info }
        let (seconds, attoseconds) = idleTimeout.components
        let idle = TimeAmount.nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        // Per connection: cached tiles answered from the bytes as they arrive, before NIO's HTTP decoder
        // (CachedTileResponder), and silent connections closed at the idle timeout (ApplicationTracker,
        // which installs both; Hummingbird's own idle timeout is not used).
        let (routes, accessLog) = (self.routes, log.logLevel <= .info ? log : nil)
        let http1 = HTTP1Channel.Configuration(
            additionalChannelHandlers: [ApplicationTracker(routes: routes, logger: accessLog, idleTimeout: idle)])
        return Application(
            router: router(), server: .http1(configuration: http1),
            configuration: .init(address: .hostname(host, port: port), serverName: "tiler"),
            services: [routes.catalog], onServerRunning: onServerRunning, logger: log)
    }
}
