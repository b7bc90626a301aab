public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Exports a JPEG, pushed in chunks as its bytes arrive, or a finished ``TiledImage`` as tiles a web
/// viewer reads: DeepZoom (`NAME.dzi` and `NAME_files/`) or a static IIIF Image API 3.0 service
/// (`NAME/info.json` and its tiles). See ``ExportOptions``.
///
/// A JPEG's tiles are encoded as their tile rows are decoded, straight from the build's rows, by
/// encoder threads (``ExportOptions/encoderThreads``); the raw pyramid is not written unless asked
/// for (`keepingStoreAt`). Memory is bounded as a build's is: two strips of each level and a queue of
/// encoded tiles. An image that EXIF turns (orientations 2 to 8) is built first (ephemeral level
/// files) and exported from the pyramid.
///
/// Everything is written in a staging folder beside the output (`.NAME.export-...`) and published by
/// rename when complete, the descriptor last; a failed or cancelled export removes what it wrote.
/// Not thread-safe: one owner calls it.
public final class TileExporter {
    /// What an export made.
    public struct Result: Sendable, Hashable {
        /// Display size of the full-resolution image.
        public let width: Int
        public let height: Int
        public let levelCount: Int
        /// Tiles encoded (IIIF writes some of them under two or three names).
        public let tileCount: Int
        /// The published paths: `[DIR/NAME_files, DIR/NAME.dzi]` or `[DIR/NAME]`.
        public let paths: [String]
        /// The tile store kept beside the export, if one was asked for.
        public let storePath: String?
    }

    public let name: String
    public let outputDirectory: String
    public let options: ExportOptions
    private let staging: String
    private let replacesExisting: Bool
    private let builder: TileBuilder
    private let keptStore: String?
    private var session: ExportSession?
    private var result: Result?
    private var failure: TileError?

    /// Starts an export of the JPEG whose bytes will be appended.
    /// - Parameters:
    ///   - name: the base name of what is written (`NAME.dzi`, `NAME/`): a plain file name.
    ///   - outputDirectory: an existing folder that receives it.
    ///   - options: the layout, tile size, overlap, format and encoder threads.
    ///   - buildOptions: how the JPEG is decoded (orientation, truncation, limits; its storage is the
    ///     export's).
    ///   - keepingStoreAt: also write the tile store (``TileStorage/persistent(path:)``) there.
    ///   - replacingExisting: replace an earlier export of the same name (else it is refused).
    /// - Throws: ``TileError/Code/invalidArgument`` for a bad name or options, ``TileError/Code/io``
    ///   when the folder cannot be written, ``TileError/Code/invalidArgument`` when the export exists.
    public init(
        name: String, outputDirectory: String, options: ExportOptions = ExportOptions(),
        buildOptions: BuildOptions = BuildOptions(), keepingStoreAt: String? = nil, replacingExisting: Bool = false
    ) throws(TileError) {
        _ = try ExportPlan(name: name, width: 1, height: 1, options: options)
        self.name = name
        self.outputDirectory = outputDirectory
        self.options = options
        replacesExisting = replacingExisting
        keptStore = keepingStoreAt
        staging = try Self.makeStaging(name: name, in: outputDirectory)
        do {
            try Self.checkFree(name: name, layout: options.layout, in: outputDirectory, replacing: replacingExisting)
            var build = buildOptions
            if let keepingStoreAt { build.storage = .persistent(path: keepingStoreAt) }
            builder = try TileBuilder(
                options: build,
                export: .init(name: name, options: options, root: staging, writesStore: keepingStoreAt != nil))
        } catch {
            removeTree(staging)
            throw error
        }
    }

    deinit { if result == nil { cancel() } }

    /// Tiles written so far.
    public var tilesWritten: Int { builder.exportSession?.tilesWritten ?? session?.tilesWritten ?? 0 }
    /// Bytes of the JPEG received so far.
    public var bytesReceived: Int { builder.bytesReceived }
    /// The frame header, once read.
    public var header: JPEGHeader? { builder.header }
    /// Whether the end of the image has been decoded: later bytes are not needed.
    public var hasReachedEndOfImage: Bool { builder.isComplete }

    /// Pushes the next bytes of the JPEG: tiles are encoded and written as their rows decode.
    /// - Throws: the build's errors (``TileBuilder/append(_:)-(UnsafeRawBufferPointer)``), a tile that
    ///   cannot be written; the export is then removed and over.
    public func append(_ bytes: UnsafeRawBufferPointer) throws(TileError) {
        try guarded { () throws(TileError) in try builder.append(bytes) }
    }

    /// Pushes the next bytes (`Data`, `[UInt8]`, ...).
    public func append<Bytes: ContiguousBytes>(_ bytes: Bytes) throws(TileError) {
        try guarded { () throws(TileError) in try builder.append(bytes) }
    }

    /// Says the input has ended: decodes the rest, writes the last tiles and the descriptor, and
    /// publishes the export.
    public func finish() throws(TileError) -> Result {
        if let result { return result }
        return try guarded { () throws(TileError) in
            let image = try builder.finish()
            if builder.exportSession == nil {  // turned by its EXIF orientation: export the pyramid
                session = try Self.exportRows(of: image, name: name, options: options, root: staging)
            }
            let written = builder.exportSession ?? session!
            let result = try publish(written.plan, tiles: written.tilesWritten)
            self.result = result
            return result
        }
    }

    /// Stops the export and removes what it wrote (a kept store that was not finished too).
    public func cancel() {
        guard result == nil, failure == nil else { return }
        failure = TileError(.cancelled, "the export was cancelled")
        stopWriting()
        removeTree(staging)
    }

    private func guarded<R>(_ body: () throws(TileError) -> R) throws(TileError) -> R {
        if let failure { throw failure }
        do { return try body() } catch {
            failure = error
            stopWriting()
            removeTree(staging)
            throw error
        }
    }

    /// Cancels the build and waits until no thread of the export writes any more.
    private func stopWriting() {
        builder.cancel()
        builder.exportSession?.stopAndWait()
        session?.stopAndWait()
        session = nil
    }

    /// Exports a finished (or at least fully written) pyramid, in its display orientation.
    /// - Throws: as ``init(name:outputDirectory:options:buildOptions:keepingStoreAt:replacingExisting:)``,
    ///   ``TileError/Code/notReady`` for tiles not written yet, and read and write errors. Nothing is
    ///   left behind on failure.
    public static func export(
        _ image: TiledImage, name: String, outputDirectory: String, options: ExportOptions = ExportOptions(),
        replacingExisting: Bool = false
    ) throws(TileError) -> Result {
        _ = try ExportPlan(name: name, width: image.geometry.width, height: image.geometry.height, options: options)
        try checkFree(name: name, layout: options.layout, in: outputDirectory, replacing: replacingExisting)
        let staging = try makeStaging(name: name, in: outputDirectory)
        do {
            let session = try exportRows(of: image, name: name, options: options, root: staging)
            return try publish(
                session.plan, tiles: session.tilesWritten, staging: staging, outputDirectory: outputDirectory,
                replacing: replacingExisting, storePath: nil)
        } catch {
            removeTree(staging)
            throw error
        }
    }

    // MARK: - Rows from a pyramid

    /// Encodes every level of `image` (its levels as stored; smaller ones shrunk from its last).
    private static func exportRows(of image: TiledImage, name: String, options: ExportOptions, root: String)
        throws(TileError) -> ExportSession
    {
        let plan = try ExportPlan(name: name, width: image.geometry.width, height: image.geometry.height, options: options)
        let session = try ExportSession(plan: plan, root: root, colorProfile: image.colorProfile)
        // A level whose size is not the plan's (a TIFF of libvips', which rounds half sizes down) and
        // those below it are shrunk from the last level that matches.
        let matching = (0..<image.levelCount).prefix { index in
            image.geometry.levels[index].width == plan.levels[index].width
                && image.geometry.levels[index].height == plan.levels[index].height
        }.count
        do throws(TileError) {
            for level in 0..<matching {
                let l = try image.level(level)
                var failure: TileError?
                try image.readRegion(level: level, x0: 0, y0: 0, x1: l.width, y1: l.height) { row in
                    if failure == nil {
                        do throws(TileError) { try session.pushRow(level: level, row) } catch { failure = error }
                    }
                }
                if let failure { throw failure }
            }
            let smallest = try image.level(matching - 1)
            var bytes: [UInt8] = []
            bytes.reserveCapacity(smallest.width * smallest.height * 4)
            try image.readRegion(level: smallest.index, x0: 0, y0: 0, x1: smallest.width, y1: smallest.height) {
                bytes.append(contentsOf: $0)
            }
            var last = RGBAPixels(width: smallest.width, height: smallest.height, bytes: bytes)
            for level in matching..<plan.levels.count {
                last = last.halved()
                let rowBytes = last.width * 4
                for y in 0..<last.height {
                    let row = Array(last.bytes[(y * rowBytes)..<((y + 1) * rowBytes)])
                    var failure: TileError?
                    row.withUnsafeBytes { raw in
                        do throws(TileError) { try session.pushRow(level: level, raw) } catch { failure = error }
                    }
                    if let failure { throw failure }
                }
            }
            try session.waitUntilWritten()
            return session
        } catch {
            session.stopAndWait()
            throw error
        }
    }

    // MARK: - The output folder

    private static func makeStaging(name: String, in directory: String) throws(TileError) -> String {
        var info = stat()
        guard stat(directory, &info) == 0 else { throw SystemCall.error("cannot export into", path: directory) }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw TileError(.invalidArgument, "\(directory) is not a folder: cannot export into it")
        }
        let staging = "\(directory)/.\(name).export-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        guard mkdir(staging, 0o755) == 0 else { throw SystemCall.error("cannot export into", path: directory) }
        return staging
    }

    private static func checkFree(
        name: String, layout: ExportOptions.Layout, in directory: String, replacing: Bool
    ) throws(TileError) {
        guard !replacing else { return }
        let names = layout == .deepZoom ? ["\(name).dzi", "\(name)_files"] : [name]
        for entry in names where access("\(directory)/\(entry)", F_OK) == 0 || errno != ENOENT {
            throw TileError(
                .invalidArgument, "\(directory)/\(entry) exists: not replaced (remove it, or replace it: tiler export --force, replacingExisting)")
        }
    }

    private func publish(_ plan: ExportPlan, tiles: Int) throws(TileError) -> Result {
        try Self.publish(
            plan, tiles: tiles, staging: staging, outputDirectory: outputDirectory, replacing: replacesExisting,
            storePath: keptStore)
    }

    /// Writes the documents (the descriptor last), then renames each published name from the staging folder into the
    /// output folder (an earlier export of the name, when replaced, is moved aside first and removed
    /// after), descriptor last; then removes the staging folder.
    private static func publish(
        _ plan: ExportPlan, tiles: Int, staging: String, outputDirectory: String, replacing: Bool, storePath: String?
    ) throws(TileError) -> Result {
        for document in plan.documents() { try AtomicFile.write(document.contents, to: "\(staging)/\(document.path)") }
        try checkFree(name: plan.name, layout: plan.options.layout, in: outputDirectory, replacing: replacing)
        var published: [String] = []
        for entry in plan.publishedNames {
            let destination = "\(outputDirectory)/\(entry)"
            let aside = "\(staging)/\(entry).replaced"
            let displaced = replacing && rename(destination, aside) == 0
            guard rename("\(staging)/\(entry)", destination) == 0 else {
                let error = SystemCall.error("cannot publish", path: destination)
                if displaced { _ = rename(aside, destination) }
                for done in published.reversed() { _ = rename(done, "\(staging)/\((done as NSString).lastPathComponent)") }
                throw error
            }
            published.append(destination)
        }
        SystemCall.syncFolder(containing: published[0])
        removeTree(staging)
        return Result(
            width: plan.width, height: plan.height, levelCount: plan.levels.count, tileCount: tiles, paths: published,
            storePath: storePath)
    }
}

/// Removes a folder and everything below it (an export's staging folder); symlinks are removed, never
/// followed.
func removeTree(_ path: String) {
    var info = stat()
    guard lstat(path, &info) == 0 else { return }
    if info.st_mode & S_IFMT == S_IFDIR {
        if let names = try? FileManager.default.contentsOfDirectory(atPath: path) {
            for name in names { removeTree("\(path)/\(name)") }
        }
        rmdir(path)
    } else {
        unlink(path)
    }
}

extension RGBAPixels {
    /// The 2x2 box shrink the pyramid makes (`(a + b + c + d + 2) >> 2` per channel where the four
    /// pixels are opaque, else colours weighted by alpha, `sum(c * a) / sum(a)` rounded; an odd last
    /// row or column averaged with itself): the levels below a store's smallest.
    func halved() -> RGBAPixels {
        let w = (width + 1) / 2, h = (height + 1) / 2
        var out = [UInt8](repeating: 0, count: w * h * 4)
        for y in 0..<h {
            let y0 = 2 * y, y1 = min(2 * y + 1, height - 1)
            for x in 0..<w {
                let x0 = 2 * x, x1 = min(2 * x + 1, width - 1)
                let at = [(y0 * width + x0) * 4, (y0 * width + x1) * 4, (y1 * width + x0) * 4, (y1 * width + x1) * 4]
                let alphas = at.map { Int(bytes[$0 + 3]) }
                let alpha = alphas.reduce(0, +)
                let weighted = alphas.contains { $0 != 255 } && alpha > 0
                for c in 0..<3 {
                    let sum = at.indices.reduce(0) { $0 + Int(bytes[at[$1] + c]) * (weighted ? alphas[$1] : 1) }
                    out[(y * w + x) * 4 + c] = UInt8(weighted ? (sum + alpha / 2) / alpha : (sum + 2) >> 2)
                }
                out[(y * w + x) * 4 + 3] = UInt8((alpha + 2) >> 2)
            }
        }
        return RGBAPixels(width: w, height: h, bytes: out)
    }
}
