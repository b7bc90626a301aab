extension TiledImage {
    /// Calls `body` for each row of a level, top to bottom, in display orientation, as RGBA pixels
    /// (width * 4 bytes, padding cut off). Reads one tile row at a time: memory is one tile row.
    /// - Parameters:
    ///   - level: 0 ..< ``levelCount``.
    ///   - body: gets the row's index and bytes (valid only during the call).
    /// - Throws: what ``readTile(level:column:row:into:)`` throws, or what `body` throws.
    public func forEachRow(level: Int, _ body: (Int, UnsafeRawBufferPointer) throws -> Void) throws {
        let l = try geometry.checkedLevel(level)
        let side = geometry.tileSize
        let tileBytes = geometry.tileByteCount
        let tiles = UnsafeMutableRawBufferPointer.allocate(byteCount: tileBytes * l.columns, alignment: 16)
        defer { tiles.deallocate() }
        let row = UnsafeMutableRawBufferPointer.allocate(byteCount: l.width * 4, alignment: 16)
        defer { row.deallocate() }
        for tileRow in 0..<l.rows {
            for column in 0..<l.columns {
                let slot = UnsafeMutableRawBufferPointer(rebasing: tiles[(column * tileBytes)..<((column + 1) * tileBytes)])
                try readTile(level: level, column: column, row: tileRow, into: slot)
            }
            let rowsHere = min(side, l.height - tileRow * side)
            for y in 0..<rowsHere {
                for column in 0..<l.columns {
                    let pixels = min(side, l.width - column * side)
                    let source = tiles.baseAddress! + column * tileBytes + y * side * 4
                    (row.baseAddress! + column * side * 4).copyMemory(from: source, byteCount: pixels * 4)
                }
                try body(tileRow * side + y, UnsafeRawBufferPointer(row))
            }
        }
    }
}
