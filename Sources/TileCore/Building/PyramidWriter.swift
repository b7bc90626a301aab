internal import CJpegShim
#if canImport(Glibc)
import Glibc
#endif

/// The one Swift owner of a `cjs_pyramid`: level writers and the 2x2 shrink chain, all in C.
///
/// It holds the level files too: the C side's threads write and submit asynchronous writes to their
/// descriptors until `cjs_pyramid_destroy` has joined them, so the descriptors may be closed only
/// after that. Stored properties are released after `deinit`'s body, so `files` (and `progress`, which
/// the threads store into) outlive the threads whoever else lets go of them first.
final class PyramidWriter {
    private let handle: OpaquePointer
    private let levelCount: Int
    private let progress: TileRowCounters
    private let files: LevelFiles
    /// Where the rows also go; stopped before the pyramid's threads are joined (a worker may be
    /// waiting in it), released after.
    private let export: ExportSession?
    /// The TIFF the levels' tiles go to, kept until the pyramid's threads are joined.
    private let tiff: TIFFPyramidWriter?

    /// Creates the pyramid over `files` (`cjs_pyramid_create`), which it keeps until its threads stop.
    /// - Throws: ``TileError/Code/invalidArgument`` for a band size that does not divide the tile size,
    ///   ``TileError/Code/io`` with the real errno when a level file cannot be sized (`EFBIG` under a
    ///   file-size limit, `ENOSPC`, ...).
    /// - Parameters:
    ///   - writer: how the level files are written; `nil` for none (the rows go only to `export`).
    ///   - export: an export that takes every level's rows too; its levels must be the geometry's.
    ///   - tiff: a TIFF whose levels from `firstLevel` down are encoded from the rows as `coding` says
    ///     (`writer` is then nil; level 0 is copied from the coefficients when `firstLevel` is 1).
    ///   - orientation: for `tiff`, what turns the levels upright (`geometry` is as stored, the TIFF's
    ///     levels upright): each level's rows are held a band of tile rows at a time, and the upright
    ///     tiles a band holds encoded once it is whole.
    init(
        geometry: TileGeometry, files: LevelFiles, progress: TileRowCounters, writer: LevelWriter?,
        export: ExportSession? = nil, tiff: (writer: TIFFPyramidWriter, firstLevel: Int, coding: TIFFWriting)? = nil,
        orientation: ImageOrientation = .identity
    ) throws(TileError) {
        precondition(writer != nil || export != nil || tiff != nil, "a pyramid writes somewhere")
        var config = cjs_writer_config()
        config.export_to = export?.handle
        switch writer {
        case nil where tiff != nil:
            config.kind = Int32(CJS_WRITER_TIFF.rawValue)
            config.tiff = tiff?.writer.handle
            config.tiff_quality = Int32(tiff?.coding.quality ?? 0)
            config.tiff_tables = tiff?.coding.tablesCode ?? 0
            config.first_level = UInt32(tiff?.firstLevel ?? 0)
            config.tiff_orientation = Int32(orientation.rawValue)
        case nil:
            config.kind = Int32(CJS_WRITER_NONE.rawValue)
        case .window:
            config.kind = Int32(CJS_WRITER_WINDOW.rawValue)
        case .bands(let bands):
            if let rows = bands.rowsPerBlock, rows <= 0 || rows > geometry.tileSize || geometry.tileSize % rows != 0 {
                throw TileError(.invalidArgument, "rowsPerBlock \(rows) does not divide the tile size \(geometry.tileSize)")
            }
            config.kind = Int32(CJS_WRITER_BANDS.rawValue)
            config.band_rows = UInt32(bands.rowsPerBlock ?? 0)
            config.bypass_page_cache = bands.bypassesPageCache ? 1 : 0
            switch bands.threading {
            case .onCaller: config.band_threading = Int32(CJS_BANDS_ON_CALLER.rawValue)
            case .onWorker: config.band_threading = Int32(CJS_BANDS_ON_WORKER.rawValue)
            case .writeBehind: config.band_threading = Int32(CJS_BANDS_WRITE_BEHIND.rawValue)
            }
        }
        let levels = geometry.levels.enumerated().map { index, level in
            cjs_level(
                fd: tiff == nil ? files.descriptors[index] : -1, width: UInt32(level.storedWidth), height: UInt32(level.storedHeight),
                x_offset: UInt32(level.storedXOffset), y_offset: UInt32(level.storedYOffset),
                columns: UInt32(level.storedColumns), rows: UInt32(level.storedRows))
        }
        var handle: OpaquePointer?
        var number: Int32 = 0
        let status = levels.withUnsafeBufferPointer {
            cjs_pyramid_create(
                $0.baseAddress, UInt32($0.count), UInt32(geometry.tileSize), &config, tiff == nil ? progress.entries : nil,
                &handle, &number)
        }
        guard status == CJS_OK, let handle else {
            switch status {
            case CJS_ERR_IO: throw SystemCall.error("cannot size the level files", path: nil, errno: number)
            case CJS_ERR_NOMEM: throw TileError(.io, "out of memory for the level writers", errno: ENOMEM)
            default: throw TileError(.invalidArgument, "the level writers refuse this geometry or configuration")
            }
        }
        self.handle = handle
        self.progress = progress
        self.files = files
        self.export = export
        self.tiff = tiff?.writer
        levelCount = levels.count
    }

    deinit {
        export?.stop()
        cjs_pyramid_destroy(handle)
    }

    /// Lends a buffer for level-0 rows (RGBA), fills it with `body`, and hands the rows over to be
    /// tiled (on the writer's worker thread when writing overlaps).
    /// - Returns: what `body` returns; `body` gives the buffer, the stride and the rows that fit.
    func withRowBuffer<R>(
        _ body: (UnsafeMutableRawBufferPointer, Int, Int) throws(TileError) -> (rows: Int, result: R)
    ) throws(TileError) -> R {
        var pointer: UnsafeMutableRawPointer?
        var stride = 0
        var capacity: UInt32 = 0
        try check(cjs_pyramid_acquire_rows(handle, &pointer, &stride, &capacity))
        let buffer = UnsafeMutableRawBufferPointer(start: pointer, count: stride * Int(capacity))
        let (rows, result) = try body(buffer, stride, Int(capacity))
        try check(cjs_pyramid_submit_rows(handle, UInt32(rows)))
        return result
    }

    /// Waits until every row handed over is tiled and written.
    func sync() throws(TileError) { try check(cjs_pyramid_sync(handle)) }

    func finish() throws(TileError) { try check(cjs_pyramid_finish(handle)) }

    private func check(_ status: cjs_status) throws(TileError) {
        switch status {
        case CJS_OK: return
        case CJS_ERR_IO:
            let number = cjs_pyramid_errno(handle)
            throw SystemCall.error("cannot write tiles", path: nil, errno: number)
        case CJS_ERR_NOMEM: throw TileError(.io, "out of memory writing tiles", errno: ENOMEM)
        default: throw TileError(.invalidArgument, "tile writer called in the wrong state (status \(status.rawValue))")
        }
    }
}
