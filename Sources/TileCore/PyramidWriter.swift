internal import CJpegShim

/// The one Swift owner of a `cjs_pyramid`: level writers and the 2x2 shrink chain, all in C.
final class PyramidWriter {
    private let handle: OpaquePointer
    private let levelCount: Int

    init(geometry: TileGeometry, files: LevelFiles, kind: TileWriterKind) throws(TileError) {
        let levels = geometry.levels.enumerated().map { index, level in
            cjs_level(
                fd: files.descriptors[index], width: UInt32(level.storedWidth), height: UInt32(level.storedHeight),
                x_offset: UInt32(level.storedXOffset), y_offset: UInt32(level.storedYOffset),
                columns: UInt32(level.storedColumns), rows: UInt32(level.storedRows))
        }
        var handle: OpaquePointer?
        let kindValue = kind == .mappedWindow ? CJS_WRITER_MMAP : CJS_WRITER_PWRITE
        let status = levels.withUnsafeBufferPointer {
            cjs_pyramid_create($0.baseAddress, UInt32($0.count), UInt32(geometry.tileSize), Int32(kindValue.rawValue), &handle)
        }
        guard status == CJS_OK, let handle else {
            throw TileError(.io, "cannot create the level files' writers (status \(status.rawValue))", errno: 0)
        }
        self.handle = handle
        levelCount = levels.count
    }

    deinit { cjs_pyramid_destroy(handle) }

    /// Pushes level-0 rows (RGBA, `stride` bytes apart); the rows below are made as pairs complete.
    func push(rows: UnsafeRawPointer, stride: Int, count: Int) throws(TileError) {
        try check(cjs_pyramid_push_rows(handle, rows, stride, UInt32(count)))
    }

    func finish() throws(TileError) { try check(cjs_pyramid_finish(handle)) }

    /// Stored tile rows complete, per level.
    var tileRowsComplete: [Int] { (0..<levelCount).map { Int(cjs_pyramid_tile_rows_complete(handle, UInt32($0))) } }

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
