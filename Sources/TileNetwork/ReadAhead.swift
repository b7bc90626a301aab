import NIOConcurrencyHelpers
import NIOCore

/// A response body read ahead of its consumer, up to a number of bytes: the download goes on while the
/// consumer (a decoder, a tiler) is busy with the bytes before, so that a pause of the consumer's does
/// not pause the transfer (a paced server, or TCP's window, never gives back the time lost). Memory is
/// bounded by `limit` held between them, and the part each of them has in hand.
enum ReadAhead {
    /// Reads `body` in a task of its own, at most `limit` bytes ahead, and hands each part to `each`, in
    /// order, until `each` returns `true` (the rest is not read: the transfer is cancelled) or the body
    /// ends. The body's failure is thrown after the parts read before it are handed over. `arrived` is
    /// called in the reading task as each part arrives, with the bytes arrived so far.
    static func consume<Body: AsyncSequence & Sendable>(
        _ body: Body, limit: Int, arrived: (@Sendable (Int) -> Void)? = nil, _ each: (ByteBuffer) async throws -> Bool
    ) async throws where Body.Element == ByteBuffer {
        let queue = BoundedQueue(limit: limit)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                do {
                    var total = 0
                    for try await buffer in body {
                        total += buffer.readableBytes
                        arrived?(total)
                        try await queue.push(buffer)
                    }
                    queue.finish(nil)
                } catch {
                    queue.finish(error)
                }
            }
            var stopped = false
            while let buffer = try await queue.next() {
                stopped = try await each(buffer)
                if stopped { break }
            }
            // A body that ends quietly when its task is cancelled has not ended.
            if !stopped { try Task.checkCancellation() }
            group.cancelAll()
        }
    }

    /// Parts between one producer and one consumer, at most `limit` bytes of them held (a part larger
    /// than `limit` alone when none is).
    final class BoundedQueue: Sendable {
        private struct State {
            var parts = CircularBuffer<ByteBuffer>()
            var bytes = 0
            var isFinished = false
            var failure: (any Error)?
            var isCancelled = false
            var consumer: CheckedContinuation<Void, Never>?
            var producer: CheckedContinuation<Void, Never>?
        }

        private let state = NIOLockedValueBox(State())
        let limit: Int

        init(limit: Int) {
            precondition(limit > 0, "a read-ahead holds at least one byte")
            self.limit = limit
        }

        /// Adds `buffer`, first waiting while `limit` bytes are held.
        /// - Throws: `CancellationError` when the producer's task is cancelled.
        func push(_ buffer: ByteBuffer) async throws {
            while true {
                try Task.checkCancellation()
                let (added, consumer) = state.withLockedValue { s -> (Bool, CheckedContinuation<Void, Never>?) in
                    guard s.bytes == 0 || s.bytes + buffer.readableBytes <= limit else { return (false, nil) }
                    s.parts.append(buffer)
                    s.bytes += buffer.readableBytes
                    defer { s.consumer = nil }
                    return (true, s.consumer)
                }
                consumer?.resume()
                if added { return }
                await withTaskCancellationHandler {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        let now = state.withLockedValue { s -> Bool in
                            if s.bytes == 0 || s.bytes + buffer.readableBytes <= limit || s.isCancelled { return true }
                            s.producer = continuation
                            return false
                        }
                        if now { continuation.resume() }
                    }
                } onCancel: {
                    let producer = state.withLockedValue { s -> CheckedContinuation<Void, Never>? in
                        s.isCancelled = true
                        defer { s.producer = nil }
                        return s.producer
                    }
                    producer?.resume()
                }
            }
        }

        /// Ends the parts: with `failure`, thrown by ``next()`` once the parts before it are taken.
        func finish(_ failure: (any Error)?) {
            let consumer = state.withLockedValue { s -> CheckedContinuation<Void, Never>? in
                (s.isFinished, s.failure) = (true, failure)
                defer { s.consumer = nil }
                return s.consumer
            }
            consumer?.resume()
        }

        /// The next part, waiting for one; nil at the end.
        func next() async throws -> ByteBuffer? {
            while true {
                enum Step {
                    case part(ByteBuffer, CheckedContinuation<Void, Never>?)
                    case end((any Error)?)
                    case wait
                }
                let step = state.withLockedValue { s -> Step in
                    if let part = s.parts.popFirst() {
                        s.bytes -= part.readableBytes
                        defer { s.producer = nil }
                        return .part(part, s.producer)
                    }
                    return s.isFinished ? .end(s.failure) : .wait
                }
                switch step {
                case .part(let part, let producer):
                    producer?.resume()
                    return part
                case .end(let failure):
                    if let failure { throw failure }
                    return nil
                case .wait:
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        let now = state.withLockedValue { s -> Bool in
                            if !s.parts.isEmpty || s.isFinished { return true }
                            s.consumer = continuation
                            return false
                        }
                        if now { continuation.resume() }
                    }
                }
            }
        }
    }
}
