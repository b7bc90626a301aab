import NIOCore
import Synchronization

// How a connection that must close (past the bound of pipelined requests, at a shutdown, once the
// client has closed its side) ends: after its last answer has reached the socket, and after a cut,
// lingering, so that the client reads every answer.
extension TileConnectionHandler {
    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        // The application's half-close (an answer with `Connection: close`) waits for its answers to be
        // taken: given the idle timeout, as a closing connection's last answer is; then a linger.
        if mode == .output, closeDeadline == nil, lingerDeadline == nil {
            closeDeadline = context.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(in: headTimeout) { context.close(promise: nil) }
        }
        context.close(mode: mode, promise: promise)
    }

    /// Closes the connection once what was written to it has reached the socket: `written` is the last
    /// write's promise (nil: an empty write is queued after the others), given the idle timeout at most
    /// (a client that takes nothing). After a cut, it closes lingering (``closeLingering(_:)``). Nothing
    /// read from now on is passed on. Called on the channel's event loop, as all of these.
    func closeWhenWritten(_ written: EventLoopPromise<Void>?, _ context: ChannelHandlerContext) {
        guard !isClosing else { return }
        isClosing = true
        headDeadline?.cancel()
        (headDeadline, waitingSince) = (nil, nil)
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
    /// the stream), then lingers (``startLinger(_:)``). A connection closed whole with bytes unread sends
    /// a reset instead, and the client's system may then drop the last answers it has not handed over
    /// yet (what nginx's `lingering_close` is for).
    func closeLingering(_ context: ChannelHandlerContext) {
        let closed = context.eventLoop.makePromise(of: Void.self)
        closed.futureResult.assumeIsolatedUnsafeUnchecked().whenFailure { _ in context.close(promise: nil) }
        context.close(mode: .output, promise: closed)
        startLinger(context)
    }

    /// Reads and drops what the client still sends, and closes the connection when the client closes its
    /// side, or has sent nothing for ``lingerTime`` (``longestLinger`` at most).
    func startLinger(_ context: ChannelHandlerContext) {
        isClosing = true
        headDeadline?.cancel()
        closeDeadline?.cancel()
        (headDeadline, waitingSince, closeDeadline) = (nil, nil, nil)
        lingerSince = .now()
        lastLingerRead = lingerSince
        // Under the connection limit, a lingering connection may be closed to make room as one waiting is.
        headWait?.since.store(lingerSince.uptimeNanoseconds, ordering: .relaxed)
        scheduleLingerEnd(at: lingerSince + Self.lingerTime, context)
        // Read on even when the application reads no more (its queue full of requests it will not answer).
        context.read()
    }

    /// One timer, moved on when it fires early (the client's bytes came meanwhile: ``noteLingerRead()``).
    private func scheduleLingerEnd(at deadline: NIODeadline, _ context: ChannelHandlerContext) {
        lingerDeadline = context.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(deadline: deadline) { [self] in
            let end = min(lastLingerRead + Self.lingerTime, lingerSince + Self.longestLinger)
            if NIODeadline.now() >= end { context.close(promise: nil) } else { scheduleLingerEnd(at: end, context) }
        }
    }

    /// While lingering, the client's bytes (or the errors its bytes made) move the close on.
    func noteLingerRead() {
        guard lingerDeadline != nil else { return }
        lastLingerRead = .now()
        // Not closed to make room while the client still sends (a reset would drop its last answers).
        headWait?.since.store(lastLingerRead.uptimeNanoseconds, ordering: .relaxed)
    }
}
