public import Foundation

/// Turns the bytes of a JPEG, PNG or TIFF master, pushed in chunks of any size as they arrive, into a
/// tile pyramid. The format is told from the first bytes (a PNG's or a TIFF's signature; anything
/// else is read as a JPEG), never from a file name. A TIFF's directory may be at its end, so libtiff
/// reads a file: its own (``sourcePath``, set by ``build(contentsOfFile:options:chunkSize:)``), whose
/// rows then keep pace with the bytes appended; else a spool file of the bytes, decoded once the last
/// one is in (``finish(rowLimit:)``).
///
/// Each ``append(_:)-(UnsafeRawBufferPointer)`` decodes as many scanlines as the bytes allow and writes
/// them into the level files straight away, so when the last byte arrives the pyramid is nearly done.
/// Memory: the compressed bytes not yet consumed, libjpeg's state, a small ring of decoded rows, and
/// per level a few bands of 64 rows (the band writer; about 58 MiB in all for an 18000x18000 image) or
/// two tile rows (the window writer). Never the image: a progressive JPEG's coefficients, which libjpeg
/// holds whole, go to a temporary file with a window of block rows in memory
/// (``BuildOptions/coefficientStorage``).
///
/// Not thread-safe: one owner calls it (`ImageBuilder` in TileActors is that owner for async code).
/// On any error the builder's files are removed, the error is thrown, and every later call throws it
/// again.
public final class TileBuilder {
    enum State {
        /// The decode goes on (where it is: ``decode``); the pipeline exists once the header is read.
        case decoding(Pipeline?)
        case complete(TiledImage)
        case failed(TileError)
    }

    /// Everything that exists once the header has been read.
    struct Pipeline {
        var image: TiledImage
        var store: StagedStore
        var writer: PyramidWriter
        /// Tiles encoded from the rows as they come (``TileExporter``), or nil.
        var export: ExportSession?
        /// A TIFF store's writer and how its level 0 is made, or nil for raw level files.
        var tiff: TIFFBuild?
    }

    /// What ``TileExporter`` asks of a build: an export fed the rows as they are decoded (when the
    /// image needs no turning), and whether the level files are written too.
    struct ExportTarget {
        var name: String
        var options: ExportOptions
        var root: String
        var writesStore: Bool
    }

    let exportTarget: ExportTarget?
    /// The export fed from this build's rows, once the header has been read (nil when the image is
    /// turned: ``TileExporter`` then exports the finished pyramid).
    private(set) var exportSession: ExportSession?

    /// The options this builder was created with.
    public let options: BuildOptions
    /// A JPEG's frame header, once read (nil for other formats: see ``info``).
    public private(set) var header: JPEGHeader?
    /// The header's metadata (format, size, EXIF, ICC, ...), once the header has been read.
    public private(set) var info: ImageInfo?
    /// Compressed bytes received so far, up to the chunk that completed the image.
    public private(set) var bytesReceived = 0
    /// Bytes appended after the pyramid was complete (after the end-of-image marker, in later
    /// chunks): counted and dropped, never buffered or decoded.
    public private(set) var bytesAfterImage = 0
    var state = State.decoding(nil)
    /// Where the decode is: header, start, rows, the input's end.
    private(set) var decode = DecodeDriver()
    /// The master's decoder, chosen by its first bytes (nil until they arrive).
    private var chosenDecoder: (any RowDecoder)?
    /// The file whose bytes are appended, when there is one: a TIFF master is then read from it directly
    /// instead of from a spool file of the bytes (libtiff needs the whole file: a TIFF's directory is
    /// often at its end). Set it before the first ``append(_:)-(UnsafeRawBufferPointer)``; the bytes
    /// appended must still be the file's, all of them (they make the store's fingerprint).
    /// ``build(contentsOfFile:options:chunkSize:)`` sets it.
    public var sourcePath: String?

    /// The most bytes the store may take (a disk budget's room), checked against its size as the
    /// header gives it (``TiledImage/estimatedStoreByteCount``'s rule) before any file is made: a
    /// store over it fails the build as ``TileError/Code/overBudget`` with nothing written. Nil (the
    /// default): no limit. Set it before the header is read.
    public var storeByteLimit: Int?

    /// The decoder: only used once the first bytes have chosen it.
    var decoder: any RowDecoder {
        guard let chosenDecoder else { preconditionFailure("the decoder is used before the first bytes chose it") }
        return chosenDecoder
    }
    var headerReader = HeaderReader()
    /// Whether ``finish(rowLimit:)`` has told the decoder the input has ended.
    private var inputEnded = false
    /// Rows ``finish(rowLimit:)`` may still decode in this call (nil: no limit).
    private var rowBudget: Int?
    var fingerprint = Fingerprint()
    /// While previews may still be made: the bytes so far, from the first, and where their scans end.
    var preview: PreviewState?
    /// The preview being made, if any (``makePreview()``).
    var previewJob: PreviewJob?

    struct PreviewState {
        var bytes: [UInt8] = []
        var scans = ScanBoundaries()
        var made = 0
        let limit: Int
    }

    /// Bytes kept for previews at most: past this (a first scan this large), no previews.
    static let previewByteLimit = 64 << 20
    /// The first level a preview writes: 1/8 scale, libjpeg's smallest DCT scaling.
    static let previewLevel = 3

    /// Creates a builder; nothing is allocated on disk until the header has been read.
    /// - Throws: ``TileError/Code/io`` when the decoder cannot be allocated.
    public convenience init(options: BuildOptions = BuildOptions()) throws(TileError) {
        try self.init(options: options, export: nil)
    }

    /// A builder whose rows also (or only) go to an export.
    init(options: BuildOptions, export: ExportTarget?) throws(TileError) {
        self.options = options
        exportTarget = export
        // Previews write raw level files: a TIFF store has none to write into.
        let previews = options.format == .raw ? options.preview.scanCount(streaming: false) : 0
        if previews > 0 { preview = PreviewState(limit: previews) }
    }

    deinit {
        cleanUp(with: TileError(.cancelled, "the builder was released before it finished"))
    }

    /// The pyramid, available as soon as the header has been read; its tiles become readable tile row
    /// by tile row while the build goes on (a turned image's TIFF store: as its tile rows are whole
    /// from the top, which for orientations 3-8 is at the end).
    public var image: TiledImage? {
        switch state {
        case .decoding(let p): return p?.image
        case .complete(let image): return image
        case .failed: return nil
        }
    }

    /// Scanlines of level 0 decoded so far.
    public var rowsDecoded: Int { chosenDecoder?.rowsRead ?? 0 }
    /// Corrupt-data warnings so far (a truncated stream counts one).
    public var warningCount: Int { chosenDecoder?.warningCount ?? 0 }
    /// The last warning's text, if any.
    public var lastWarning: String? { warningCount > 0 ? chosenDecoder?.lastMessage : nil }
    /// Compressed bytes held in memory but not yet consumed by the decoder.
    public var bytesBuffered: Int { chosenDecoder?.bytesBuffered ?? 0 }
    /// Whether the pyramid is complete.
    public var isComplete: Bool { if case .complete = state { true } else { false } }

    /// Pushes the next bytes of the JPEG and decodes what they allow.
    /// - Throws: ``TileError`` (corrupt, unsupported, too large, I/O); the build is then over.
    ///
    /// Once the end-of-image marker has been decoded the pyramid is complete (``isComplete``): later
    /// bytes are only counted in ``bytesAfterImage``, so a source can stop reading there.
    public func append(_ bytes: UnsafeRawBufferPointer) throws(TileError) {
        try ensureRunning()
        guard !bytes.isEmpty else { return }
        BlockingCallCheck.check("decode \(bytes.count) bytes")
        if case .complete = state {
            bytesAfterImage += bytes.count
            return
        }
        if chosenDecoder == nil {
            do throws(TileError) { chosenDecoder = try chooseDecoder(for: bytes) } catch {
                cleanUp(with: error)
                throw error
            }
        }
        if decode.phase == .header { headerReader.feed(bytes) }
        if case .persistent = options.storage { fingerprint.add(bytes) }
        bytesReceived += bytes.count
        if preview != nil {
            preview?.bytes.append(contentsOf: bytes)
            preview?.scans.consume(bytes)
            if bytesReceived > Self.previewByteLimit { preview = nil }
        }
        try guarded { () throws(TileError) in
            try decoder.feed(bytes)
            try advance()
        }
        makePreview()
        reportScratchBytes()
    }

    /// Pushes the next bytes (`Data`, `[UInt8]`, ...) of the JPEG; see ``append(_:)-(UnsafeRawBufferPointer)``.
    public func append<Bytes: ContiguousBytes>(_ bytes: Bytes) throws(TileError) {
        var failure: TileError?
        bytes.withUnsafeBytes { raw in
            do throws(TileError) { try append(raw) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    /// Says the input has ended, decodes the rest and completes the pyramid.
    /// - Returns: the complete pyramid (persistent stores are published at their path).
    /// - Throws: ``TileError/Code/truncated`` when the stream ended before the image did (unless
    ///   ``BuildOptions/allowTruncated``), and any error of ``append(_:)-(UnsafeRawBufferPointer)``.
    public func finish() throws(TileError) -> TiledImage {
        try finish(rowLimit: nil)!
    }

    /// Says the input has ended and decodes at most `rowLimit` more rows: the complete pyramid, or
    /// `nil` while rows remain (call again). For callers that stay responsive (cancellable, reporting
    /// progress) through a long final decode: a TIFF pushed as bytes is decoded only once its last
    /// byte is in.
    /// - Throws: as ``finish()``.
    public func finish(rowLimit: Int?) throws(TileError) -> TiledImage? {
        if case .complete(let image) = state { return image }
        try ensureRunning()
        guard chosenDecoder != nil else {
            let error = TileError(.truncated, "empty input: no byte of the image arrived")
            cleanUp(with: error)
            throw error
        }
        rowBudget = rowLimit.map { max(1, $0) }
        defer { rowBudget = nil }
        try guarded { () throws(TileError) in
            if !inputEnded { try decoder.endInput() }
            inputEnded = true
            try advance()
        }
        reportScratchBytes()
        if rowBudget == 0, decode.phase == .rows { return nil }  // the rows asked for are in; more remain
        guard case .complete(let image) = state else {
            var error = TileError(.truncated, "the stream ended before the image did")
            error.isFillable = decoder is JPEGDecoder && header != nil
            cleanUp(with: error)
            throw error
        }
        return image
    }

    /// Blocks until every row decoded so far is tiled and written, so that the tiles it completes are
    /// readable. (Tiles also become readable on their own, moments after ``append(_:)-(UnsafeRawBufferPointer)``
    /// returns, as the writer's threads finish them; this is for callers that need it now.)
    /// - Throws: the writer's ``TileError/Code/io`` error, if writing failed.
    public func waitUntilWritten() throws(TileError) {
        switch state {
        case .decoding(let p?):
            try guarded { () throws(TileError) in
                try p.writer.sync()
                try decoder.syncTranscode()  // a TIFF's level 0, copied on a thread of its own
            }
        case .failed(let error): throw error
        case .decoding(nil), .complete: return
        }
    }

    /// Stops the build and removes its files. Later calls throw ``TileError/Code/cancelled``.
    public func cancel() {
        cleanUp(with: TileError(.cancelled, "the build was cancelled"))
    }

    // MARK: - The state machine

    /// The decoder of the format the first bytes say: PNG or TIFF by their signatures, else JPEG.
    private func chooseDecoder(for bytes: UnsafeRawBufferPointer) throws(TileError) -> any RowDecoder {
        if let refusal = ImageFormat.refusal(ofFirst: bytes) { throw refusal }
        let format = ImageFormat(sniffing: bytes)
        guard format == .jpeg else {
            return try format.masterDecoder(path: sourcePath, spoolDirectory: options.storage.spoolDirectory, page: options.page)
        }
        return try JPEGDecoder(
            warningLimit: options.warningLimit, maximumScanCount: options.maximumScanCount, allowsTruncation: options.allowTruncated)
    }

    /// Publishes the size of the coefficient file, while it exists, for disk budgets.
    private func reportScratchBytes() {
        switch state {
        case .decoding(let p?):
            p.image.setScratchByteCount(chosenDecoder?.coefficientFileByteCount ?? 0)
        case .complete(let image): image.setScratchByteCount(0)
        case .decoding(nil), .failed: break
        }
    }

    private func ensureRunning() throws(TileError) {
        if case .failed(let error) = state { throw error }
    }

    private func guarded(_ body: () throws(TileError) -> Void) throws(TileError) {
        do { try body() } catch {
            cleanUp(with: error)
            throw error
        }
    }

    /// Decodes what the bytes so far allow: the header makes the pipeline, rows go to its writer (at
    /// most ``rowBudget`` of them), and a decode that has ended completes the pyramid.
    private func advance() throws(TileError) {
        guard case .decoding = state else { return }
        let ended = try decode.advance(
            decoder,
            header: { header throws(TileError) in state = .decoding(try prepare(header)) },
            started: { stopPreviews() },
            rows: { () throws(TileError) -> DecodeStep? in
                guard rowBudget != 0, case .decoding(let p?) = state else { return nil }
                let budget = rowBudget
                let (rows, step) = try p.writer.withRowBuffer {
                    (buffer, stride, capacity) throws(TileError) -> (rows: Int, result: (Int, DecodeStep)) in
                    let (rows, step) = try decoder.readRows(into: buffer, stride: stride, maxRows: min(capacity, budget ?? capacity))
                    return (rows, (rows, step))
                }
                rowBudget = rowBudget.map { $0 - rows }
                try checkTruncation()
                return step
            })
        guard ended, case .decoding(let p?) = state else { return }
        try checkTruncation()
        try complete(p)
    }

    private func checkTruncation() throws(TileError) {
        if decoder.isTruncated && !options.allowTruncated {
            var error = TileError(.truncated, "the stream ended before the image did (\(bytesReceived) bytes received)")
            error.isFillable = true  // only a JPEG decoder fills in (its isTruncated)
            throw error
        }
    }

    private func prepare(_ header: SourceHeader) throws(TileError) -> Pipeline {
        if case .jpeg(let jpeg) = header { self.header = jpeg }
        let (pipeline, info) = try makePipeline(header)
        self.info = info
        exportSession = pipeline.export
        headerReader = HeaderReader()
        return pipeline
    }

    /// Ends a build that has not completed: its files are removed and its image reads fail.
    private func cleanUp(with error: TileError) {
        if case .complete = state { return }
        if case .failed = state { return }
        stopPreviews()  // before the files go: nothing of a preview writes after this
        switch state {
        case .decoding(let p?):
            p.image.markFailed(error)
            p.image.setScratchByteCount(0)
            p.store.discard()
        case .decoding(nil):
            break
        case .complete, .failed:
            return
        }
        headerReader = HeaderReader()
        state = .failed(error)
    }
}
