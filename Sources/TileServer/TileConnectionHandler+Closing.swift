import NIOCore

// How a connection that must close (past the bound of pipelined requests, at a shutdown, once the
// client has closed its side) ends: after its last answer has reached the socket, and after a cut,
// lingering, so that the client reads every answer.
extension TileConnectionHandler {
    /// Closes the connection once what was written to it has reached the socket: `written` is the last
    /// write's promise (nil: an empty write is queued after the others), given the idle timeout at most
    /// (a client that takes nothing). After a cut, it closes lingering (``closeLingering(_:)``). Nothing
    /// read from now on is passed on. Called on the channel's event loop.
    func closeWhenWritten(_ written: EventLoopPromise<Void>?, _ context: ChannelHandlerContext) {
        guard !isClosing else { return }
        isClosing = true
        let written =
            written
            ?? {
                let promise = context.eventLoop.makePromise(of: Void.self)
                if let encoder { encoder.write(NIOAny(ByteBuffer()), promise: promise) } else { promise.succeed(()) }
                return promise
            }()
        context.flush()
        let loop = context.eventLoop.assumeIsolatedUnsafeUnchecked()
        closeDeadline = loop.scheduleTask(in: headTimeout) { context.close(promise: nil) }
        written.futureResult.assumeIsolatedUnsafeUnchecked().whenComplete { [self] _ in
            closeDeadline?.cancel()
            closeDeadline = nil
            if isCut { closeLingering(context) } else { context.close(promise: nil) }
        }
    }

    /// Closes the connection's sending side (the client reads the answers to their end, then the end of
    /// the stream), reads and drops what the client still sends, and closes the rest when the client
    /// closes its side, or when it has sent nothing for ``lingerTime`` (``longestLinger`` at most). A
    /// connection closed whole with bytes unread sends a reset instead, and the client's system may
    /// then drop the last answers it has not handed over yet (what nginx's `lingering_close` is for).
    func closeLingering(_ context: ChannelHandlerContext) {
        let closed = context.eventLoop.makePromise(of: Void.self)
        closed.futureResult.assumeIsolatedUnsafeUnchecked().whenFailure { _ in context.close(promise: nil) }
        context.close(mode: .output, promise: closed)
        lingerSince = .now()
        extendLinger(context)
        context.read()
    }

    /// While lingering, the bytes that came move the close on by ``lingerTime``, until ``longestLinger``.
    func extendLinger(_ context: ChannelHandlerContext) {
        guard lingerSince != .uptimeNanoseconds(0) else { return }
        lingerDeadline?.cancel()
        let deadline = min(NIODeadline.now() + Self.lingerTime, lingerSince + Self.longestLinger)
        lingerDeadline = context.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(deadline: deadline) { context.close(promise: nil) }
    }
}
