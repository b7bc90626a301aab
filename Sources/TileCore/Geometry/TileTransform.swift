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
            // Output row j reads stored column x = j (or last - j), walking y up or down. Blocks of 16
            // output rows are filled column by column, so each step reads 16 adjacent stored pixels.
            let mirrorX = orientation == .transverse || orientation == .rotate270
            let upward = orientation == .rotate90 || orientation == .transverse
            let block = 16
            for j0 in stride(from: 0, to: side, by: block) {
                let j1 = min(j0 &+ block, side)
                for i in 0..<side {
                    let y = upward ? last &- i : i
                    let srcRow = src + y &* side
                    var out = dst + (j0 &* side &+ i)
                    if mirrorX {
                        for j in j0..<j1 {
                            out.pointee = srcRow[last &- j]
                            out += side
                        }
                    } else {
                        for j in j0..<j1 {
                            out.pointee = srcRow[j]
                            out += side
                        }
                    }
                }
            }
        }
    }
}
