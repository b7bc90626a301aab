internal import CJpegShim
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The one Swift owner of a `cjs_export`: its encoder threads (C) take a pyramid's rows and encode
/// tiles; a thread of this class's own takes the encoded tiles and writes them at their paths below
/// `root`, folders created as needed.
///
/// Whoever pushes rows (a ``PyramidWriter``'s worker, or ``TileExporter`` reading a store) must stop
/// before the session is released: `deinit` fails the export (waking every waiter), joins the writing
/// thread, then frees the C side.
final class ExportSession {
    let plan: ExportPlan
    let root: String
    /// The C handle; the pusher uses it through ``pushRow(level:_:)`` or a pyramid's `export_to`.
    let handle: OpaquePointer
    private let drain: TileFileWriter
    private let drained = DispatchSemaphore(value: 0)

    /// Creates the folders of `plan` below `root` (an existing, empty folder) and starts the threads.
    /// Every tile (RGB) carries `colorProfile` when it describes RGB (``ColorProfile/describes(channels:)``).
    /// - Throws: ``TileError/Code/io`` when a folder cannot be made or the threads not started.
    init(plan: ExportPlan, root: String, colorProfile: ColorProfile?) throws(TileError) {
        for folder in plan.folders where mkdir("\(root)/\(folder)", 0o755) != 0 && errno != EEXIST {
            throw SystemCall.error("cannot create the folder", path: "\(root)/\(folder)")
        }
        var options = cjs_export_options(
            tile_size: UInt32(plan.options.tileSize), overlap: UInt32(plan.options.overlap),
            format: Int32(CJS_TILE_JPEG.rawValue), quality: 80, threads: UInt32(plan.options.encoderThreads),
            queue_limit: 0, icc_profile: nil, icc_profile_length: 0)
        switch plan.options.format {
        case .jpeg(let quality): options.quality = Int32(quality)
        case .png: options.format = Int32(CJS_TILE_PNG.rawValue)
        }
        let widths = plan.levels.map { UInt32($0.width) }, heights = plan.levels.map { UInt32($0.height) }
        var handle: OpaquePointer?
        let profile = colorProfile.flatMap { $0.describes(channels: 3) ? $0.bytes : nil } ?? []
        let status = profile.withUnsafeBytes { icc in
            options.icc_profile = icc.baseAddress  // copied by cjs_export_create
            options.icc_profile_length = icc.count
            return cjs_export_create(&options, widths, heights, UInt32(widths.count), &handle)
        }
        guard status == CJS_OK, let handle else {
            throw status == CJS_ERR_NOMEM
                ? TileError(.io, "out of memory for the export's strips", errno: ENOMEM)
                : TileError(.invalidArgument, "the export refuses these levels or options")
        }
        self.plan = plan
        self.root = root
        self.handle = handle
        drain = TileFileWriter(handle: handle, plan: plan, root: root)
        let (writer, done) = (drain, drained)
        let thread = Thread {
            writer.run()
            done.signal()
        }
        thread.name = "tile export writer"
        thread.start()
    }

    deinit {
        stop()
        drained.wait()
        cjs_export_destroy(handle)
    }

    /// Tiles written so far.
    var tilesWritten: Int { Int(cjs_export_tiles_taken(handle)) }

    /// Pushes the next row of a level (RGBA, the level's width): for exports fed from a store.
    func pushRow(level: Int, _ row: UnsafeRawBufferPointer) throws(TileError) {
        precondition(row.count >= plan.levels[level].width * 4, "a row shorter than its level")
        guard cjs_export_push_row(handle, UInt32(level), row.baseAddress) == CJS_OK else { throw failure() }
    }

    /// Fails the export: its threads stop and every wait returns.
    func stop() { cjs_export_fail(handle, ECANCELED) }

    /// Stops the export and waits until its writing thread has ended: after this, nothing of it
    /// writes below `root` (which may then be removed).
    func stopAndWait() {
        stop()
        drained.wait()
        drained.signal()
    }

    /// Waits until every tile is written.
    /// - Throws: the first failure (a tile that could not be written or encoded, a stop).
    func waitUntilWritten() throws(TileError) {
        drained.wait()
        drained.signal()  // later waits (deinit) return at once
        if let error = drain.failure { throw error }
    }

    private func failure() -> TileError {
        drain.failure ?? SystemCall.error("cannot export tiles", path: nil, errno: cjs_export_errno(handle))
    }
}

/// Takes encoded tiles from a `cjs_export` and writes them as files, on its own thread.
/// `@unchecked Sendable`: `run` is the only code that touches it on that thread, and `failure` is
/// read only after the thread has signalled that it ended (or under the lock).
private final class TileFileWriter: @unchecked Sendable {
    let handle: OpaquePointer
    let plan: ExportPlan
    let root: String
    private let lock = NSLock()
    private var error: TileError?

    var failure: TileError? { lock.withLock { error } }

    init(handle: OpaquePointer, plan: ExportPlan, root: String) {
        self.handle = handle
        self.plan = plan
        self.root = root
    }

    func run() {
        var tile = cjs_export_tile()
        while true {
            let status = cjs_export_next_tile(handle, &tile)
            switch status {
            case CJS_OK:
                defer { cjs_export_release_tile(&tile) }
                let bytes = UnsafeRawBufferPointer(start: tile.bytes, count: tile.length)
                do throws(TileError) {
                    for path in plan.tilePaths(level: Int(tile.level), column: Int(tile.column), row: Int(tile.row)) {
                        try write(bytes, to: path)
                    }
                } catch {
                    lock.withLock { self.error = error }
                    cjs_export_fail(handle, error.errno ?? EIO)
                    return
                }
            case CJS_DONE:
                return
            default:
                let number = cjs_export_errno(handle)
                let error: TileError =
                    switch status {
                    case CJS_ERR_NOMEM: TileError(.io, "out of memory encoding tiles", errno: ENOMEM)
                    case CJS_ERR_LIBJPEG: TileError(.io, "the tile encoder failed")
                    case _ where number == ECANCELED: TileError(.cancelled, "the export was stopped")
                    default: SystemCall.error("cannot export tiles", path: nil, errno: number)
                    }
                lock.withLock { if self.error == nil { self.error = error } }
                return
            }
        }
    }

    /// Writes one file, creating its folders (IIIF paths have three of their own) when missing.
    private func write(_ bytes: UnsafeRawBufferPointer, to path: String) throws(TileError) {
        let full = "\(root)/\(path)"
        var raw = SystemCall.retrying { open(full, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o644) }
        if raw < 0 && errno == ENOENT {
            try makeFolders(of: path)
            raw = SystemCall.retrying { open(full, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o644) }
        }
        guard raw >= 0 else { throw SystemCall.error("cannot create", path: full) }
        let fd = OwnedDescriptor(adopting: raw)
        try SystemCall.writeAll(fd.raw, bytes, path: full)
    }

    private func makeFolders(of path: String) throws(TileError) {
        var folder = root
        for component in path.split(separator: "/").dropLast() {
            folder += "/\(component)"
            if mkdir(folder, 0o755) != 0 && errno != EEXIST { throw SystemCall.error("cannot create the folder", path: folder) }
        }
    }
}
