import Foundation
import Logging
import NIOCore
import NIOHTTPTypes
import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// Answers repeated tile requests from the bytes as they arrive, before NIO's HTTP decoder and the
/// router: a `GET` or `HEAD` (HTTP/1.1, no body) of an image of a complete pyramid (IIIF or DeepZoom)
/// that is in the routes' cache is written back at once, as the routes would answer it (200, or 304
/// on `If-None-Match`; the same headers). Every other request is passed on whole, unchanged.
///
/// Requests are answered in order: while a request of the connection is with the application, later
/// ones go to the application too. Anything it does not parse plainly (a chunked body, an obsolete
/// header continuation, a request line that is not `METHOD /target HTTP/1.1`, a head over 16 KiB)
/// passes the rest of the connection to NIO's decoder, which answers such requests as HTTP says.
final class CachedTileResponder: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let routes: TileRoutes
    private let state: ConnectionState
    private let logger: Logger?
    private let idleTimeout: TimeAmount
    /// The start of a head not complete yet, and since when it has been arriving.
    private var pending: ByteBuffer?
    private var pendingSince: NIODeadline?
    /// Body bytes of a request handed on that are still to come.
    private var bodyBytesToPass = 0
    /// Set when the responder stops parsing: the connection's bytes go to the decoder as they come.
    private var passesEverything = false
    /// The image this connection asked for last, and when the catalog handed it out: a viewer's
    /// connection asks for one image, so most lookups need no lock shared with other connections.
    private var recent: (id: Substring, image: TiledImage, at: ContinuousClock.Instant)?
    /// `Date: ...` and the blank line that ends a head, for this second.
    private var date: (second: Int, line: ByteBuffer) = (-1, ByteBuffer())

    static let maximumHeadBytes = 16384
    /// The fields every cached image has, as `TileRoutes.cachedImageHeaders` sets them.
    static let fixedFields =
        "Link: \(TileRoutes.profileLink)\r\nCache-Control: public, max-age=86400\r\nAccess-Control-Allow-Origin: *\r\nServer: tiler\r\n"

    init(routes: TileRoutes, state: ConnectionState, logger: Logger?, idleTimeout: TimeAmount) {
        self.routes = routes
        self.state = state
        self.logger = logger
        self.idleTimeout = idleTimeout
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !passesEverything else { return context.fireChannelRead(data) }
        var input = unwrapInboundIn(data)
        if var earlier = pending {
            earlier.writeBuffer(&input)
            input = earlier
            pending = nil
        }
        var answered = false
        while input.readableBytes > 0 {
            if bodyBytesToPass > 0 {
                let count = min(bodyBytesToPass, input.readableBytes)
                bodyBytesToPass -= count
                context.fireChannelRead(wrapInboundOut(input.readSlice(length: count)!))
                continue
            }
            guard let headLength = Self.headLength(input.readableBytesView) else {
                if input.readableBytes > Self.maximumHeadBytes { return passEverything(input, context) }
                // A head still arriving; one that takes longer than the idle timeout is closed.
                let now = NIODeadline.now()
                if let since = pendingSince, now - since > idleTimeout { return context.close(promise: nil) }
                pendingSince = pendingSince ?? now
                pending = input
                break
            }
            pendingSince = nil
            guard let head = RequestHead(input.readableBytesView.prefix(headLength)), !head.isChunked else {
                return passEverything(input, context)
            }
            if state.isApplicationIdle, head.contentLength == 0, let response = cachedResponse(head) {
                input.moveReaderIndex(forwardBy: headLength)
                context.write(wrapOutboundOut(response.head), promise: nil)
                context.write(wrapOutboundOut(response.date), promise: nil)
                if let body = response.body { context.write(wrapOutboundOut(body), promise: nil) }
                answered = true
                continue
            }
            // To the application: the head and its body as they come.
            context.fireChannelRead(wrapInboundOut(input.readSlice(length: headLength)!))
            bodyBytesToPass = head.contentLength
        }
        if answered { context.flush() }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let idle = event as? IdleStateHandler.IdleStateEvent, idle == .read, pending != nil {
            return context.close(promise: nil)  // a head that stopped arriving
        }
        context.fireUserInboundEventTriggered(event)
    }

    private func passEverything(_ input: ByteBuffer, _ context: ChannelHandlerContext) {
        passesEverything = true
        context.flush()  // answers written before this head go out first
        context.fireChannelRead(wrapInboundOut(input))
    }

    /// The bytes up to and including the blank line that ends a head, if it has arrived.
    static func headLength(_ bytes: ByteBufferView) -> Int? {
        var index = bytes.startIndex
        while index + 3 < bytes.endIndex {
            if bytes[index + 3] == 10, bytes[index + 2] == 13, bytes[index + 1] == 10, bytes[index] == 13 {
                return index + 4 - bytes.startIndex
            }
            index += 1
        }
        return nil
    }

    /// The serialized response to `head` when it asks for an image in the cache (its status line and
    /// fields, the date line that ends the head, and its body if it has one), else nil.
    private func cachedResponse(_ head: RequestHead) -> (head: ByteBuffer, date: ByteBuffer, body: ByteBuffer?)? {
        guard head.isGetOrHead, !head.closesConnection else { return nil }
        // "/dzi/{id}_files/{level}/{tile}" or "/iiif/3/{id}/{region}/{size}/{rotation}/{file}", no query.
        var path = head.target.utf8[...]
        if let query = path.firstIndex(of: UInt8(ascii: "?")) { path = path[..<query] }
        let id: Substring, variant: String
        if path.starts(with: "/dzi/".utf8) {
            let parts = path.dropFirst(5).split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
            guard parts.count == 3, parts[0].count > 6, parts[0].suffix(6).elementsEqual("_files".utf8) else { return nil }
            id = Substring(parts[0].dropLast(6))
            variant = "dzi/" + String(Substring(parts[1])) + "/" + String(Substring(parts[2]))
        } else if path.starts(with: "/iiif/3/".utf8) {
            let rest = path.dropFirst(8)
            guard let slash = rest.firstIndex(of: UInt8(ascii: "/")) else { return nil }
            let parameters = rest[rest.index(after: slash)...]
            guard parameters.count(where: { $0 == UInt8(ascii: "/") }) == 3 else { return nil }
            id = Substring(rest[..<slash])
            variant = String(Substring(parameters))
        } else {
            return nil
        }
        guard let image = readyImage(id), image.isComplete,
            let format = variant.split(separator: ".").last.flatMap({ ImageRequest.Format(rawValue: String($0)) })
        else { return nil }
        let key = routes.cacheKey(image: image, id: String(id), variant: variant)
        let body: ByteBuffer, stored: ByteBuffer?
        if let entry = routes.cache.entry(for: key) {
            (body, stored) = entry
        } else if let encoded = encodeStoredTile(image, variant: variant, key: key) {
            (body, stored) = (encoded, nil)
        } else {
            return nil
        }
        // The routes' headers for it (TileRoutes.cachedImageHeaders) with the server, made once and kept
        // with the image; this second's date line added per request.
        if let ifNoneMatch = head.ifNoneMatch, TileRoutes.matches(ifNoneMatch, TileRoutes.entityTag(key)) {
            var bytes = ByteBuffer()
            bytes.writeString("HTTP/1.1 304 Not Modified\r\nContent-Type: \(format.mediaType)\r\n")
            bytes.writeString("\(Self.fixedFields)ETag: \(TileRoutes.entityTag(key))\r\n")
            return (bytes, dateLine(), nil)
        }
        let prefix: ByteBuffer
        if let stored {
            prefix = stored
        } else {
            var made = ByteBuffer()
            made.writeString("HTTP/1.1 200 OK\r\nContent-Type: \(format.mediaType)\r\n\(Self.fixedFields)ETag: \(TileRoutes.entityTag(key))\r\n")
            made.writeString("Content-Length: \(body.readableBytes)\r\n")
            routes.cache.setHead(made, for: key)
            prefix = made
        }
        if let logger { logger.info("Request", metadata: ["hb.request.method": "\(head.isHead ? "HEAD" : "GET")", "hb.request.path": "\(head.target)", "cached": "true"]) }
        // Three buffers, none copied (the kept prefix and body are shared with the cache): one writev.
        return (prefix, dateLine(), head.isHead ? nil : body)
    }

    /// A stored tile asked for as it is (a JPEG of one tile of one level, upright), encoded here and now
    /// and kept in the cache: one read and one encode (a fraction of a millisecond), so it runs on the
    /// event loop, without the hops to a handler task and a render thread and back. Nil for anything
    /// else (other renders can take long: they go to the application and its render threads).
    private func encodeStoredTile(_ image: TiledImage, variant: String, key: String) -> ByteBuffer? {
        let tile: (level: Int, column: Int, row: Int, width: Int, height: Int)?
        let parts = variant.split(separator: "/")
        if parts.count == 3, parts[0] == "dzi" {  // dzi / level / column_row.jpg: integers only
            let name = parts[2].split(separator: ".")
            let indices = name.first?.split(separator: "_").compactMap { Int($0) } ?? []
            guard name.count == 2, name[1] == "jpg", indices.count == 2, let level = Int(parts[1]) else { return nil }
            tile = image.exactTile(deepZoomLevel: level, column: indices[0], row: indices[1])
        } else {
            guard parts.count == 4, let request = try? ImageRequest(path: variant),
                let resolved = try? request.resolve(width: image.geometry.width, height: image.geometry.height, limits: routes.limits),
                resolved.format == .jpg
            else { return nil }
            tile = image.exactTile(for: resolved)
        }
        // The size limits the application's resolve applies (a tile past them is its refusal to give).
        guard let tile, routes.limits.allows(tile.width, tile.height),
            let data = try? image.encodedTile(tile, quality: routes.jpegQuality)
        else { return nil }
        routes.cache.insert(data, for: key)
        return ByteBuffer(bytes: data)
    }

    /// The catalog's complete image named `id`, remembered for as long as the catalog trusts it.
    private func readyImage(_ id: Substring) -> TiledImage? {
        let now = ContinuousClock.now
        if let recent, recent.id == id, now - recent.at < ImageCatalog.sourceRecheckInterval { return recent.image }
        guard let image = routes.catalog.readyImage(String(id)) else { return nil }
        recent = (id, image, now)
        return image
    }

    /// `Date: ...` with the blank line that ends a head, made once a second.
    private func dateLine() -> ByteBuffer {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        if now.tv_sec != date.second { date = (now.tv_sec, ByteBuffer(string: "Date: \(Self.httpDate(now.tv_sec))\r\n\r\n")) }
        return date.line
    }

    /// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
    static func httpDate(_ seconds: Int) -> String {
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }
}
