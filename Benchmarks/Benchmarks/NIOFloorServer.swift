import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// `nio-floor`: the least a SwiftNIO HTTP/1.1 server does for a warm tile, the floor under our
/// connection handler. Every file under the input folder is read into memory at start with its 200
/// head made once; each request is read by NIO's HTTP/1.1 decoder (the server's only parser) and
/// answered by the prepared head, this second's `Date` line and the body, written below any encoder
/// and flushed at the read's end, on one event loop per core, as `TileConnectionHandler` answers a
/// cached image. No routing, no cache policy, no access log, no metrics: what is left is NIO's
/// pipeline, the parser and the kernel's share, which no change of ours can go under.
enum NIOFloorServer {
    /// Serves `root`'s files at `/dzi/{path}` on a free loopback port, written to `report` once it
    /// listens; runs until killed.
    static func serve(root: String, report: String) async throws {
        var answers: [String: Answer] = [:]
        let base = URL(fileURLWithPath: root).standardizedFileURL.path
        let files = FileManager.default.enumerator(atPath: base)
        while let relative = files?.nextObject() as? String {
            var isFolder: ObjCBool = false
            let path = "\(base)/\(relative)"
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), !isFolder.boolValue,
                let data = FileManager.default.contents(atPath: path)
            else { continue }
            var head = ByteBuffer()
            head.writeString("HTTP/1.1 200 OK\r\nContent-Type: image/jpeg\r\nContent-Length: \(data.count)\r\n")
            answers["/dzi/\(relative)"] = Answer(head: head, body: ByteBuffer(bytes: data))
        }
        let table = answers
        let group = MultiThreadedEventLoopGroup(numberOfThreads: System.coreCount)
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 1024)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes)))
                    try channel.pipeline.syncOperations.addHandler(Handler(answers: table))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        try "\(channel.localAddress?.port ?? 0)\n".write(toFile: report, atomically: true, encoding: .utf8)
        try await channel.closeFuture.get()
    }

    struct Answer {
        var head: ByteBuffer
        var body: ByteBuffer
    }

    /// Answers each request's end from the table (404 without a body for a path it lacks).
    final class Handler: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = ByteBuffer

        private let answers: [String: Answer]
        private var uri = ""
        private var hasAnswered = false
        /// `Date: …\r\n\r\n` and the second it says (made again once a second per connection).
        private var dateLine = ByteBuffer()
        private var dateSecond = 0
        private static let notFound = ByteBuffer(string: "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")

        init(answers: [String: Answer]) { self.answers = answers }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head): uri = head.uri
            case .body: break
            case .end:
                hasAnswered = true
                guard let answer = answers[uri] else {
                    context.write(wrapOutboundOut(Self.notFound), promise: nil)
                    return
                }
                context.write(wrapOutboundOut(answer.head), promise: nil)
                context.write(wrapOutboundOut(currentDateLine()), promise: nil)
                context.write(wrapOutboundOut(answer.body), promise: nil)
            }
        }

        private func currentDateLine() -> ByteBuffer {
            var now = time(nil)
            guard now != dateSecond else { return dateLine }
            var fields = tm()
            gmtime_r(&now, &fields)
            var text = [CChar](repeating: 0, count: 64)
            strftime(&text, text.count, "%a, %d %b %Y %H:%M:%S GMT", &fields)
            (dateSecond, dateLine) = (now, ByteBuffer(string: "Date: \(String(cString: text))\r\n\r\n"))
            return dateLine
        }

        func channelReadComplete(context: ChannelHandlerContext) {
            guard hasAnswered else { return }
            hasAnswered = false
            context.flush()
        }
    }
}
