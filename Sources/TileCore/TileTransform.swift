/// The flip/transpose of one square tile of 4-byte pixels, from stored into display orientation.
enum TileTransform {
    /// Writes `source` (stored order) into `destination` (display order); both hold `side * side` pixels.
    static func apply(
        _ orientation: ImageOrientation, from source: UnsafeRawPointer, to destination: UnsafeMutableRawPointer,
        side: Int
    ) {
        let src = source.assumingMemoryBound(to: UInt32.self)
        let dst = destination.assumingMemoryBound(to: UInt32.self)
        let last = side &- 1
        switch orientation {
        case .identity:
            destination.copyMemory(from: source, byteCount: side * side * 4)
        case .flipHorizontal, .rotate180, .flipVertical:
            for j in 0..<side {
                let sy = orientation == .flipHorizontal ? j : last &- j
                let srcRow = src + sy &* side
                let dstRow = dst + j &* side
                if orientation == .flipVertical {
                    dstRow.update(from: srcRow, count: side)
                } else {
                    for i in 0..<side { dstRow[i] = srcRow[last &- i] }
                }
            }
        case .transpose, .rotate90, .transverse, .rotate270:
            // Blocked, so that both the reads down columns and the writes along rows stay in cache.
            let block = 16
            for j0 in stride(from: 0, to: side, by: block) {
                for i0 in stride(from: 0, to: side, by: block) {
                    for j in j0..<min(j0 &+ block, side) {
                        let dstRow = dst + j &* side
                        for i in i0..<min(i0 &+ block, side) {
                            let p = orientation.storedPosition(ofDisplay: i, j, width: side, height: side)
                            dstRow[i] = src[p.y &* side &+ p.x]
                        }
                    }
                }
            }
        }
    }
}
