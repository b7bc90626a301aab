import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// Serves one file on 127.0.0.1 at a fixed rate (64 KiB slices on a schedule), for the download
/// scenarios. Runs in the parent benchmark process; the measured child downloads from it.
final class RateLimitedServer: Sendable {
    let port: Int
    private let channel: NIOAsyncChannel<NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>, Never>

    init(file: String, bytesPerSecond: Double) async throws {
        // Read slice by slice as it is served: the harness stays small, and a spawned child's
        // wait4 peak (which starts from the parent's high-water mark) stays meaningful.
        let data = try FileSlices(path: file)
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .bind(host: "127.0.0.1", port: 0) { child in
                child.eventLoop.makeCompletedFuture {
                    try child.pipeline.syncOperations.configureHTTPServerPipeline()
                    return try NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>(wrappingChannelSynchronously: child)
                }
            }
        port = channel.channel.localAddress?.port ?? 0
        let channel = self.channel
        Task {
            _ = try? await channel.executeThenClose { connections in
                await withDiscardingTaskGroup { group in
                    do {
                        for try await connection in connections {
                            group.addTask { try? await Self.serve(data, at: bytesPerSecond, on: connection) }
                        }
                    } catch {}
                }
            }
        }
    }

    func stop() async { try? await channel.channel.close() }

    private static func serve(
        _ data: FileSlices, at rate: Double, on connection: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>
    ) async throws {
        try await connection.executeThenClose { inbound, outbound in
            for try await part in inbound {
                guard case .head = part else { continue }
                let head = HTTPResponseHead(
                    version: .http1_1, status: .ok, headers: HTTPHeaders([("content-length", "\(data.count)")]))
                try await outbound.write(.head(head))
                let slice = 64 * 1024
                let start = ContinuousClock.now
                var offset = 0
                while offset < data.count {
                    let end = min(offset + slice, data.count)
                    try await Task.sleep(until: start + .seconds(Double(end) / rate), clock: .continuous)
                    try await outbound.write(.body(.byteBuffer(try data.bytes(offset..<end))))
                    offset = end
                }
                try await outbound.write(.end(nil))
            }
        }
    }
}

/// A file read by ranges with `pread`.
struct FileSlices: Sendable {
    let fd: Int32
    let count: Int

    init(path: String) throws {
        fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw BenchmarkError("cannot open \(path)") }
        count = Int(lseek(fd, 0, SEEK_END))
    }

    func bytes(_ range: Range<Int>) throws -> ByteBuffer {
        var buffer = ByteBuffer()
        let n = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: range.count) { raw in
            max(0, pread(fd, raw.baseAddress, range.count, off_t(range.lowerBound)))
        }
        guard n == range.count else { throw BenchmarkError("short read of the served file") }
        return buffer
    }
}
