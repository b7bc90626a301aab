public import Hummingbird
import HummingbirdCore
public import Logging
public import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
public import Prometheus
public import ServiceLifecycle
public import TileActors
public import TileCore

/// A tile server over a folder of masters (JPEG, PNG, TIFF, JPEG 2000) and stores: ``TileRoutes`` on a Hummingbird application,
/// with CORS preflight answered, `HEAD` for every `GET`, and an access log through swift-log.
///
/// ```swift
/// let server = try TileServer(root: "images", cache: "cache")
/// try await server.application(host: "127.0.0.1", port: 8080).runService()  // stops on SIGTERM/SIGINT
/// ```
///
/// Each connection is parsed by NIO's HTTP/1.1 decoder; images already in the service's cache are
/// answered right after it, by a channel handler (in order with everything the application answers),
/// and every other request goes to the router.
public struct TileServer: Sendable {
    public var routes: TileRoutes
    /// How long a connection may take to send a request's head (however slowly its bytes come), stay
    /// silent in a body or between requests, or leave its answers unread, before it is closed; a body
    /// that never ends ends there. Default 60 s, as nginx's `client_header_timeout`; taken as at most
    /// ``longestTimeout``.
    public var idleTimeout: Duration = .seconds(60)
    /// The longest ``idleTimeout`` (and ``ImageCatalog/setBucketTimeout(_:)``) taken, 2^32 s (136 years): a
    /// longer one is taken as this, which the clocks' nanoseconds still hold.
    public static let longestTimeout: Duration = .seconds(1 << 32)
    /// Connections open at once at most (more wait in the kernel's backlog); from ``DescriptorBudget``.
    public var maximumConnections: Int
    /// What requests may ask: `Host` names, origins that may upload, CORS; nil: the defaults for the
    /// address bound (``RequestGuard/defaults(bind:)``).
    public var requestGuard: RequestGuard?
    /// The server's connections, counted as they open and close.
    public let connections = ConnectionCounts()
    /// The registry `GET /metrics` answers from (Prometheus' text format): the one the process
    /// bootstrapped swift-metrics with (``ServerMetrics``); nil, the default, answers 404 there.
    public var metricsRegistry: PrometheusCollectorRegistry?
    /// Where each answered request is written, one line in the Common Log Format or nginx's combined
    /// (``AccessLog``); nil, the default, writes none.
    public var accessLog: AccessLog?

    static let serverName = "tiler"

    /// - Parameters:
    ///   - root: the folder whose JPEGs and stores are served.
    ///   - cache: where JPEGs are built into stores.
    ///   - publicBaseURL: the server's public URL (`https://example.org/images`), which info.json ids start with; nil: from a trusted proxy's headers or each request's `Host`.
    ///   - uploads: who may upload (`PUT /images/{id}`); nil refuses uploads.
    ///   - maximumPendingBuilds: builds that may wait for their turn; a request needing one more is
    ///     answered 503 with `Retry-After` (default 16).
    ///   - cacheByteBudget: bytes of stores in `cache` past which the least recently used unopened ones
    ///     are removed, and past which uploads are refused; nil: `DiskCacheBudget`'s default.
    ///   - descriptors: how many connections, open stores and uploads the process's descriptors allow
    ///     (default: from its current `RLIMIT_NOFILE`).
    ///   - followsSymlinks: follow a symlink in `root` to a target inside it (default false).
    ///   - storeFormat: what JPEGs and uploads are built into (default a tiled pyramidal TIFF).
    ///   - cachePolicy: how long caches may keep the answers (images a day, `info.json` and `.dzi` five minutes).
    ///   - encoding: the quality of each format answers are encoded in (JPEG, WebP, AVIF; default `OutputEncoding()`'s).
    ///   - renderLimits: renders running and waiting at most, and the memory those running may hold; nil
    ///     (the default): ``RenderLimits``' defaults for a thread pool of one thread a core.
    ///   - shelf: where stores are shared with other servers (a bucket: ``ImageCatalog/shelf``); nil: none.
    ///   - masters: where masters `root` does not hold are found (a bucket: ``ImageCatalog/masters``); nil: none.
    ///   - taskExecutor: where the catalog's own tasks prefer to run (``ImageCatalog/taskExecutor``; default
    ///     Swift's global executor).
    /// - Throws: `.invalidArgument` when `root` is not a folder, `.io` when `cache` cannot be created.
    public init(
        root: String, cache: String, publicBaseURL: String? = nil, uploads: UploadPolicy? = nil,
        maximumPendingBuilds: Int = 16, cacheByteBudget: Int? = nil,
        descriptors: DescriptorBudget = DescriptorBudget(limit: DescriptorBudget.currentLimit()), followsSymlinks: Bool = false,
        storeFormat: StoreFormat = .tiff(), cachePolicy: CachePolicy = CachePolicy(), encoding: OutputEncoding = OutputEncoding(),
        renderLimits: RenderLimits? = nil, shelf: (any StoreShelf)? = nil, masters: (any MasterShelf)? = nil, taskExecutor: (any TaskExecutor)? = nil
    ) throws(TileError) {
        let catalog = try ImageCatalog(
            root: root, cache: cache, maximumPendingBuilds: maximumPendingBuilds, maximumOpenImages: descriptors.maximumOpenImages,
            maximumUploads: descriptors.maximumUploads, cacheByteBudget: cacheByteBudget, followsSymlinks: followsSymlinks,
            storeFormat: storeFormat, shelf: shelf, masters: masters, taskExecutor: taskExecutor)
        self.init(
            service: TileService(catalog: catalog, encoding: encoding, cachePolicy: cachePolicy, renderLimits: renderLimits),
            publicBaseURL: publicBaseURL, uploads: uploads)
        maximumConnections = descriptors.maximumConnections
    }

    /// A server over a catalog made by the caller (to share its build queue, or set its limits).
    public init(catalog: ImageCatalog, publicBaseURL: String? = nil, uploads: UploadPolicy? = nil) {
        self.init(service: TileService(catalog: catalog), publicBaseURL: publicBaseURL, uploads: uploads)
    }

    /// A server over a service made by the caller (its cache, limits, quality).
    /// - Parameters:
    ///   - service: reads, renders and encodes the images.
    ///   - publicBaseURL: the server's public URL (`https://example.org/images`), which info.json ids start with; nil: from a trusted proxy's headers or each request's `Host`.
    ///   - uploads: who may upload (`PUT /images/{id}`); nil refuses uploads.
    public init(service: TileService, publicBaseURL: String? = nil, uploads: UploadPolicy? = nil) {
        routes = TileRoutes(service: service, publicBaseURL: publicBaseURL)
        routes.uploads = uploads
        maximumConnections = DescriptorBudget(limit: DescriptorBudget.currentLimit()).maximumConnections
    }

    /// The router: the routes, `HEAD` for each `GET`, the request guard (`Host`, origins, CORS,
    /// `nosniff`), the access log's line (with ``accessLog``) and the metrics of each request;
    /// `/health` (the process answers), `/ready` (the catalog can serve: 200 or 503, with why) and
    /// `/metrics`. The catalog must run as a service beside it (``application(host:port:logger:onServerRunning:)``
    /// does): its lookups and builds run in the catalog's service, and wait for it.
    public func router(guard rules: RequestGuard = RequestGuard()) -> Router<TileRequestContext> {
        let router = Router(context: TileRequestContext.self, options: .autoGenerateHeadEndpoints)
        router.add(middleware: RecordingMiddleware(recorder: RequestRecorder(accessLog: accessLog, metrics: routes.service.metrics)))
        router.add(middleware: NonBlockingMiddleware())
        router.add(middleware: GuardMiddleware(rules: rules))
        if let access = routes.access { router.add(middleware: AccessMiddleware(policy: access)) }
        let plainText: HTTPFields = [.contentType: "text/plain; charset=utf-8", .cacheControl: "no-store"]
        router.get("health") { _, _ in TileRoutes.response(.ok, headers: plainText, body: ByteBuffer(string: "ok\n")) }
        router.get("ready") { [catalog = routes.catalog] _, _ in
            let health = await catalog.health()
            let text = health.isReady ? "ready\n" : health.problems.map { "not ready: \($0)\n" }.joined()
            return TileRoutes.response(health.isReady ? .ok : .serviceUnavailable, headers: plainText, body: ByteBuffer(string: text))
        }
        router.get("metrics") { [service = routes.service, registry = metricsRegistry, connections] _, _ in
            guard let registry else { return TileRoutes.plain(.notFound, "metrics are off") }
            let health = await service.catalog.health()
            // Counted here, not on the thread pool: a scrape answers whatever the pool is doing.
            let descriptors = ServerMetrics.openDescriptors()
            service.metrics.recordScrape(
                health, cacheBytes: service.cache.byteCount, connections: connections.open, descriptors: descriptors, renders: service.renders)
            var text: [UInt8] = []
            registry.emit(into: &text)
            return TileRoutes.response(
                .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8", .cacheControl: "no-store"], body: ByteBuffer(bytes: text))
        }
        routes.register(on: router)
        routes.registerPages(on: router)
        routes.registerUploads(on: router)
        routes.registerAdmin(on: router)
        routes.registerAccess(on: router)
        return router
    }

    /// The application on `host:port` (port 0: any free port, reported to `onServerRunning`), with the
    /// catalog as a service of its own: when the application shuts down (SIGTERM, SIGINT with
    /// `runService()`), the server stops accepting and finishes the requests in flight, then the builds
    /// still running are cancelled and their unfinished files removed.
    /// - Parameter services: more services run beside the server and stopped with it (a signal's handler).
    public func application(
        host: String = "127.0.0.1", port: Int = 8080, logger: Logger? = nil, services: [any Service] = [],
        onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        let log = logger ?? Logger(label: "tiler.serve")
        let (seconds, attoseconds) = min(max(.zero, idleTimeout), Self.longestTimeout).components
        let idle = TimeAmount.nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        let (service, accessLog, rules, access) = (routes.service, self.accessLog, requestGuard ?? .defaults(bind: host), routes.access)
        let server = HTTPServerBuilder { [connections] responder in
            TileHTTPChannel(
                responder: responder, service: service, rules: rules, idleTimeout: idle,
                recorder: RequestRecorder(accessLog: accessLog, metrics: service.metrics), access: access, counts: connections)
        }
        let limit = ConnectionLimit(maximum: maximumConnections, counts: connections, logger: log)
        return Application(
            router: router(guard: rules), server: server,
            configuration: .init(address: .hostname(host, port: port), serverName: Self.serverName, availableConnectionsDelegate: limit),
            services: [routes.catalog] + services, onServerRunning: onServerRunning, logger: log)
    }
}

/// The child channel of a connection, in the shape of Hummingbird's `HTTP1Channel`: NIO's HTTP/1.1
/// decoder and encoder, an idle timer, the ``TileConnectionHandler`` (cached images, the connection's
/// end), the conversion to HTTP types, and the application.
struct TileHTTPChannel: HTTPChannelHandler {
    typealias Value = NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>
    let responder: HTTPChannelHandler.Responder
    let service: TileService
    let rules: RequestGuard
    let idleTimeout: TimeAmount
    let recorder: RequestRecorder
    let access: AccessPolicy?
    let counts: ConnectionCounts

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            let pipeline = channel.pipeline.syncOperations
            // Hummingbird's limits: 80 KiB of fields, at most 1000 of them.
            var limits = NIOHTTPDecoderLimitConfiguration()
            limits.maxHeaderFieldCount = 1000
            // NIO's encoder and decoder as `configureHTTPServerPipeline` makes them, but not paired: a
            // paired encoder counts the requests' methods to drop HEAD bodies, and the cached answers
            // written below it would throw that count off. Hummingbird's HEAD answers have no body.
            try pipeline.addHandler(HTTPResponseEncoder(configuration: .init()))
            // The idle timer sees every read; the answers the connection handler writes below the
            // encoder do not pass it (it has no write timeout).
            try pipeline.addHandler(IdleStateHandler(readTimeout: idleTimeout))
            try pipeline.addHandler(ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes, limitConfiguration: limits)))
            try pipeline.addHandler(
                TileConnectionHandler(
                    service: service, rules: rules, recorder: recorder, headTimeout: idleTimeout, access: access, counts: counts))
            try pipeline.addHandler(HTTP1ToHTTPServerCodec(secure: false))
            return try Value.closingWhenDropped(channel, configuration: .init(isOutboundHalfClosureEnabled: true))
        }
    }

    func handle(value asyncChannel: Value, logger: Logger) async {
        await handleHTTP(asyncChannel: asyncChannel, logger: logger)
    }
}

/// Runs each request's handler as code that must not block (``TileCore/BlockingCallCheck``): blocking
/// work belongs on the thread pool.
struct NonBlockingMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        try await BlockingCallCheck.withNonBlockingScope { try await next(request, context) }
    }
}

/// Writes each request the router answers to the access log (when there is one) and counts it in
/// the metrics, once its answer is made: ``RequestRecorder``, as the connection handler records the
/// answers it makes itself.
struct RecordingMiddleware<Context: ChannelRequestContext>: RouterMiddleware {
    let recorder: RequestRecorder

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = NIODeadline.now()
        // Read now: the channel forgets its peer's address once it closes (a stalled upload, a hang-up).
        let client = recorder.accessLog == nil ? nil : context.channel.remoteAddress?.ipAddress
        func record(_ status: Int, bytes: Int) {
            var remembered: ServerMetrics.Remembered?
            recorder.record(
                TileAddress(path: request.uri.path[...]).route, client: client,
                method: request.method.rawValue, target: request.uri.description, status: status, bytes: bytes, since: start,
                referer: request.headers[.referer], userAgent: request.headers[.userAgent], remembered: &remembered)
        }
        do {
            let response = try await next(request, context)
            record(response.status.code, bytes: request.method == .head ? 0 : response.body.contentLength ?? 0)
            return response
        } catch {
            record((error as? any HTTPResponseError)?.status.code ?? 500, bytes: 0)
            throw error
        }
    }
}

/// The one place a request's answer is recorded: its access-log line (with an ``AccessLog``) and its
/// metrics (``ServerMetrics``), whether the router or the connection handler made it.
struct RequestRecorder: Sendable {
    let accessLog: AccessLog?
    let metrics: ServerMetrics

    /// Records one answer, made since `start`.
    /// - Parameters:
    ///   - referer: the request's `Referer`, read only for a combined log (likewise `userAgent`).
    ///   - remembered: the metrics' handles of the caller's last answer, kept there for its next
    ///     (``ServerMetrics/record(_:status:bytes:nanoseconds:remembered:)``).
    func record(
        _ route: ServerMetrics.Route, client: @autoclosure () -> String?, method: String, target: String,
        version: (major: Int, minor: Int) = (1, 1), status: Int, bytes: Int, since start: NIODeadline,
        referer: @autoclosure () -> String?, userAgent: @autoclosure () -> String?, remembered: inout ServerMetrics.Remembered?
    ) {
        metrics.record(route, status: status, bytes: bytes, nanoseconds: (NIODeadline.now() - start).nanoseconds, remembered: &remembered)
        guard let accessLog else { return }
        let combined = accessLog.format == .combined
        accessLog.record(
            client: client(), method: method, target: target, version: version, status: status, bytes: bytes,
            referer: combined ? referer() : nil, userAgent: combined ? userAgent() : nil)
    }
}

/// A connection's `NIOAsyncChannel` that closes its channel when it is dropped unused, instead of
/// stopping the process. Hummingbird's accept loop drops the connections accepted but not handed to it
/// yet when its task is cancelled (a shutdown while clients connect, swift-nio#2637), and a channel made
/// by `init(wrappingChannelSynchronously:)` traps in its writer's deinitializer then ("Deinited
/// NIOAsyncWriter without calling finish()"); one made by `init(synchronouslyWrapping:)` is closed:
/// its writer's deinitializer half-closes it (outbound half-closure is on), and ``TileConnectionHandler``
/// lingers and then closes it whole (``TileConnectionHandler/startLinger(_:)``). A connection handled
/// as usual is unchanged (`executeThenClose` finishes the writer itself). NIO deprecated that
/// initializer for its teardown by deinitializer, which is exactly what is wanted here: a protocol
/// requirement reaches it without the deprecation's warning (its removal would show as a build error).
private protocol ClosingWhenDropped {
    associatedtype Configuration
    init(synchronouslyWrapping channel: any Channel, configuration: Configuration) throws
}

extension NIOAsyncChannel: ClosingWhenDropped {}

extension ClosingWhenDropped {
    /// See ``ClosingWhenDropped``. Called on the channel's event loop.
    fileprivate static func closingWhenDropped(_ channel: any Channel, configuration: Configuration) throws -> Self {
        try Self(synchronouslyWrapping: channel, configuration: configuration)
    }
}
