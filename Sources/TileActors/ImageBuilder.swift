import NIOConcurrencyHelpers
public import Foundation
public import NIOPosix
public import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// One image being tiled: an actor that owns a `TileBuilder` and feeds it the bytes as they come.
///
/// The actor's work (decoding, writing) runs one job at a time on a thread pool (`threadPool` at init),
/// never on the cooperative thread pool, and a large chunk is decoded in slices with a cancellation
/// check between them: each slice is a job, after which the pool's thread goes to whoever waits. Progress is published on
/// ``progress``.
public actor ImageBuilder {
    /// Where a build stands.
    public enum State: Sendable, Hashable {
        case waitingForHeader, decoding, complete, failed(TileError), cancelled
    }

    /// A progress report, sent after every slice of work.
    public struct Progress: Sendable, Hashable {
        public var bytesReceived: Int
        /// The total the source announced, when it did (e.g. an HTTP Content-Length).
        public var expectedBytes: Int?
        public var rowsDecoded: Int
        /// Stored image height, once the header is read.
        public var height: Int?
        /// Complete tile rows per level (stored orientation), once the header is read.
        public var levelTileRowsComplete: [Int]
        /// Tile rows per level readable from a whole-image preview of a progressive JPEG (the levels
        /// at 1/8 scale and below; see `BuildOptions.preview`); preliminary where they exceed
        /// ``levelTileRowsComplete``.
        public var levelTileRowsPreliminary: [Int]
        /// The scan the preview shows, once a preview has been made.
        public var previewScan: Int?
        public var state: State
    }

    /// Bytes decoded per slice: between slices the actor checks for cancellation and reports progress.
    public static let sliceByteCount = 256 * 1024

    private let executor: PoolSerialExecutor
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// Every progress report, in order. One consumer; finished when the build ends.
    public nonisolated let progress: AsyncStream<Progress>
    private let progressContinuation: AsyncStream<Progress>.Continuation
    private let builder: TileBuilder
    private let budget: DiskCacheBudget?
    private var budgetID: DiskCacheBudget.StoreID?
    /// The budget's room for a new store, read before each slice until the header is read.
    private var budgetRoom: Int?
    private var state = State.waitingForHeader
    /// An append or finish is running (they suspend between slices; overlapping calls are refused).
    private var isBusy = false
    /// The total the source announced, if any (shown in progress reports).
    public var expectedBytes: Int?
    /// CPU time this builder's decoding has used (its thread's CPU clock), not time spent waiting.
    public private(set) var decodeCPUTime: Duration = .zero

    /// Creates a builder.
    /// - Parameters:
    ///   - options: see `BuildOptions`.
    ///   - budget: the disk budget to account this build's bytes in, if any.
    ///   - sourcePath: the file whose bytes will be appended, when there is one: a TIFF master is then
    ///     read from it (`TileBuilder.sourcePath`) rather than from a spool file of its bytes.
    ///   - threadPool: where the builder's work (decoding, writing) runs, one job at a time (default NIO's
    ///     shared pool; a server passes its own, the one all its blocking work shares).
    /// - Throws: `TileError.Code.io` when the decoder cannot be allocated.
    public init(
        options: BuildOptions = BuildOptions(), budget: DiskCacheBudget? = nil, sourcePath: String? = nil,
        threadPool: NIOThreadPool = .singleton
    ) throws(TileError) {
        executor = PoolSerialExecutor(pool: threadPool)
        builder = try TileBuilder(options: options)
        builder.sourcePath = sourcePath
        self.budget = budget
        (progress, progressContinuation) = AsyncStream.makeStream(of: Progress.self, bufferingPolicy: .unbounded)
    }

    deinit { progressContinuation.finish() }

    /// The pyramid, once the header has been read (tiles become readable row by row).
    public var image: TiledImage? { builder.image }
    /// The header's metadata, once read.
    public var info: ImageInfo? { builder.info }
    /// Where the build stands.
    public var currentState: State { state }
    /// The last progress report (nil before the first), read without waiting for the actor: a
    /// status page asks while a slice of decoding, or the last long step of a build, holds it.
    public nonisolated var latestProgress: Progress? { reported.withLockedValue { $0 } }
    private nonisolated let reported = NIOLockedValueBox<Progress?>(nil)
    /// The store's account in the budget given at init, once the first bytes are written (a completed
    /// build stays registered: its owner closes or unregisters it).
    public var budgetStoreID: DiskCacheBudget.StoreID? { budgetID }
    /// The JPEG's bytes taken in so far.
    public var bytesReceived: Int { builder.bytesReceived }
    /// Full-size rows decoded so far.
    public var rowsDecoded: Int { builder.rowsDecoded }
    /// Corrupt-data warnings so far, and the last one's text.
    public var warningCount: Int { builder.warningCount }
    public var lastWarning: String? { builder.lastWarning }

    /// Whether the end-of-image marker has been decoded: the pyramid is complete, and later bytes are
    /// only counted (``bytesAfterImage``), so a source can stop reading (a download can close its
    /// connection) here. ``finish()`` still ends the build.
    public var hasReachedEndOfImage: Bool { builder.isComplete }
    /// Bytes appended after the end of the image, counted and dropped.
    public var bytesAfterImage: Int { builder.bytesAfterImage }

    /// Feeds the next bytes and decodes what they allow, a slice at a time. After the end of the image
    /// (``hasReachedEndOfImage``) bytes are counted and dropped at once.
    ///
    /// Calls are not re-entrant: an `append` or ``finish()`` made while another is still running (the
    /// actor interleaves calls at each slice) is refused, so slices of two chunks never mix.
    /// - Throws: `TileError` (`TileError.Code.cancelled` when the task or the build was cancelled;
    ///   `TileError.Code.invalidArgument` for an overlapping call, which leaves the build as it was).
    public func append<Bytes: ContiguousBytes & Sendable>(_ bytes: Bytes) async throws(TileError) {
        try begin("append")
        defer { isBusy = false }
        if builder.isComplete {
            try appendSlice(of: bytes, 0..<bytes.withUnsafeBytes { $0.count })
            return
        }
        let count = bytes.withUnsafeBytes { $0.count }
        var offset = 0
        while offset < count {
            if Task.isCancelled { throw await end(.cancelled, TileError(.cancelled, "the task was cancelled")) }
            let range = offset..<min(offset + Self.sliceByteCount, count)
            if builder.image == nil, let budget { budgetRoom = await budget.availableByteCount }
            try await timed { () throws(TileError) in try appendSlice(of: bytes, range) }
            offset = range.upperBound
            try await afterWork()
        }
    }

    /// Feeds one slice of `bytes` to the builder in place: the decoder's own copy is the only one.
    private func appendSlice<Bytes: ContiguousBytes>(of bytes: Bytes, _ range: Range<Int>) throws(TileError) {
        // Before the header: the store may take what the budget has room for now (checked against
        // the header before any file is made; reserved once it is, in afterWork).
        if builder.image == nil, let room = budgetRoom { builder.storeByteLimit = room }
        var failure: TileError?
        bytes.withUnsafeBytes { raw in
            do throws(TileError) { try builder.append(UnsafeRawBufferPointer(rebasing: raw[range])) } catch {
                failure = error
            }
        }
        if let failure { throw failure }
    }

    /// Ends the input, completes the pyramid and returns it.
    /// - Throws: `TileError` as ``append(_:)`` does.
    public func finish() async throws(TileError) -> TiledImage {
        try begin("finish")
        defer { isBusy = false }
        // The rest is decoded a slice of rows at a time (a TIFF pushed as bytes is decoded whole here),
        // cancellable and reporting progress between slices.
        while true {
            if Task.isCancelled { throw await end(.cancelled, TileError(.cancelled, "the task was cancelled")) }
            if builder.image == nil, let budget { builder.storeByteLimit = await budget.availableByteCount }
            let image = try await timed { () throws(TileError) in try builder.finish(rowLimit: Self.finishRowSlice) }
            try await afterWork()
            if let image {
                await end(.complete, nil)
                return image
            }
        }
    }

    /// Rows ``finish()`` decodes between looks at cancellation.
    static let finishRowSlice = 512

    /// Stops the build; its files are removed and its memory released.
    public func cancel() async {
        await end(.cancelled, nil)
    }

    /// Consumes a sequence of byte chunks, then finishes. Cancelling the calling task cancels the build
    /// (reported as `TileError.Code.cancelled`).
    public func build<Chunks: AsyncSequence>(from chunks: Chunks) async throws -> TiledImage
    where Chunks.Element: ContiguousBytes & Sendable {
        do {
            for try await chunk in chunks {
                try await append(chunk)
                if builder.isComplete { break }
            }
        } catch let error as TileError {
            throw error
        } catch is CancellationError {
            throw await end(.cancelled, TileError(.cancelled, "the task was cancelled"))
        } catch {
            throw await end(.failed, TileError(.io, "the byte source failed: \(error)"))
        }
        return try await finish()
    }

    /// Ends the build with a source's error: its files are removed, the error is reported.
    public func fail(_ error: TileError) async {
        await end(.failed, error)
    }

    /// Says no more progress will be reported (the consumer's loop ends); idempotent.
    nonisolated func endProgressReports() { progressContinuation.finish() }

    private func begin(_ operation: String) throws(TileError) {
        switch state {
        case .failed(let error): throw error
        case .cancelled: throw TileError(.cancelled, "the build was cancelled")
        case .complete: throw TileError(.invalidArgument, "the build is complete")
        case .waitingForHeader, .decoding: break
        }
        guard !isBusy else {
            throw TileError(.invalidArgument, "\(operation) was called while an earlier append or finish is still running")
        }
        isBusy = true
    }

    private enum Ending { case complete, failed, cancelled }

    /// The one end of a build, whichever way it ends: the state, the builder's files, the budget's
    /// accounts and the progress stream, in that order. Later calls do nothing.
    /// - Returns: the error the build ended with (or `error` when it had already ended).
    @discardableResult
    private func end(_ ending: Ending, _ error: TileError?) async -> TileError {
        let given = error ?? TileError(.cancelled, "the build was cancelled")
        switch state {
        case .complete, .failed, .cancelled: return given
        case .waitingForHeader, .decoding: break
        }
        switch ending {
        case .complete: state = .complete
        case .cancelled:
            builder.cancel()
            state = .cancelled
        case .failed:
            builder.cancel()
            state = .failed(given)
        }
        if ending != .complete, let budgetID, let budget { await budget.unregister(budgetID) }
        report()
        progressContinuation.finish()
        return given
    }

    /// Runs `work` and adds this thread's CPU time to ``decodeCPUTime``; a failure ends the build
    /// (`TileError.Code.cancelled` as a cancellation).
    private func timed<T>(_ work: () throws(TileError) -> T) async throws(TileError) -> T {
        let start = threadCPUTime()
        let result: Result<T, TileError>
        do throws(TileError) { result = .success(try work()) } catch { result = .failure(error) }
        decodeCPUTime += threadCPUTime() - start
        switch result {
        case .success(let value): return value
        case .failure(let error): throw await end(error.code == .cancelled ? .cancelled : .failed, error)
        }
    }

    /// After each slice: the state, the budget's accounts, a progress report. Once the header is read
    /// the store reserves what it will take (``TileCore/TiledImage/estimatedStoreByteCount``), and a
    /// build that does not fit, or writes past what fits, ends as `overBudget` with its files removed.
    private func afterWork() async throws(TileError) {
        if case .waitingForHeader = state, builder.image != nil { state = .decoding }
        if let budget, let image = builder.image {
            if budgetID == nil {
                let estimate = image.estimatedStoreByteCount
                guard let id = await budget.register(image: image, path: image.storePath, reserving: estimate) else {
                    throw await end(
                        .failed,
                        TileError(.overBudget, "the store (about \(estimate) bytes) does not fit the disk budget of \(budget.totalByteBudget) bytes"))
                }
                // Ended while the budget made room (cancelled, a newer source): its files are gone, so is its account.
                switch state {
                case .complete, .failed, .cancelled:
                    await budget.unregister(id)
                    throw TileError(.cancelled, "the build ended while the disk budget made room for it")
                case .waitingForHeader, .decoding:
                    budgetID = id
                }
            }
            guard await budget.didWrite(budgetID!) else {
                throw await end(
                    .failed,
                    TileError(
                        .overBudget, "the store wrote \(image.bytesWritten) bytes, past what the disk budget of \(budget.totalByteBudget) bytes holds"
                    ))
            }
        }
        report()
    }

    private func report() {
        let image = builder.image
        let progress = Progress(
            bytesReceived: builder.bytesReceived, expectedBytes: expectedBytes, rowsDecoded: builder.rowsDecoded,
            height: builder.info?.height,
            levelTileRowsComplete: image.map { i in (0..<i.levelCount).map { i.storedTileRowsComplete(level: $0) } } ?? [],
            levelTileRowsPreliminary: image.map { i in (0..<i.levelCount).map { i.previewTileRows(level: $0) } } ?? [],
            previewScan: image?.previewScan, state: state)
        reported.withLockedValue { $0 = progress }
        progressContinuation.yield(progress)
    }

    /// Sets the total the source announced (shown in progress reports).
    public func setExpectedBytes(_ count: Int?) {
        expectedBytes = count
        report()
    }
}

/// This thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`).
func threadCPUTime() -> Duration {
    var t = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t)
    return .seconds(t.tv_sec) + .nanoseconds(t.tv_nsec)
}
