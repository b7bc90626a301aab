/// Shrinks a stream of RGBA rows to an exact size by area averaging: each output pixel is the mean of
/// the input area it covers, partial pixels weighted by the fraction covered. Rows go in one at a
/// time; memory is one accumulator row (O(width)) plus the output.
struct AreaResampler {
    let inputWidth: Int
    let inputHeight: Int
    let outputWidth: Int
    let outputHeight: Int
    /// Per output column: the input columns it covers and their weights (summing to 1).
    private let columnTaps: [[(index: Int, weight: Float)]]
    private var accumulator: [Float]
    private var outputRow = 0
    private var inputRow = 0
    private(set) var output: [UInt8]

    init(inputWidth: Int, inputHeight: Int, outputWidth: Int, outputHeight: Int) {
        precondition(outputWidth >= 1 && outputHeight >= 1 && outputWidth <= inputWidth && outputHeight <= inputHeight)
        self.inputWidth = inputWidth
        self.inputHeight = inputHeight
        self.outputWidth = outputWidth
        self.outputHeight = outputHeight
        columnTaps = Self.taps(input: inputWidth, output: outputWidth)
        accumulator = [Float](repeating: 0, count: outputWidth * 4)
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
        precondition(inputRow < inputHeight && row.count >= inputWidth * 4)
        let scale = Double(inputHeight) / Double(outputHeight)
        var y0 = Double(inputRow), y1 = y0 + 1
        inputRow += 1
        while y0 < y1 && outputRow < outputHeight {
            let rowEnd = Double(outputRow + 1) * scale
            let covered = min(y1, rowEnd) - y0
            accumulate(row, weight: Float(covered / scale))
            y0 += covered
            if rowEnd - y0 < 1e-9 || (inputRow == inputHeight && y0 >= y1) { emitRow() }
        }
    }

    private mutating func accumulate(_ row: UnsafeRawBufferPointer, weight: Float) {
        accumulator.withUnsafeMutableBufferPointer { acc in
            for x in 0..<outputWidth {
                var r: Float = 0, g: Float = 0, b: Float = 0, a: Float = 0
                for tap in columnTaps[x] {
                    let p = tap.index &* 4
                    r += Float(row[p]) * tap.weight
                    g += Float(row[p &+ 1]) * tap.weight
                    b += Float(row[p &+ 2]) * tap.weight
                    a += Float(row[p &+ 3]) * tap.weight
                }
                acc[x &* 4] += r * weight
                acc[x &* 4 &+ 1] += g * weight
                acc[x &* 4 &+ 2] += b * weight
                acc[x &* 4 &+ 3] += a * weight
            }
        }
    }

    private mutating func emitRow() {
        let base = outputRow * outputWidth * 4
        for i in 0..<(outputWidth * 4) {
            output[base + i] = UInt8(max(0, min(255, (accumulator[i] + 0.5).rounded(.down))))
            accumulator[i] = 0
        }
        outputRow += 1
    }

    var isComplete: Bool { outputRow == outputHeight }
}
