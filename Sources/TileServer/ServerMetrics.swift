import CoreMetrics
import Foundation
import NIOCore
import NIOConcurrencyHelpers

/// What the server counts, through swift-metrics: to whatever backend the process bootstrapped
/// (`tiler serve` bootstraps swift-prometheus and answers `GET /metrics`); without one, nothing is
/// recorded and nothing costs more than a call.
///
/// - `tiler_requests_total{route,status}`, `tiler_request_duration_seconds{route}` (a histogram),
///   `tiler_response_bytes_total{route}`: every request, answered by the routes or from the cache by
///   the connection's handler. `route` is one of ``Route``'s values, never a path (no identifier
///   reaches a label).
/// - `tiler_cache_hits_total`, `tiler_cache_misses_total`: encoded images answered from the cache or made.
/// - `tiler_stored_tiles_total`: tiles read as a TIFF stores them and sent (no decode, no encode); a
///   whole tile asked for again is then kept and answered from the cache (a hit).
/// - `tiler_builds_total{outcome}` (completed, failed, cancelled), `tiler_build_duration_seconds`: builds.
/// - Read when scraped: `tiler_builds_running`, `tiler_builds_queued`, `tiler_images_failed`,
///   `tiler_disk_bytes_used`, `tiler_disk_bytes_limit`, `tiler_cache_bytes`, `tiler_connections_open`,
///   `tiler_descriptors_open`; `tiler_renders_running`, `tiler_renders_waiting` (renders admitted to
///   the thread pool and waiting their turn: ``RenderLimits``), `tiler_render_memory_bytes` and
///   `tiler_render_memory_limit_bytes` (what the renders running hold, as estimated, and
///   ``RenderLimits/runningFootprint``, in bytes).
public final class ServerMetrics: Sendable {
    /// The kind of request a metric counts (``TileAddress/route``).
    public enum Route: String, Sendable, CaseIterable {
        case iiifImage = "iiif_image", iiifInfo = "iiif_info", dziTile = "dzi_tile", dziDescriptor = "dzi_descriptor"
        case upload, pages, health, ready, metrics, other
    }

    fileprivate struct Handles: Sendable {
        let requests: Counter
        let duration: CoreMetrics.Timer
        let bytes: Counter
    }

    /// A request's labels, looked up without building a string (the cached path's cost).
    fileprivate struct Key: Hashable {
        let route: Route
        let status: Int
    }

    private let handles = NIOLockedValueBox<[Key: Handles]>([:])
    private let cacheHits = Counter(label: "tiler_cache_hits_total")
    private let cacheMisses = Counter(label: "tiler_cache_misses_total")
    private let storedTiles = Counter(label: "tiler_stored_tiles_total")
    private let connectionsCut = Counter(label: "tiler_connections_cut_total")
    private let buildsRunning = Gauge(label: "tiler_builds_running")
    private let buildsQueued = Gauge(label: "tiler_builds_queued")
    private let imagesFailed = Gauge(label: "tiler_images_failed")
    private let diskUsed = Gauge(label: "tiler_disk_bytes_used")
    private let diskLimit = Gauge(label: "tiler_disk_bytes_limit")
    private let cacheBytes = Gauge(label: "tiler_cache_bytes")
    private let connectionsOpen = Gauge(label: "tiler_connections_open")
    private let descriptorsOpen = Gauge(label: "tiler_descriptors_open")
    private let rendersRunning = Gauge(label: "tiler_renders_running")
    private let rendersWaiting = Gauge(label: "tiler_renders_waiting")
    private let renderMemory = Gauge(label: "tiler_render_memory_bytes")
    private let renderMemoryLimit = Gauge(label: "tiler_render_memory_limit_bytes")

    /// Handles made from `MetricsSystem.factory` as it is now: make the server after bootstrapping.
    public init() {}

    /// Counts an encoded image answered from the cache, or made.
    func cacheHit() { cacheHits.increment() }
    func cacheMiss() { cacheMisses.increment() }
    func storedTile() { storedTiles.increment() }
    /// Counts a connection cut for pipelining past the bound (``TileConnectionHandler/maximumWithApplication``):
    /// the requests after the bound are dropped unread, and the client sends them again on a new connection.
    func connectionCut() { connectionsCut.increment() }

    /// Records what is read when scraped: the catalog's health, the cache's bytes, open connections
    /// and descriptors, the renders running and waiting.
    func recordScrape(_ health: ImageCatalog.Health, cacheBytes bytes: Int, connections: Int, descriptors: Int, renders: RenderAdmission) {
        buildsRunning.record(health.buildsRunning)
        buildsQueued.record(health.buildsQueued)
        imagesFailed.record(health.imagesFailed)
        diskUsed.record(health.diskBytesUsed)
        diskLimit.record(health.diskBytesLimit)
        cacheBytes.record(bytes)
        connectionsOpen.record(connections)
        descriptorsOpen.record(descriptors)
        let usage = renders.usage
        rendersRunning.record(usage.running)
        rendersWaiting.record(usage.waiting)
        renderMemory.record(usage.footprint * 4)
        renderMemoryLimit.record(renders.limits.runningFootprint * 4)
    }

    /// Counts one answered request.
    func record(_ route: Route, status: Int, bytes: Int, nanoseconds: Int64) {
        var remembered: Remembered?
        record(route, status: status, bytes: bytes, nanoseconds: nanoseconds, remembered: &remembered)
    }

    /// The handles of one request's labels, kept by a caller that records one answer after another
    /// (a connection: its answers are mostly of one route and status), so that the shared table is
    /// looked up, under its lock, only when they change.
    struct Remembered {
        fileprivate let key: Key
        fileprivate let handles: Handles
    }

    /// ``record(_:status:bytes:nanoseconds:)``, with the handles `remembered` from the last call when its
    /// labels were the same (and left there for the next).
    func record(_ route: Route, status: Int, bytes: Int, nanoseconds: Int64, remembered: inout Remembered?) {
        let key = Key(route: route, status: status)
        if let remembered, remembered.key == key {
            return Self.record(remembered.handles, bytes: bytes, nanoseconds: nanoseconds)
        }
        let made = handles.withLockedValue { table in
            if let found = table[key] { return found }
            let made = Handles(
                requests: Counter(label: "tiler_requests_total", dimensions: [("route", route.rawValue), ("status", String(status))]),
                duration: CoreMetrics.Timer(label: "tiler_request_duration_seconds", dimensions: [("route", route.rawValue)]),
                bytes: Counter(label: "tiler_response_bytes_total", dimensions: [("route", route.rawValue)]))
            table[key] = made
            return made
        }
        remembered = Remembered(key: key, handles: made)
        Self.record(made, bytes: bytes, nanoseconds: nanoseconds)
    }

    private static func record(_ handles: Handles, bytes: Int, nanoseconds: Int64) {
        handles.requests.increment()
        handles.duration.recordNanoseconds(nanoseconds)
        if bytes > 0 { handles.bytes.increment(by: bytes) }
    }

    /// Counts a build that ended.
    static func recordBuild(outcome: String, duration: Duration) {
        Counter(label: "tiler_builds_total", dimensions: [("outcome", outcome)]).increment()
        let (seconds, attoseconds) = duration.components
        CoreMetrics.Timer(label: "tiler_build_duration_seconds").recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }

    /// One `operation` of the store shelf (`copy`, `publish`) and how it ended (`copied`, `absent`,
    /// `other_version`, `over_budget`, `published`, `failed`).
    static func recordShelf(_ operation: String, outcome: String) {
        Counter(label: "tiler_shelf_operations_total", dimensions: [("operation", operation), ("outcome", outcome)]).increment()
    }

    /// Open file descriptors of the process (entries of `/proc/self/fd`); blocking.
    static func openDescriptors() -> Int {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd"))?.count ?? 1) - 1
    }
}
