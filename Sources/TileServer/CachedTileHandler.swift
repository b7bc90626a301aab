import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HTTPTypes
import Logging
import NIOCore
import NIOHTTPTypes
import TileCore

/// Answers repeated tile requests on the connection's event loop, before the router: a `GET` or `HEAD`
/// of an image (IIIF or DeepZoom) of a complete pyramid, already encoded and in the routes' cache, is
/// written back at once (200, or 304 on `If-None-Match`), with the same headers the routes give it.
/// Everything else goes on to the application unchanged.
///
/// Requests are answered in order: while a request of the connection is with the application (its
/// response not yet written), later ones go to the application too. The handler also closes connections
/// that stay silent for the idle timeout (no request, or a request or body that stalls), the job
/// Hummingbird's connection state handler does for the requests it sees, which does not see these.
final class CachedTileHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let routes: TileRoutes
    private let logger: Logger?
    /// Requests passed on whose responses have not ended.
    private var requestsWithApplication = 0
    /// A request passed on whose body has not ended.
    private var isPassingRequestBody = false
    /// A request answered here whose (empty) body and end are still to be read and dropped.
    private var isDroppingRequest = false
    /// The image this connection asked for last, and when the catalog handed it out: a viewer's
    /// connection asks for one image, so most lookups need no lock shared with other connections.
    private var recent: (id: Substring, image: TiledImage, at: ContinuousClock.Instant)?
    /// The `Date` header of this second.
    private var date: (second: Int, value: String) = (-1, "")
    // A cached answer goes through NIO's HTTP/1 encoder like any other (not as bytes written past it):
    // the encoder pairs each response with its request's method (a HEAD's response has no body).

    init(routes: TileRoutes, logger: Logger?) {
        self.routes = routes
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        switch part {
        case .head(let head):
            if requestsWithApplication == 0, let response = cachedResponse(head) {
                isDroppingRequest = true
                write(response, head: head, context: context)
                return
            }
            requestsWithApplication += 1
            isPassingRequestBody = true
        case .body:
            if isDroppingRequest { return }
        case .end:
            if isDroppingRequest {
                isDroppingRequest = false
                return
            }
            isPassingRequestBody = false
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { requestsWithApplication = max(0, requestsWithApplication - 1) }
        context.write(data, promise: promise)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let idle = event as? IdleStateHandler.IdleStateEvent, idle == .read {
            // Silent for the idle timeout: close, unless the application is still answering a request
            // it has read whole (a render waiting for rows has its own deadline).
            if requestsWithApplication == 0 || isPassingRequestBody || isDroppingRequest { context.close(promise: nil) }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    private func write(_ response: (head: HTTPResponse, body: Data), head request: HTTPRequest, context: ChannelHandlerContext) {
        context.write(wrapOutboundOut(.head(response.head)), promise: nil)
        if request.method != .head, !response.body.isEmpty {
            context.write(wrapOutboundOut(.body(ByteBuffer(bytes: response.body))), promise: nil)
        }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        logger?.info("Request", metadata: ["hb.request.method": "\(request.method)", "hb.request.path": "\(request.path ?? "")", "cached": "true"])
    }

    /// The response to `request` when it is a tile in the cache, else nil.
    private func cachedResponse(_ request: HTTPRequest) -> (head: HTTPResponse, body: Data)? {
        guard request.method == .get || request.method == .head, var path = request.path?.utf8[...] else { return nil }
        // A client that asks to close after the response gets it from the application, which does.
        if let connection = request.headerFields[.connection], connection.lowercased().contains("close") { return nil }
        if let query = path.firstIndex(of: UInt8(ascii: "?")) { path = path[..<query] }
        let parts = path.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).map { Substring($0) }
        // "" / "dzi" / "{id}_files" / level / tile, or "" / "iiif" / "3" / id / region / size / rotation / file.
        let id: Substring, variant: String
        if parts.count == 5, parts[0].isEmpty, parts[1] == "dzi", parts[2].hasSuffix("_files") {
            (id, variant) = (parts[2].dropLast(6), "dzi/\(parts[3])/\(parts[4])")
        } else if parts.count == 8, parts[0].isEmpty, parts[1] == "iiif", parts[2] == "3" {
            (id, variant) = (parts[3], parts[4...].joined(separator: "/"))
        } else {
            return nil
        }
        guard let image = readyImage(id), image.isComplete,
            let format = variant.split(separator: ".").last.flatMap({ ImageRequest.Format(rawValue: String($0)) })
        else { return nil }
        let key = routes.cacheKey(image: image, id: String(id), variant: variant)
        guard let body = routes.cache.data(for: key) else { return nil }
        var headers = routes.cachedImageHeaders(key: key, mediaType: format.mediaType)
        headers[.date] = currentDate()
        headers[.server] = "tiler"
        if let ifNoneMatch = request.headerFields[.ifNoneMatch], TileRoutes.matches(ifNoneMatch, headers[.eTag] ?? "") {
            return (HTTPResponse(status: .notModified, headerFields: headers), Data())
        }
        headers[.contentLength] = String(body.count)
        return (HTTPResponse(status: .ok, headerFields: headers), body)
    }

    /// The catalog's complete image named `id`, remembered for as long as the catalog trusts it.
    private func readyImage(_ id: Substring) -> TiledImage? {
        let now = ContinuousClock.now
        if let recent, recent.id == id, now - recent.at < ImageCatalog.sourceRecheckInterval { return recent.image }
        guard let image = routes.catalog.readyImage(String(id)) else { return nil }
        recent = (id, image, now)
        return image
    }

    private func currentDate() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        if now.tv_sec != date.second { date = (now.tv_sec, Self.httpDate(Date(timeIntervalSince1970: TimeInterval(now.tv_sec)))) }
        return date.value
    }

    /// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
    static func httpDate(_ date: Date) -> String {
        var time = time_t(date.timeIntervalSince1970)
        var parts = tm()
        gmtime_r(&time, &parts)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }
}
