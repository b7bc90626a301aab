import Foundation

extension TiledImage {
    /// Renders an image request resolved against this image's display size
    /// (``ImageRequest/resolve(width:height:limits:)`` with the width and height of level 0).
    ///
    /// Reads only the tiles the region covers, from the coarsest level that still has at least the
    /// requested resolution, one `pread` or mapping per tile, shrinks them by area averaging, then
    /// mirrors, turns and converts to gray as asked. Upscaled sizes (`^`) repeat the nearest pixel.
    /// A region on that level's pixel grid (its edges on multiples of 2^level, as viewers' tile
    /// requests are) is exact: each level pixel is the mean of its block of full-size pixels. Another
    /// region is read from the coarsest level that still has 8 times the requested resolution while
    /// that read is at most 4 MP (else 4 times, else twice; ``roundingFactors``), its edges rounded to
    /// that level's grid: at most 1/16 of an output pixel off (1/4 for the largest renders).
    /// Memory: one tile row of the region at that level, and the output.
    /// - Parameters:
    ///   - request: the request, resolved against this image's size.
    ///   - deadline: until when to wait for tiles still being built (default: no wait).
    ///   - isCancelled: asked before each tile row of the region is read: true stops the render (a
    ///     server's client that went away). Default: never.
    /// - Throws: ``TileError/Code/notReady`` when a tile the region needs is not written by the
    ///   deadline, ``TileError/Code/cancelled`` when `isCancelled` said so, and what tile reads throw.
    public func render(
        _ request: ImageRequest.Resolved, waitingUntil deadline: ContinuousClock.Instant? = nil, isCancelled: (() -> Bool)? = nil
    ) throws(TileError) -> RGBAPixels {
        let (k, x0, y0, x1, y1) = try sourceRect(for: request)
        let (width, height) = (x1 - x0, y1 - y0)
        let (outputWidth, outputHeight) = (min(request.scaledWidth, width), min(request.scaledHeight, height))
        var resampler: AreaResampler
        if let view = try store.uprightMapping(level: k) {
            resampler = try resampleMapped(view, level: k, x0: x0, y0: y0, x1: x1, y1: y1, outputWidth, outputHeight, deadline, isCancelled)
        } else {
            resampler = AreaResampler(inputWidth: width, inputHeight: height, outputWidth: outputWidth, outputHeight: outputHeight)
            try readRegion(level: k, x0: x0, y0: y0, x1: x1, y1: y1, waitingUntil: deadline, isCancelled: isCancelled) { row in
                resampler.add(row: row)
            }
        }
        var pixels = RGBAPixels(width: resampler.outputWidth, height: resampler.outputHeight, bytes: resampler.output)
        if pixels.width != request.scaledWidth || pixels.height != request.scaledHeight {
            pixels = pixels.nearest(width: request.scaledWidth, height: request.scaledHeight)
        }
        let turns: [ImageOrientation] =
            request.mirrored
            ? [.flipHorizontal, .transverse, .flipVertical, .transpose] : [.identity, .rotate90, .rotate180, .rotate270]
        pixels = pixels.oriented(turns[request.quarterTurns & 3])
        if request.quality == .gray || request.quality == .bitonal { pixels.makeGray() }
        if request.quality == .bitonal { pixels.makeBitonal() }
        return pixels
    }

    /// The level a render of `request` reads, and the rectangle [x0, x1) x [y0, y1) of that level's
    /// pixels it reads (see ``render(_:waitingUntil:)`` for how the level is chosen).
    /// - Throws: ``TileError/Code/invalidArgument`` when the request was resolved for another size.
    package func sourceRect(for request: ImageRequest.Resolved) throws(TileError) -> (level: Int, x0: Int, y0: Int, x1: Int, y1: Int) {
        let full = try level(0)
        guard request.x >= 0, request.y >= 0, request.width > 0, request.height > 0,
            request.x + request.width <= full.width, request.y + request.height <= full.height
        else { throw TileError(.invalidArgument, "the request was resolved for another image size") }
        // The coarsest level whose copy of the region is still at least as large as the output, and on
        // whose pixel grid the region lies exactly (its edges on multiples of 2^k, or the image's edge):
        // a level's pixel is the mean of its 2^k x 2^k block of level 0, so the region is then exact.
        func fits(_ k: Int) -> Bool {
            let step = 1 << k
            func aligned(_ start: Int, _ length: Int, _ total: Int) -> Bool {
                start % step == 0 && ((start + length) % step == 0 || start + length == total)
            }
            return aligned(request.x, request.width, full.width) && aligned(request.y, request.height, full.height)
                && (request.width + step - 1) >> k >= request.scaledWidth
                && (request.height + step - 1) >> k >= request.scaledHeight
        }
        // Off the grid: the coarsest level with `factor` times the output's resolution, edges rounded
        // to its grid (at most half a level pixel, 1 / (2 x factor) of an output pixel, off).
        func roughlyFits(_ k: Int, _ factor: Int) -> Bool {
            request.width >> k >= factor * request.scaledWidth && request.height >> k >= factor * request.scaledHeight
        }
        var k = 0
        while k + 1 < levelCount && fits(k + 1) { k += 1 }
        var rounded = 0
        for factor in Self.roundingFactors {
            rounded = 0
            while rounded + 1 < levelCount && roughlyFits(rounded + 1, factor) { rounded += 1 }
            if (request.width >> rounded) * (request.height >> rounded) <= Self.roundedReadPixels { break }
        }
        var (x0, y0) = (request.x >> k, request.y >> k)
        var x1 = (request.x + request.width + (1 << k) - 1) >> k
        var y1 = (request.y + request.height + (1 << k) - 1) >> k
        if rounded > k {
            k = rounded
            let half = 1 << (k - 1), top = try level(k)
            (x0, y0) = ((request.x + half) >> k, (request.y + half) >> k)
            x1 = min(top.width, max(x0 + 1, (request.x + request.width + half) >> k))
            y1 = min(top.height, max(y0 + 1, (request.y + request.height + half) >> k))
        }
        // A level libvips rounded down (a TIFF of its) ends a pixel before the region's rounded-up end.
        (x1, y1) = (min(x1, try level(k).width), min(y1, try level(k).height))
        return (k, x0, y0, x1, y1)
    }

    /// Off the level grid, the output's resolution a render reads at, finest first: 8 times (edges
    /// within 1/16 of an output pixel) while that read stays within ``roundedReadPixels``, else 4, else 2.
    /// A quarter-pixel shift (2 times) cost small regions of detailed photos 5-8 dB (26.2 dB against an
    /// exact area average, where 8 times keeps raw stores over 44 dB and TIFF stores over 33 dB).
    static let roundingFactors = [8, 4, 2]
    /// The most level pixels a render off the grid reads to round its edges finely (4 MP: tens of
    /// milliseconds of JPEG tiles).
    static let roundedReadPixels = 4 << 20

    /// Whether every tile a render of `request` reads is readable now (also true once the build has
    /// failed: the render then throws at once). Tiles become readable tile row by tile row (stored
    /// order), so the four corner tiles of the rectangle read decide it.
    public func canRender(_ request: ImageRequest.Resolved) -> Bool {
        guard !hasFailed else { return true }
        guard let (k, x0, y0, x1, y1) = try? sourceRect(for: request) else { return true }
        let side = geometry.tileSize
        for column in [x0 / side, (x1 - 1) / side] {
            for row in [y0 / side, (y1 - 1) / side] where !isTileReady(level: k, column: column, row: row) { return false }
        }
        return true
    }

    /// Resamples a region of an upright level straight from its mapped file: the resampler reads each
    /// pixel where it lies in its tile (tiles of a tile row are consecutive blocks), so nothing is
    /// copied; the mapping's pages are dropped again afterwards (the page cache keeps them), so the
    /// process's resident set does not grow with the regions read.
    /// Throws ``TileError/Code/cancelled`` when `isCancelled` says so.
    private static func check(_ isCancelled: (() -> Bool)?) throws(TileError) {
        if let isCancelled, isCancelled() { throw TileError(.cancelled, "the render was cancelled (its client went away)") }
    }

    private func resampleMapped(
        _ view: MappedFile, level: Int, x0: Int, y0: Int, x1: Int, y1: Int, _ outputWidth: Int, _ outputHeight: Int,
        _ deadline: ContinuousClock.Instant?, _ isCancelled: (() -> Bool)?
    ) throws(TileError) -> AreaResampler {
        let side = geometry.tileSize, tileBytes = geometry.tileByteCount
        let l = try self.level(level)
        let firstColumn = x0 / side
        var resampler = AreaResampler(
            inputWidth: x1 - x0, inputHeight: y1 - y0, outputWidth: outputWidth, outputHeight: outputHeight,
            columnOffset: { i in ((x0 + i) / side - firstColumn) * tileBytes + (x0 + i) % side * 4 })
        let (firstRow, lastRow) = (y0 / side, (y1 - 1) / side)
        defer { view.release(offset: firstRow * l.columns * tileBytes, byteCount: (lastRow - firstRow + 1) * l.columns * tileBytes) }
        for tileRow in firstRow...lastRow {
            try Self.check(isCancelled)
            // Every tile the region needs in this row readable (or the deadline passed, or failed).
            let lastColumn = (x1 - 1) / side
            if let deadline { waitForTile(level: level, column: lastColumn, row: tileRow, until: deadline) }
            for column in [firstColumn, lastColumn] { _ = try checkedTileOffset(level: level, column: column, row: tileRow) }
            let rowBase = view.base + (tileRow * l.columns + firstColumn) * tileBytes
            for y in max(y0, tileRow * side)..<min(y1, (tileRow + 1) * side) {
                resampler.add(rowStart: rowBase + (y - tileRow * side) * side * 4)
            }
        }
        return resampler
    }

    /// Calls `body` with each row of the region [x0, x1) x [y0, y1) of a level, top to bottom,
    /// reading a tile row of it at a time.
    func readRegion(
        level: Int, x0: Int, y0: Int, x1: Int, y1: Int, waitingUntil deadline: ContinuousClock.Instant? = nil,
        isCancelled: (() -> Bool)? = nil, _ body: (UnsafeRawBufferPointer) -> Void
    ) throws(TileError) {
        let side = geometry.tileSize
        let width = x1 - x0
        var strip = [UInt8](repeating: 0, count: width * side * 4)
        // One pread a tile (of just the rows needed) into this buffer: cheaper than faulting in the
        // pages of a mapping that is released after each tile.
        let tile = UnsafeMutableRawBufferPointer.allocate(byteCount: geometry.tileByteCount, alignment: 64)
        defer { tile.deallocate() }
        for tileRow in (y0 / side)...((y1 - 1) / side) {
            try Self.check(isCancelled)
            let top = max(y0, tileRow * side), bottom = min(y1, (tileRow + 1) * side)
            for tileColumn in (x0 / side)...((x1 - 1) / side) {
                let left = max(x0, tileColumn * side), right = min(x1, (tileColumn + 1) * side)
                if let deadline { waitForTile(level: level, column: tileColumn, row: tileRow, until: deadline) }
                let first = try readTileRows(
                    level: level, column: tileColumn, row: tileRow,
                    rows: (top - tileRow * side)..<(bottom - tileRow * side), into: tile)
                strip.withUnsafeMutableBytes { out in
                    for y in top..<bottom {
                        let source = ((y - tileRow * side - first) * side + (left - tileColumn * side)) * 4
                        let destination = ((y - top) * width + (left - x0)) * 4
                        out.baseAddress!.advanced(by: destination).copyMemory(
                            from: tile.baseAddress!.advanced(by: source), byteCount: (right - left) * 4)
                    }
                }
            }
            strip.withUnsafeBytes { rows in
                for y in 0..<(bottom - top) {
                    body(UnsafeRawBufferPointer(rebasing: rows[(y * width * 4)..<((y + 1) * width * 4)]))
                }
            }
        }
    }
}

extension TiledImage {
    /// Returns once the tile is readable, the image has failed, or the deadline has passed: waits for
    /// the writer threads to publish the level's next tile row (a futex wait on its progress count).
    /// A preview's rows and a failure do not wake the wait: each wait lasts at most 20 ms, so those
    /// are seen within that.
    func waitForTile(level: Int, column: Int, row: Int, until deadline: ContinuousClock.Instant) {
        guard geometry.levels.indices.contains(level) else { return }
        while true {
            let seen = progress[level]  // loaded before the check: a store after it ends the wait at once
            if isTileReady(level: level, column: column, row: row) || hasFailed { return }
            let now = ContinuousClock.now
            guard now < deadline else { return }
            progress.wait(level: level, whileAt: seen, timeout: min(.milliseconds(20), deadline - now))
        }
    }
}

extension RGBAPixels {
    /// Scaled to `width` x `height` by repeating the nearest pixel (for upscaling).
    func nearest(width: Int, height: Int) -> RGBAPixels {
        var out = [UInt8](repeating: 0, count: width * height * 4)
        for j in 0..<height {
            let sy = min(self.height - 1, j * self.height / height)
            for i in 0..<width {
                let sx = min(self.width - 1, i * self.width / width)
                for c in 0..<4 { out[(j * width + i) * 4 + c] = bytes[(sy * self.width + sx) * 4 + c] }
            }
        }
        return RGBAPixels(width: width, height: height, bytes: out)
    }

    /// Gray pixels to black (below 128) or white, alpha kept.
    mutating func makeBitonal() {
        for p in stride(from: 0, to: bytes.count, by: 4) {
            let value: UInt8 = bytes[p] < 128 ? 0 : 255
            bytes[p] = value
            bytes[p + 1] = value
            bytes[p + 2] = value
        }
    }

    /// Every pixel to its luma (ITU-R BT.601 weights, rounded), alpha kept.
    mutating func makeGray() {
        for p in stride(from: 0, to: bytes.count, by: 4) {
            let luma = (299 * Int(bytes[p]) + 587 * Int(bytes[p + 1]) + 114 * Int(bytes[p + 2]) + 500) / 1000
            bytes[p] = UInt8(luma)
            bytes[p + 1] = UInt8(luma)
            bytes[p + 2] = UInt8(luma)
        }
    }
}
