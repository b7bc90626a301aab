public import TileCore
public import Hummingbird
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

    /// - Parameters:
    ///   - root: the folder whose JPEGs and stores are served.
    ///   - cache: where JPEGs are built into stores.
    ///   - publicBaseURL: the IIIF base URL ids start with; nil: from each request's `Host`.
    ///   - uploads: who may upload (`PUT /images/{id}`); nil refuses uploads.
    public init(root: String, cache: String, publicBaseURL: String? = nil, uploads: UploadPolicy? = nil) throws(TileError) {
        routes = TileRoutes(catalog: try ImageCatalog(root: root, cache: cache), publicBaseURL: publicBaseURL)
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

    /// The application on `host:port` (port 0: any free port, reported to `onServerRunning`).
    public func application(
        host: String = "127.0.0.1", port: Int = 8080, logger: Logger? = nil,
        onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        var log = logger ?? Logger(label: "tiler.serve")
        if logger == nil { log.logLevel = .info }
        return Application(
            router: router(), configuration: .init(address: .hostname(host, port: port), serverName: "tiler"),
            onServerRunning: onServerRunning, logger: log)
    }
}
