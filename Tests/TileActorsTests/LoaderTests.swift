import NIOConcurrencyHelpers
import Foundation
import Testing
import TestTraits
import TileActors
import TestSupport
import TileCore

@Suite("ImageBuilder and ImageLoader", .ownThreads)
struct LoaderTests {
    static func inputs() throws -> [(String, Data)] {
        var list = try (0..<4).map { ("generated-\($0)", try Inputs.jpeg(width: 300 + 97 * $0, height: 260 + 31 * $0, seed: $0)) }
        for name in ["testorig.jpg", "Portrait_6.jpg", "video-001.q50.422.jpeg", "restarts.jpg"] {
            if let data = FileManager.default.contents(atPath: Inputs.corpusFolder.appendingPathComponent(name).path) {
                list.append((name, data))
            }
        }
        return list
    }

    @Test("a batch at concurrency 1, 2 and 4 gives tiles identical to sequential single builds", arguments: [1, 2, 4])
    func batchMatchesSequentialBuilds(concurrency: Int) async throws {
        let inputs = try Self.inputs()
        let expected = try inputs.map { try TileBuilder.build(data: $0.1).allTiles() }
        let sources: [any ImageSource] = inputs.map { ChunkSequenceSource(name: $0.0, chunks: Chunks(data: $0.1, size: 4096)) }
        let report = await ImageLoader(maximumConcurrency: concurrency).load(sources)
        #expect(report.images.count == inputs.count)
        for (i, result) in report.images.enumerated() {
            #expect(result.name == inputs[i].0)
            #expect(try result.result.get().allTiles() == expected[i], "\(result.name)")
            #expect(result.decodeTime > .zero)
        }
        #expect(report.wallTime > .zero)
    }

    /// A source that says its bytes come over a network, as the HTTP source does.
    struct NetworkLikeSource: ImageSource {
        let data: Data
        var name: String { "network-like" }
        var streamsOverNetwork: Bool { true }
        func feed(into builder: ImageBuilder) async throws {
            // The last scan's SOS marker (in entropy-coded data an 0xFF byte is followed by 0x00 or a
            // restart marker, never by 0xDA): its rows come out as it starts, and stop the previews.
            let bytes = [UInt8](data)
            let lastScan = try #require((0..<bytes.count - 1).last { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xDA })
            func send(_ range: Range<Int>) async throws {
                for offset in stride(from: range.lowerBound, to: range.upperBound, by: 4096) {
                    try await Task.sleep(for: .milliseconds(5))
                    try await builder.append(data[offset..<min(offset + 4096, range.upperBound)])
                }
            }
            try await send(0..<lastScan)
            // Bytes arrive slowly over a network: the previews, made on a thread of their own, are done
            // before the last scan comes. The source waits for one (as a slow network would, however
            // loaded the machine), and gives up after a minute, which the test then reports.
            let deadline = ContinuousClock.now + .seconds(60)
            while await builder.image?.previewScan == nil, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
            try await send(lastScan..<bytes.count)
        }
    }

    @Test("a progressive JPEG from a network source gets previews, reported in the progress stream; from a file, none")
    func previewsForNetworkSources() async throws {
        let data = try Synthetic.jpeg(.init(width: 1200, height: 900, progressive: true))
        let reports = NIOLockedValueBox<[Int: [ImageBuilder.Progress]]>([:])
        let sources: [any ImageSource] = [
            NetworkLikeSource(data: data), ChunkSequenceSource(name: "file-like", chunks: Chunks(data: data, size: 4096))
        ]
        let options = { () -> BuildOptions in
            var options = BuildOptions()
            options.levels = .count(6)
            return options
        }()
        let report = await ImageLoader(maximumConcurrency: 1).load(sources, options: { _ in options }) { index, progress in
            reports.withLockedValue { $0[index, default: []].append(progress) }
        }
        let expected = try TileBuilder.build(data: data, options: options).allTiles()
        for image in report.images { #expect(try image.result.get().allTiles() == expected) }
        let network = reports.withLockedValue { $0[0] ?? [] }
        let preview = try #require(network.first { $0.previewScan != nil }, "no progress report showed a preview")
        #expect(preview.levelTileRowsPreliminary[3] == 1 && preview.levelTileRowsComplete[3] == 0)
        #expect(reports.withLockedValue { $0[1] ?? [] }.allSatisfy { $0.previewScan == nil })
    }

    @Test("a failing image fails alone with its typed error")
    func failingImageFailsAlone() async throws {
        let good = try Inputs.jpeg(width: 200, height: 150)
        let sources: [any ImageSource] = [
            ChunkSequenceSource(name: "good", chunks: Chunks(data: good, size: 1000)),
            ChunkSequenceSource(name: "truncated", chunks: Chunks(data: good.prefix(good.count / 2), size: 1000)),
            ChunkSequenceSource(name: "garbage", chunks: Chunks(data: Data(repeating: 7, count: 5000), size: 1000)),
            FileImageSource(path: "/nonexistent/photo.jpg")
        ]
        let report = await ImageLoader(maximumConcurrency: 2).load(sources)
        #expect((try? report.images[0].result.get()) != nil)
        func code(_ i: Int) -> TileError.Code? { if case .failure(let e) = report.images[i].result { e.code } else { nil } }
        #expect(code(1) == .truncated)
        #expect(code(2) == .corrupt)
        #expect(code(3) == .io)
        #expect(report.failures.count == 3)
    }

    @Test("cancelling mid-stream leaves no file behind")
    func cancellationRemovesFiles() async throws {
        let folder = try Inputs.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let data = try Inputs.jpeg(width: 900, height: 700)
        var options = BuildOptions()
        options.storage = .persistent(path: folder.appendingPathComponent("a.tiles").path)
        let builder = try ImageBuilder(options: options)
        try await builder.append(data.prefix(data.count / 2))
        #expect(await builder.image != nil)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).count == 1)  // the staging folder
        await builder.cancel()
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty)
        await #expect(throws: TileError.self) { try await builder.append(data.suffix(10)) }
    }

    @Test("cancelling the task of build(from:) stops it and removes its files")
    func taskCancellation() async throws {
        let folder = try Inputs.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let data = try Inputs.jpeg(width: 900, height: 700)
        var options = BuildOptions()
        options.storage = .persistent(path: folder.appendingPathComponent("b.tiles").path)
        let builder = try ImageBuilder(options: options)
        let gate = Gate()
        let stalling = StallingChunks(data: data, stallAfter: 3, gate: gate)
        let task = Task { try await builder.build(from: stalling) }
        while await builder.image == nil { await Task.yield() }
        task.cancel()
        await gate.open()
        await #expect(throws: (any Error).self) { try await task.value }
        #expect(await builder.currentState == .cancelled)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty)
    }

    @Test("progress reports bytes, rows and tile rows, ending complete")
    func progressStream() async throws {
        let data = try Inputs.jpeg(width: 600, height: 600)
        let builder = try ImageBuilder()
        let image = try await builder.build(from: Chunks(data: data, size: 8192))
        var last: ImageBuilder.Progress?
        var decodingSeen = false
        for await p in builder.progress {
            if p.state == .decoding { decodingSeen = true }
            last = p
        }
        #expect(decodingSeen)
        #expect(last?.state == .complete)
        #expect(last?.bytesReceived == data.count)
        #expect(last?.rowsDecoded == 600)
        #expect(last?.levelTileRowsComplete == image.geometry.levels.map(\.rows))
        // The same last report, read without waiting for the actor (a status page's read).
        #expect(builder.latestProgress == last && last != nil)
    }
}

/// Chunks that stop after `stallAfter` chunks until a gate opens, then go on.
struct StallingChunks: AsyncSequence, Sendable {
    let data: Data
    let stallAfter: Int
    let gate: Gate
    struct AsyncIterator: AsyncIteratorProtocol {
        var inner: Chunks.AsyncIterator
        let stallAfter: Int
        let gate: Gate
        var count = 0
        mutating func next() async -> Data? {
            count += 1
            if count == stallAfter { await gate.wait() }
            return await inner.next()
        }
    }
    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(inner: Chunks(data: data, size: 4096).makeAsyncIterator(), stallAfter: stallAfter, gate: gate)
    }
}

@Suite("Sources stop at the end of the image", .ownThreads)
struct EndOfImageTests {
    @Test("a chunk sequence with 1000 chunks after the image is read only up to the marker")
    func chunkSourceStops() async throws {
        let jpeg = try JPEGEncoder.encode(pixels: [UInt8](repeating: 128, count: 32 * 32 * 4), width: 32, height: 32)
        let pulled = Counter()
        let chunks = AsyncStream<Data> { continuation in
            continuation.yield(jpeg)
            for _ in 0..<1000 { continuation.yield(Data(count: 64 * 1024)) }
            continuation.finish()
        }
        let counted = chunks.map { @Sendable chunk -> Data in
            pulled.increment()
            return chunk
        }
        let builder = try ImageBuilder()
        try await ChunkSequenceSource(name: "trail", chunks: counted).feed(into: builder)
        #expect(await builder.hasReachedEndOfImage)
        #expect(pulled.value <= 2, "\(pulled.value) chunks pulled")
        _ = try await builder.finish()
    }
}

/// A count shared with a sendable closure.
final class Counter: Sendable {
    private let count = NIOLockedValueBox(0)
    func increment() { count.withLockedValue { $0 += 1 } }
    var value: Int { count.withLockedValue { $0 } }
}
