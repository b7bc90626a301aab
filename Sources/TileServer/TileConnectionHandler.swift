import Foundation
import Logging
import NIOCore
import NIOHTTP1
import Synchronization

/// One connection's handler, right after NIO's HTTP/1.1 decoder (the only parser): it answers a
/// request for an image already in the ``TileService``'s cache (a target its event loop answered from
/// there before is found in the loop's ``AnswerMemo``, without reading its path), a tile (DeepZoom or IIIF) stored whole
/// in a TIFF pyramid whose bytes the page cache holds (``TileService/storedImage(path:keepsWhole:)``;
/// kept in the cache once asked for again), and
/// `/health`, at once, and passes every other request on to the application; and it closes the connection when it goes silent or
/// the server shuts down.
///
/// Answers keep the requests' order: while a request passed on is not answered yet, later ones are
/// passed on too. Only a plain `GET` or `HEAD` (HTTP/1.1, kept alive, no body, no `Upgrade`) of a
/// DeepZoom tile or an IIIF image is answered here, when the channel can take the answer now
/// (writable); the application answers the rest with backpressure of its own, at most
/// ``maximumWithApplication`` of them at once: past that the connection is cut. After a parse error
/// nothing more is answered here: NIO's decoder stops, and the application answers 400.
///
/// A connection waiting for a request must send a whole head within the idle timeout (however slowly
/// its bytes come); one silent for the idle timeout in a body, or between requests, is closed; so is
/// one that takes no answer for as long (a client that sends and never reads).
final class TileConnectionHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    let service: TileService
    let rules: RequestGuard
    private let recorder: RequestRecorder
    /// The peer's address as the access log writes it, made once per connection.
    private var client: String?
    let headTimeout: TimeAmount
    /// Since when the connection has waited for a request's head (nil while one is in progress); the
    /// server's ``ConnectionCounts`` see it through ``headWait`` once the channel is active (one not
    /// registered yet cannot be closed to make room: it is not counted as waiting).
    var waitingSince: NIODeadline? {
        didSet { headWait?.since.store(hasBeenActive ? waitingSince?.uptimeNanoseconds ?? 0 : 0, ordering: .relaxed) }
    }
    private var hasBeenActive = false
    private(set) var headWait: HeadWait?
    private let counts: ConnectionCounts?
    var headDeadline: Scheduled<Void>?
    private var writeDeadline: Scheduled<Void>?
    /// NIO's response encoder: a cached 200's prepared head and body are written below it, the bytes
    /// it would write for them (it is not paired with the decoder, so it keeps no per-request state;
    /// see ``TileHTTPChannel``).
    private(set) var encoder: ChannelHandlerContext?
    /// The last `Host` value the request guard allowed (a connection names one host).
    var allowedHost: String?
    /// Requests passed on to the application whose responses have not ended.
    private var requestsWithApplication = 0
    /// The methods of the requests passed on whose answers' heads have not been written, oldest first.
    private var applicationMethods = CircularBuffer<HTTPMethod>()
    /// The answer being written is a `HEAD`'s without a length (a render's, known without rendering):
    /// NIO's encoder, which is not told the methods, frames it as chunked, and its end is not written
    /// (the chunked terminator would be a body).
    private var endsWithoutBytes = false
    /// A request passed on whose body has not ended.
    private var isPassingBody = false
    /// A head that may be answered here once its end arrives, what its path names, and when it arrived.
    private var held: HTTPRequestHead?
    var heldAddress = TileAddress(path: "/health")
    /// The metrics' label of the held head's path.
    private var heldRoute = ServerMetrics.Route.health
    /// The metrics' handles of the last answer made here (``RequestRecorder``).
    private var metricHandles: ServerMetrics.Remembered?
    private var heldSince: NIODeadline = .uptimeNanoseconds(0)
    /// The held head's answer, found in the event loop's ``memo``.
    private var heldImage: EncodedImage?
    /// The event loop's index of cached answers (``AnswerMemo``).
    var memo: NIOLoopBoundBox<AnswerMemo>?
    private var closesWhenIdle = false
    private var hasFailed = false
    private var hasAnswered = false
    /// Whether a read was passed on since the last read completed: the application's handlers need
    /// the completion only then.
    private var hasPassedReads = false
    /// Whether the peer has closed its side (its renders are stopped: ``RenderAdmission/peerClosed(_:)``).
    private var peerHasClosed = false
    /// Whether more requests came pipelined than the application may hold (``maximumWithApplication``):
    /// nothing more is passed on (what comes is read and dropped), and the connection closes once those
    /// passed on are answered, lingering (``closeLingering(_:)``).
    var isCut = false
    /// Whether the connection closes once its last answer is written (``closeWhenWritten(_:_:)``): nothing
    /// read is passed on any more.
    var isClosing = false
    /// The end of that wait (the idle timeout), and of the linger after it.
    var closeDeadline: Scheduled<Void>?
    var lingerDeadline: Scheduled<Void>?
    var lingerSince: NIODeadline = .uptimeNanoseconds(0)
    var lastLingerRead: NIODeadline = .uptimeNanoseconds(0)

    /// The requests one connection may have with the application at once (pipelined behind one not
    /// answered yet). NIO's decoder hands over every request of a read at once (64 KiB: a thousand
    /// short requests), and each held costs the application about half a KiB: without a bound, a client
    /// that pipelines and never reads made each of its connections hold 650 KiB. Past it, the
    /// connection is closed after the answers to those passed on (RFC 9112 9.3.2: the client sends the
    /// rest again on a new connection). Browsers and caches do not pipeline.
    static let maximumWithApplication = 64
    /// How long a connection closed after its last answer waits for the client's next bytes, or for it
    /// to close its side; and at most in all (nginx's `lingering_timeout` and `lingering_time`).
    static let lingerTime = TimeAmount.seconds(5)
    static let longestLinger = TimeAmount.seconds(30)

    /// Restricted images: their requests go to the routes, which check the session (nil: none).
    let access: AccessPolicy?
    /// The identifier last looked up in ``access`` (as written) and whether a rule matched it: a
    /// connection asks for one image's tiles after another.
    var lastLookedUp: (id: String, isRestricted: Bool)?
    /// The ready image this connection's last cached answer was of (its tiles come one after another).
    var lastReady: ImageCatalog.ReadyLookup?
    /// This second's `Date` line, made again when the second changes (the connection's own copy of
    /// ``HTTPDate/line()``, whose lock the event loops would otherwise share on every answer).
    private var date = DateLine()

    init(
        service: TileService, rules: RequestGuard, recorder: RequestRecorder, headTimeout: TimeAmount, access: AccessPolicy? = nil,
        counts: ConnectionCounts? = nil
    ) {
        self.service = service
        self.counts = counts
        self.rules = rules
        self.access = access
        self.recorder = recorder
        self.headTimeout = headTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        encoder = try? context.pipeline.syncOperations.context(handlerType: HTTPResponseEncoder.self)
        memo = service.memos.memo(on: context.eventLoop)
        memo?.value.connectionOpened()
        if recorder.accessLog != nil { client = context.channel.remoteAddress?.ipAddress }
        if let counts {
            let wait = HeadWait(channel: context.channel)
            counts.add(wait)
            headWait = wait
        }
        hasBeenActive = context.channel.isActive
        // From now, active or not: an accepted connection is registered only once it has passed through the
        // server channel's pipeline, and one set up as that channel closes never is (the end of a server
        // stopped while clients connect drops it there), nor closed by anything else: its head's deadline
        // closes it, as it does any connection that sends nothing.
        waitForHead(context)
    }

    func channelActive(context: ChannelHandlerContext) {
        hasBeenActive = true
        waitForHead(context)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        if peerHasClosed { service.renders.connectionEnded(ObjectIdentifier(context.channel)) }
        if let headWait { counts?.remove(headWait) }
        memo?.value.connectionClosed()
        memo = nil
        encoder = nil
        headDeadline?.cancel()
        writeDeadline?.cancel()
        closeDeadline?.cancel()
        lingerDeadline?.cancel()
        (headDeadline, writeDeadline, closeDeadline, lingerDeadline) = (nil, nil, nil, nil)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        writeDeadline?.cancel()
        writeDeadline = nil
        if !context.channel.isWritable {
            // Answers pile up unread: the peer has the idle timeout to take some.
            writeDeadline = context.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(in: headTimeout) {
                if !context.channel.isWritable { context.close(promise: nil) }
            }
        }
        context.fireChannelWritabilityChanged()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !isCut, !isClosing else { return noteLingerRead() }
        switch unwrapInboundIn(data) {
        case .head(let head):
            waitingSince = nil
            // The path is read only when this handler could answer (nothing of the connection's is with
            // the application): what it passes on, the router reads.
            if requestsWithApplication == 0, !hasFailed, !closesWhenIdle, context.channel.isWritable, isPlain(head) {
                if let (image, route) = memorized(head.uri) {
                    (held, heldRoute, heldImage) = (head, route, image)
                    heldSince = .now()
                    return
                }
                let address = TileAddress(path: TileAddress.path(of: head.uri))
                if address.image != nil || head.uri == "/health", !isRestricted(address) {
                    (held, heldAddress, heldRoute) = (head, address, address.route)
                    heldSince = .now()
                    return
                }
            }
            if requestsWithApplication >= Self.maximumWithApplication {
                // This request and all after it are dropped unread; the answers to those passed on still go.
                (isCut, closesWhenIdle) = (true, true)
                service.metrics.connectionCut()
                return
            }
            pass(head, context)
        case .body:
            if let head = held { pass(head, context) }
            hasPassedReads = true
            context.fireChannelRead(data)
        case .end:
            if let head = held {
                if let image = heldImage {
                    service.metrics.cacheHit()
                    return answer(head, image, context)
                }
                guard let address = heldAddress.image else { return answer(head, Self.alive, context) }  // `/health`
                let path = TileAddress.pathString(of: head.uri)
                let removals = service.cache.removals  // before the look-up (``AnswerMemo``)
                if let image = service.cachedImage(path: path, remembered: &lastReady) {
                    memorize(image, for: head.uri, removals: removals)
                    return answer(head, image, context)
                }
                if let stored = service.storedTile(address) {
                    // A whole tile asked for again is kept in the cache (it is answered from memory from then on).
                    let isWhole = stored.isWhole
                    let isRepeated = isWhole && service.cache.isRepeated(path)
                    if encoder != nil, head.method == .GET, !Self.isConditional(head), isWhole, !isRepeated {
                        // Nil: the page cache does not hold the tile (the routes read it on the thread pool).
                        if let (response, bytes) = service.storedResponse(stored, dateLine: date.line()) {
                            return answer(head, response: response, bodyBytes: bytes, context)
                        }
                    } else if let image = service.storedImage(stored, path: path, keepsWhole: isRepeated) {
                        return answer(head, image, context)
                    }
                }
                pass(head, context)
            }
            isPassingBody = false
            hasPassedReads = true
            context.fireChannelRead(data)
        }
    }

    private func pass(_ head: HTTPRequestHead, _ context: ChannelHandlerContext) {
        (held, heldImage) = (nil, nil)
        requestsWithApplication += 1
        applicationMethods.append(head.method)
        isPassingBody = true
        hasPassedReads = true
        context.fireChannelRead(wrapInboundOut(.head(head)))
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if hasAnswered {
            hasAnswered = false
            context.flush()
        }
        // Nothing passed on (every request of the read answered here): the application's handlers
        // have nothing to deliver.
        if lingerDeadline != nil { context.read() }  // lingering: the application's reads are not waited for
        guard hasPassedReads else { return }
        hasPassedReads = false
        context.fireChannelReadComplete()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(let response):
            if response.status.code >= 200, let method = applicationMethods.popFirst() {
                endsWithoutBytes = method == .HEAD && !response.headers.contains(name: "content-length")
            }
            return context.write(data, promise: promise)
        case .body:
            return context.write(data, promise: promise)
        case .end:
            break
        }
        requestsWithApplication = max(0, requestsWithApplication - 1)
        let isIdle = requestsWithApplication == 0 && !isPassingBody && held == nil
        // The connection's last answer: it closes once the answer has reached the socket (a close drops
        // the writes still queued, the answers a client that reads slowly has not taken yet).
        let closes = isIdle && closesWhenIdle
        let written = closes ? context.eventLoop.makePromise(of: Void.self) : promise
        if closes, let promise { written?.futureResult.cascade(to: promise) }
        if endsWithoutBytes {
            endsWithoutBytes = false
            // Nothing to write for the end, but the close waits for what was written before it.
            if closes, let encoder { encoder.write(NIOAny(ByteBuffer()), promise: written) } else { written?.succeed(()) }
        } else {
            context.write(data, promise: written)
        }
        guard isIdle else { return }
        if closes { closeWhenWritten(written, context) } else { waitForHead(context) }
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard event is SendContinue else { return context.triggerUserOutboundEvent(event, promise: promise) }
        context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .continue))), promise: promise)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // Bytes after the last request passed on (past the bound, or while closing): dropped, as the
        // requests were; an answer to them would be paired with a request the client sends again.
        guard !isCut, !isClosing else { return noteLingerRead() }
        hasFailed = true
        if let head = held { pass(head, context) }  // it came before the bytes that failed: answered first
        context.fireErrorCaught(error)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case let idle as IdleStateHandler.IdleStateEvent where idle == .read:
            // Silent for the idle timeout: closed unless the application is answering a request it has
            // read whole (a render waiting for rows has a deadline of its own). Closing: its own deadlines.
            if !isClosing, requestsWithApplication == 0 || isPassingBody || held != nil { context.close(promise: nil) }
        case is ChannelShouldQuiesceEvent:
            if lingerDeadline != nil { return context.close(promise: nil) }
            closesWhenIdle = true
            if requestsWithApplication == 0 { closeWhenWritten(nil, context) }
        case ChannelEvent.inputClosed:
            // The peer hung up (or half-closed): what it asked is still answered, but a render stops.
            if !peerHasClosed { service.renders.peerClosed(ObjectIdentifier(context.channel)) }
            peerHasClosed = true
            if lingerDeadline != nil { return context.close(promise: nil) }  // after the last answer: the client is done too
            // A body cut short: the application says so. Otherwise nothing more comes: the answers to what
            // was asked go out whole, then the connection closes (the application, told, would close
            // it at once, dropping the answers still queued).
            guard !isPassingBody else { return context.fireUserInboundEventTriggered(event) }
            closesWhenIdle = true
            if requestsWithApplication == 0 { closeWhenWritten(nil, context) }
        case ChannelEvent.outputClosed where !isClosing:
            // The application closed the sending side (it answered `Connection: close`): nothing more is
            // answered, what the client still sends is read and dropped until it closes or goes silent.
            startLinger(context)
            context.fireUserInboundEventTriggered(event)
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    /// `/health`'s answer: the process is alive and its event loops answer (nothing else is looked at).
    static let alive = EncodedImage(
        body: ByteBuffer(string: "ok\n"), head: ImageHead(mediaType: "text/plain; charset=utf-8", cacheControl: "no-store"))

    /// Whether `head` asks for a 304 when the client has the answer.
    private static func isConditional(_ head: HTTPRequestHead) -> Bool {
        head.headers.contains(name: "if-none-match") || head.headers.contains(name: "if-modified-since")
    }

    /// Writes a whole 200 answer to a plain `GET` made in one buffer (``TileService/storedResponse(_:dateLine:)``).
    private func answer(_ head: HTTPRequestHead, response: ByteBuffer, bodyBytes: Int, _ context: ChannelHandlerContext) {
        answering(head, status: 200, bodyBytes: bodyBytes, context)
        encoder?.write(NIOAny(response), promise: nil)
    }

    /// What every answer made here does first: the connection waits for the next head, the answer is
    /// flushed at the read's end, logged and counted as the routes' answers are.
    private func answering(_ head: HTTPRequestHead, status: Int, bodyBytes: Int, _ context: ChannelHandlerContext) {
        (held, heldImage) = (nil, nil)
        hasAnswered = true
        waitForHead(context)
        recorder.record(
            heldRoute, client: client, method: head.method.rawValue, target: head.uri,
            version: (head.version.major, head.version.minor), status: status, bytes: bodyBytes, since: heldSince,
            referer: head.headers.first(name: "referer"), userAgent: head.headers.first(name: "user-agent"), remembered: &metricHandles)
    }

    /// Writes the routes' answer to `head` from the cache: 200 (no body for `HEAD`), or 304 when the
    /// request's `If-None-Match` or `If-Modified-Since` says the client has it.
    private func answer(_ head: HTTPRequestHead, _ image: EncodedImage, _ context: ChannelHandlerContext) {
        let notModified =
            image.entityTag != nil && Self.isConditional(head)
            && TileRoutes.isNotModified(
                head.headers["if-none-match"], ifModifiedSince: head.headers.first(name: "if-modified-since"), entityTag: image.entityTag,
                lastModified: image.lastModified)
        let sent = head.method == .GET && !notModified ? image.body.readableBytes : 0
        answering(head, status: notModified ? 304 : 200, bodyBytes: sent, context)
        guard let encoder else { return }
        if notModified {
            var response = context.channel.allocator.buffer(capacity: 512)
            image.head.write(notModified: true, contentLength: image.body.readableBytes, into: &response)
            response.writeImmutableBuffer(date.line())
            encoder.write(NIOAny(response), promise: nil)
            return
        }
        // The prepared head, this second's date line, the body: three shared buffers, one writev.
        encoder.write(NIOAny(image.responseHead), promise: nil)
        encoder.write(NIOAny(date.line()), promise: nil)
        if head.method == .GET { encoder.write(NIOAny(image.body), promise: nil) }
    }
}
