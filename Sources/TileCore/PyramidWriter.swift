internal import CJpegShim

/// The one Swift owner of a `cjs_pyramid`: level writers and the 2x2 shrink chain, all in C.
final class PyramidWriter {
    private let handle: OpaquePointer
    private let levelCount: Int
    /// Held so the counters outlive the writer's threads, which store into them.
    private let progress: TileRowCounters

    init(geometry: TileGeometry, files: LevelFiles, progress: TileRowCounters, options: BuildOptions) throws(TileError) {
        let kind = options.writer
        if let rows = options.writeBlockRows, rows <= 0 || rows > geometry.tileSize || geometry.tileSize % rows != 0 {
            throw TileError(.invalidArgument, "writeBlockRows \(rows) does not divide the tile size \(geometry.tileSize)")
        }
        let levels = geometry.levels.enumerated().map { index, level in
            cjs_level(
                fd: files.descriptors[index], width: UInt32(level.storedWidth), height: UInt32(level.storedHeight),
                x_offset: UInt32(level.storedXOffset), y_offset: UInt32(level.storedYOffset),
                columns: UInt32(level.storedColumns), rows: UInt32(level.storedRows))
        }
        var handle: OpaquePointer?
        var flags: Int32 = 0
        if options.overlapsWriting { flags |= Int32(CJS_PYRAMID_THREADED) }
        if options.writesBehind { flags |= Int32(CJS_PYRAMID_WRITE_BEHIND) }
        if options.bypassesPageCache { flags |= Int32(CJS_PYRAMID_DIRECT_IO) }
        let kindValue = kind == .mappedWindow ? CJS_WRITER_MMAP : CJS_WRITER_PWRITE
        let status = levels.withUnsafeBufferPointer {
            cjs_pyramid_create(
                $0.baseAddress, UInt32($0.count), UInt32(geometry.tileSize), UInt32(options.writeBlockRows ?? 0),
                Int32(kindValue.rawValue), flags, progress.entries, &handle)
        }
        guard status == CJS_OK, let handle else {
            throw TileError(.io, "cannot create the level files' writers (status \(status.rawValue))", errno: 0)
        }
        self.handle = handle
        self.progress = progress
        levelCount = levels.count
    }

    deinit { cjs_pyramid_destroy(handle) }

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
        case CJS_ERR_NOMEM: throw TileError(.io, "out of memory writing tiles", errno: 12)
        default: throw TileError(.invalidArgument, "tile writer called in the wrong state (status \(status.rawValue))")
        }
    }
}
