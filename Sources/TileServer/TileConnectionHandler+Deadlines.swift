import NIOCore

// How long a connection may wait for a request's head: the head's deadline, one timer at a time.
extension TileConnectionHandler {
    /// Starts the wait for the next head: closed at `headTimeout` unless one arrives whole. One timer
    /// at a time, moved on when it fires early.
    func waitForHead(_ context: ChannelHandlerContext) {
        let now = NIODeadline.now()
        waitingSince = now
        guard headDeadline == nil else { return }
        scheduleHeadDeadline(at: now + headTimeout, context)
    }

    private func scheduleHeadDeadline(at deadline: NIODeadline, _ context: ChannelHandlerContext) {
        headDeadline = context.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(deadline: deadline) { [self] in
            headDeadline = nil
            guard let since = waitingSince else { return }
            if NIODeadline.now() >= since + headTimeout {
                context.close(promise: nil)
            } else {
                scheduleHeadDeadline(at: since + headTimeout, context)
            }
        }
    }
}
