import NIOConcurrencyHelpers
import NIOCore
import Testing
@testable import TileNetwork

/// The read-ahead between a body and its decoder: parts in order, read while the consumer is busy,
/// never more than the limit ahead, the failure after the parts before it, the rest not read once the
/// consumer has what it needs.
@Suite("Reading a body ahead of its consumer")
struct ReadAheadTests {
    /// A body of `count` parts of `size` bytes (part i's bytes all i), counting the parts taken from it,
    /// and the most taken and not yet handed to the consumer (which counts them in `handed`) when one
    /// is taken; failing after `failAfter` parts when given.
    struct Body: AsyncSequence, Sendable {
        typealias Element = ByteBuffer
        let count: Int
        let size: Int
        var failAfter: Int?
        let taken = NIOLockedValueBox(0)
        let handed = NIOLockedValueBox(0)
        let mostAhead = NIOLockedValueBox(0)

        struct Broken: Error {}

        struct AsyncIterator: AsyncIteratorProtocol {
            let body: Body
            var index = 0
            mutating func next() async throws -> ByteBuffer? {
                try Task.checkCancellation()
                if let failAfter = body.failAfter, index == failAfter { throw Broken() }
                guard index < body.count else { return nil }
                defer { index += 1 }
                let taken = body.taken.withLockedValue {
                    $0 += 1; return $0
                }
                let ahead = taken - body.handed.withLockedValue { $0 }
                body.mostAhead.withLockedValue { $0 = Swift.max($0, ahead) }
                await Task.yield()
                return ByteBuffer(repeating: UInt8(truncatingIfNeeded: index), count: body.size)
            }
        }

        func makeAsyncIterator() -> AsyncIterator { AsyncIterator(body: self) }
    }

    @Test("every part, in order; read ahead while the consumer holds the first, up to the limit and no further")
    func ahead() async throws {
        let body = Body(count: 200, size: 64 << 10)
        let arrivedTotal = NIOLockedValueBox(0)
        // Said once the reader has gone past the limit (1 MiB, 16 parts) while the first part is held.
        let (past, signal) = AsyncStream.makeStream(of: Void.self)
        let arrived: @Sendable (Int) -> Void = { total in
            arrivedTotal.withLockedValue { $0 = total }
            if total >= (1 << 20) + (64 << 10) { signal.yield() }
        }
        var got: [UInt8] = []
        var first = true
        try await ReadAhead.consume(body, limit: 1 << 20, arrived: arrived) { part in
            body.handed.withLockedValue { $0 += 1 }
            if first {
                first = false
                var iterator = past.makeAsyncIterator()
                await iterator.next()
            }
            #expect(
                part.readableBytes == 64 << 10 && part.readableBytesView.first == UInt8(got.count) && part.readableBytesView.last == UInt8(got.count))
            got.append(UInt8(got.count))
            return false
        }
        #expect(got.count == 200 && body.taken.withLockedValue { $0 } == 200)
        // 16 parts past the one held arrived before it was let go (the signal); never further ahead than
        // the limit (16 parts held), the part the reader has in hand, and one the consumer has taken from
        // the queue but not yet counted in `handed` (the reader may take the next in between).
        let most = body.mostAhead.withLockedValue { $0 }
        #expect((16...18).contains(most), "\(most) parts taken ahead of the consumer")
    }

    @Test("a consumer that has what it needs: the rest is not read")
    func stopsEarly() async throws {
        let body = Body(count: 10_000, size: 4096)
        var parts = 0
        try await ReadAhead.consume(body, limit: 64 << 10) { _ in
            parts += 1
            return parts == 3
        }
        #expect(parts == 3)
        // The reader holds at most the limit (16 parts) and one in hand beyond the three taken.
        #expect(body.taken.withLockedValue { $0 } <= 3 + 16 + 1)
    }

    @Test("the body's failure comes after the parts before it; the consumer's own error ends the reading")
    func failures() async throws {
        let failing = Body(count: 100, size: 1000, failAfter: 5)
        var seen = 0
        await #expect(throws: Body.Broken.self) {
            try await ReadAhead.consume(failing, limit: 1 << 20) { _ in
                seen += 1
                return false
            }
        }
        #expect(seen == 5)
        struct Mine: Error {}
        let long = Body(count: 1_000_000, size: 100)
        await #expect(throws: Mine.self) { try await ReadAhead.consume(long, limit: 10_000) { _ in throw Mine() } }
        #expect(long.taken.withLockedValue { $0 } < 1000)
    }
}
