public import TileCore

/// Loads several images at once, each into its own ``ImageBuilder``, at most ``maximumConcurrency`` at a
/// time (the rest wait, in order).
///
/// Reports each image's decode time (CPU time in the decoder, not time waiting for bytes) and wall
/// time, and for the batch the time from the first start to the last finish and the average decode
/// time. A failing image fails alone. Cancelling the task that awaits ``load(_:options:onProgress:)`` cancels the
/// batch; ``cancel(_:)`` cancels one image. A cancelled or failed image leaves no file behind.
public actor ImageLoader {
    /// The outcome of one image.
    public struct ImageResult: Sendable {
        /// Index of the source in the batch.
        public var index: Int
        public var name: String
        public var result: Result<TiledImage, TileError>
        /// CPU time spent decoding and tiling on the builder's thread.
        public var decodeTime: Duration
        /// From this image's start to its end.
        public var wallTime: Duration
        /// Corrupt-data warnings, and the last one's text.
        public var warningCount = 0
        public var lastWarning: String?
    }

    /// The outcome of a batch.
    public struct BatchReport: Sendable {
        /// One result per source, in the sources' order.
        public var images: [ImageResult]
        /// From the first start to the last finish.
        public var wallTime: Duration
        /// Mean of the images' decode times.
        public var averageDecodeTime: Duration
        public var failures: [ImageResult] { images.filter { if case .failure = $0.result { true } else { false } } }
    }

    public let maximumConcurrency: Int
    private let budget: DiskCacheBudget?
    private var builders: [Int: ImageBuilder] = [:]
    private var cancelled: Set<Int> = []

    /// - Parameters:
    ///   - maximumConcurrency: images built at once, at least 1 (default 4).
    ///   - budget: the disk budget every build registers with, if any.
    public init(maximumConcurrency: Int = 4, budget: DiskCacheBudget? = nil) {
        self.maximumConcurrency = max(1, maximumConcurrency)
        self.budget = budget
    }

    /// Loads every source.
    /// - Parameters:
    ///   - sources: the images, started in this order.
    ///   - options: the build options of the image at each index (e.g. its own persistent store).
    ///   - onProgress: called with an image's index and each of its progress reports, if given.
    public func load(
        _ sources: [any ImageSource], options: @Sendable (Int) -> BuildOptions = { _ in BuildOptions() },
        onProgress: (@Sendable (Int, ImageBuilder.Progress) -> Void)? = nil
    ) async -> BatchReport {
        let clock = ContinuousClock()
        let start = clock.now
        // Indices name images of this batch only: cancellations of an earlier batch do not carry over.
        cancelled = []
        defer { cancelled = [] }
        var results: [ImageResult?] = Array(repeating: nil, count: sources.count)
        await withTaskGroup(of: ImageResult.self) { group in
            var next = 0
            func startNext() {
                guard next < sources.count else { return }
                let index = next
                next += 1
                let source = sources[index]
                let buildOptions = options(index)
                group.addTask { await self.loadOne(source, index: index, options: buildOptions, onProgress: onProgress) }
            }
            for _ in 0..<min(maximumConcurrency, sources.count) { startNext() }
            for await result in group {
                results[result.index] = result
                startNext()
            }
        }
        let images = results.compactMap { $0 }
        let total = images.reduce(Duration.zero) { $0 + $1.decodeTime }
        return BatchReport(
            images: images, wallTime: clock.now - start,
            averageDecodeTime: images.isEmpty ? .zero : total / images.count)
    }

    /// Cancels one image of a running batch by its index: its build stops and its files are removed.
    public func cancel(_ index: Int) async {
        cancelled.insert(index)
        await builders[index]?.cancel()
    }

    private func loadOne(
        _ source: any ImageSource, index: Int, options: BuildOptions,
        onProgress: (@Sendable (Int, ImageBuilder.Progress) -> Void)?
    ) async -> ImageResult {
        let clock = ContinuousClock()
        let start = clock.now
        let builder: ImageBuilder
        var options = options
        if options.preview == .automatic {
            options.preview = .afterScans(options.preview.scanCount(streaming: source.streamsOverNetwork))
        }
        do { builder = try ImageBuilder(options: options, budget: budget, sourcePath: source.filePath) } catch {
            return ImageResult(index: index, name: source.name, result: .failure(error), decodeTime: .zero, wallTime: .zero)
        }
        builders[index] = builder
        if cancelled.contains(index) { await builder.cancel() }
        defer { builders[index] = nil }
        guard let onProgress else { return await build(builder, from: source, index: index, start: start) }
        // The watcher is a child task: every report is delivered before this image's result is.
        return await withTaskGroup(of: Void.self) { group in
            group.addTask { for await p in builder.progress { onProgress(index, p) } }
            let result = await build(builder, from: source, index: index, start: start)
            builder.endProgressReports()
            await group.waitForAll()
            return result
        }
    }

    private func build(_ builder: ImageBuilder, from source: any ImageSource, index: Int, start: ContinuousClock.Instant)
        async -> ImageResult
    {
        let clock = ContinuousClock()
        let result: Result<TiledImage, TileError>
        do {
            try await source.feed(into: builder)
            result = .success(try await builder.finish())
        } catch let error as TileError {
            await builder.fail(error)
            result = .failure(error)
        } catch let error as any TileErrorConvertible {
            await builder.fail(error.tileError)
            result = .failure(error.tileError)
        } catch is CancellationError {
            await builder.cancel()
            result = .failure(TileError(.cancelled, "the load was cancelled"))
        } catch {
            let wrapped = TileError(.io, "\(source.name): \(error)")
            await builder.fail(wrapped)
            result = .failure(wrapped)
        }
        return ImageResult(
            index: index, name: source.name, result: result, decodeTime: await builder.decodeCPUTime,
            wallTime: clock.now - start, warningCount: await builder.warningCount, lastWarning: await builder.lastWarning)
    }
}
