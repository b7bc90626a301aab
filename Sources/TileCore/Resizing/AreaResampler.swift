/// Shrinks a stream of RGBA rows to an exact size by area averaging: each output pixel is the mean of
/// the input area it covers, partial pixels weighted by the fraction covered. Rows go in one at a
/// time; memory is one accumulator row (O(width)) plus the output.
struct AreaResampler {
    let inputWidth: Int
    let inputHeight: Int
    let outputWidth: Int
    let outputHeight: Int
    /// Per output column x: its taps are tapIndex/tapWeight[tapStart[x] ..< tapStart[x + 1]], the
    /// input columns it covers and their weights (summing to 1), flat so the row loop reads them in order.
    private let tapStart: [Int]
    /// The byte offset of each tap's input pixel from the row's start (4 * column for a plain row).
    private let tapOffset: [Int]
    private let tapWeight: [Float]
    private var accumulator: [Float]
    /// The current input row, shrunk horizontally (computed once, added to one or two output rows).
    private var shrunk: [Float]
    private var outputRow = 0
    private var inputRow = 0
    private(set) var output: [UInt8]

    /// - Parameter columnOffset: where input column i lies, in bytes from a row's start (default 4 * i:
    ///   a plain row; a row of tiles in a mapped level file has its columns in blocks).
    init(
        inputWidth: Int, inputHeight: Int, outputWidth: Int, outputHeight: Int, columnOffset: ((Int) -> Int)? = nil
    ) {
        precondition(outputWidth >= 1 && outputHeight >= 1 && outputWidth <= inputWidth && outputHeight <= inputHeight)
        self.inputWidth = inputWidth
        self.inputHeight = inputHeight
        self.outputWidth = outputWidth
        self.outputHeight = outputHeight
        let taps = Self.taps(input: inputWidth, output: outputWidth)
        tapStart = taps.reduce(into: [0]) { $0.append($0.last! + $1.count) }
        tapOffset = taps.flatMap { $0.map { columnOffset?($0.index) ?? $0.index * 4 } }
        tapWeight = taps.flatMap { $0.map(\.weight) }
        accumulator = [Float](repeating: 0, count: outputWidth * 4)
        shrunk = [Float](repeating: 0, count: outputWidth * 4)
        output = [UInt8](repeating: 0, count: outputWidth * outputHeight * 4)
    }

    /// For each output index, the input indices it covers, weighted by overlap / scale.
    static func taps(input: Int, output: Int) -> [[(index: Int, weight: Float)]] {
        let scale = Double(input) / Double(output)
        return (0..<output).map { o in
            let start = Double(o) * scale, end = Double(o + 1) * scale
            var taps: [(Int, Float)] = []
            var i = Int(start)
            while Double(i) < end && i < input {
                let overlap = min(end, Double(i + 1)) - max(start, Double(i))
                if overlap > 1e-9 { taps.append((i, Float(overlap / scale))) }
                i += 1
            }
            return taps
        }
    }

    /// Adds the next input row (RGBA, inputWidth * 4 bytes).
    mutating func add(row: UnsafeRawBufferPointer) {
        precondition(row.count >= inputWidth * 4)
        add(rowStart: row.baseAddress!)
    }

    /// Adds the next input row, whose columns lie at `columnOffset` bytes from `rowStart`.
    mutating func add(rowStart: UnsafeRawPointer) {
        precondition(inputRow < inputHeight)
        if inputWidth == outputWidth && inputHeight == outputHeight {
            copyRow(rowStart)  // nothing to average: the pixels as they are (what the sums would give)
            return
        }
        let scale = Double(inputHeight) / Double(outputHeight)
        var y0 = Double(inputRow), y1 = y0 + 1
        inputRow += 1
        shrinkHorizontally(rowStart)
        while y0 < y1 && outputRow < outputHeight {
            let rowEnd = Double(outputRow + 1) * scale
            let covered = min(y1, rowEnd) - y0
            accumulate(weight: Float(covered / scale))
            y0 += covered
            if rowEnd - y0 < 1e-9 || (inputRow == inputHeight && y0 >= y1) { emitRow() }
        }
    }

    /// An input row copied to the output row of the same index, pixel by pixel from its column offsets.
    private mutating func copyRow(_ base: UnsafeRawPointer) {
        let start = inputRow * outputWidth * 4
        inputRow += 1
        outputRow += 1
        tapOffset.withUnsafeBufferPointer { offset in
            output.withUnsafeMutableBytes { out in
                let destination = out.baseAddress! + start
                for x in 0..<outputWidth {
                    destination.storeBytes(of: base.loadUnaligned(fromByteOffset: offset[x], as: UInt32.self), toByteOffset: x &* 4, as: UInt32.self)
                }
            }
        }
    }

    private mutating func shrinkHorizontally(_ base: UnsafeRawPointer) {
        tapStart.withUnsafeBufferPointer { start in
            tapOffset.withUnsafeBufferPointer { offset in
                tapWeight.withUnsafeBufferPointer { weights in
                    shrunk.withUnsafeMutableBytes { raw in
                        let out = raw.bindMemory(to: SIMD4<Float>.self)
                        for x in 0..<outputWidth {
                            var sum = SIMD4<Float>()
                            for t in start[x]..<start[x &+ 1] {
                                let pixel = base.loadUnaligned(fromByteOffset: offset[t], as: SIMD4<UInt8>.self)
                                sum += SIMD4<Float>(pixel) * weights[t]
                            }
                            out[x] = sum
                        }
                    }
                }
            }
        }
    }

    private mutating func accumulate(weight: Float) {
        shrunk.withUnsafeBufferPointer { row in
            accumulator.withUnsafeMutableBufferPointer { acc in
                for i in 0..<(outputWidth &* 4) { acc[i] += row[i] * weight }
            }
        }
    }

    private mutating func emitRow() {
        let base = outputRow * outputWidth * 4, count = outputWidth * 4
        accumulator.withUnsafeMutableBufferPointer { acc in
            output.withUnsafeMutableBufferPointer { out in
                for i in 0..<count {
                    // Clamped first, so the conversion (truncation: floor for these) is in range.
                    out[base &+ i] = UInt8(min(max(acc[i] + 0.5, 0), 255))
                    acc[i] = 0
                }
            }
        }
        outputRow += 1
    }

    var isComplete: Bool { outputRow == outputHeight }
}
