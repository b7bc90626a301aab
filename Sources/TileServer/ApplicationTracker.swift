import Logging
import NIOCore
import NIOHTTPTypes

/// What the two per-connection handlers share (both run on the connection's event loop).
final class ConnectionState {
    /// Requests handed to the application whose responses have not ended.
    var requestsWithApplication = 0
    /// A request handed to the application whose body has not ended.
    var isPassingRequestBody = false

    var isApplicationIdle: Bool { requestsWithApplication == 0 && !isPassingRequestBody }
}

/// Watches the requests the application answers (after NIO's HTTP decoder), and closes connections
/// that stay silent for the idle timeout (the job Hummingbird's connection state handler does for the
/// requests it sees, which does not see those ``CachedTileResponder`` answers). Installs the responder
/// and the idle timer at the front of the pipeline when it is added.
final class ApplicationTracker: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let state = ConnectionState()
    private let routes: TileRoutes
    private let logger: Logger?
    private let idleTimeout: TimeAmount

    init(routes: TileRoutes, logger: Logger?, idleTimeout: TimeAmount) {
        self.routes = routes
        self.logger = logger
        self.idleTimeout = idleTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        // Raw bytes first reach the idle timer, then the responder, then NIO's HTTP decoder.
        let responder = CachedTileResponder(routes: routes, state: state, logger: logger, idleTimeout: idleTimeout)
        try? context.pipeline.syncOperations.addHandler(responder, position: .first)
        try? context.pipeline.syncOperations.addHandler(IdleStateHandler(readTimeout: idleTimeout), position: .first)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            state.requestsWithApplication += 1
            state.isPassingRequestBody = true
        case .body: break
        case .end: state.isPassingRequestBody = false
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { state.requestsWithApplication = max(0, state.requestsWithApplication - 1) }
        context.write(data, promise: promise)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let idle = event as? IdleStateHandler.IdleStateEvent, idle == .read {
            // Silent for the idle timeout: close, unless the application is still answering a request
            // it has read whole (a render waiting for rows has its own deadline).
            if state.requestsWithApplication == 0 || state.isPassingRequestBody { context.close(promise: nil) }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }
}
