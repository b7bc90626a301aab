import Foundation

/// One run of ``ImageResizer``: decode once (DCT-scaled), resample per target, orient, encode, publish.
struct ResizeJob {
    enum Source { case file(InputFile), data(Data) }

    let source: Source
    let info: ImageInfo
    let targets: [ImageResizer.Target]
    let options: ImageResizer.Options

    func run() throws(TileError) -> [ImageResizer.Result] {
        guard !targets.isEmpty else { return [] }
        guard info.width * info.height <= options.maximumPixelCount else {
            throw TileError(.tooLarge, "\(info.width)x\(info.height) is over the limit of \(options.maximumPixelCount) pixels")
        }
        let orientation = options.orientation.resolve(exif: info.exifOrientation)
        let (uprightWidth, uprightHeight) = orientation.swapsAxes ? (info.height, info.width) : (info.width, info.height)
        let sizes = targets.map { ImageResizer.outputSize(width: uprightWidth, height: uprightHeight, maxEdge: $0.maxEdge) }
        var results: [ImageResizer.Result?] = Array(repeating: nil, count: targets.count)
        var toDecode: [Int] = []
        for (i, target) in targets.enumerated() {
            let within = sizes[i] == (uprightWidth, uprightHeight)
            if within && !options.reencodesSmallImages && !options.returnsPixels && target.path != nil {
                try copyThrough(to: target.path!)
                results[i] = .init(target: target, width: uprightWidth, height: uprightHeight, wasCopied: true,
                    decodedWidth: 0, decodedHeight: 0, pixels: nil)
            } else {
                toDecode.append(i)
            }
        }
        guard !toDecode.isEmpty else { return results.map { $0! } }
        // Stored-orientation sizes of the targets; the decode scale serves the largest of them.
        let stored = toDecode.map { orientation.swapsAxes ? (sizes[$0].height, sizes[$0].width) : sizes[$0] }
        let largest = stored.max { $0.0 * $0.1 < $1.0 * $1.1 }!
        let denominator = ImageResizer.scaleDenominator(
            width: info.width, height: info.height, targetWidth: largest.0, targetHeight: largest.1)
        let (decoded, resamplers) = try decode(denominator: denominator, storedSizes: stored)
        for (k, i) in toDecode.enumerated() {
            let pixels = RGBAPixels(width: stored[k].0, height: stored[k].1, bytes: resamplers[k].output).oriented(orientation)
            if let path = targets[i].path { try encode(pixels, to: path) }
            results[i] = .init(target: targets[i], width: pixels.width, height: pixels.height, wasCopied: false,
                decodedWidth: decoded.width, decodedHeight: decoded.height, pixels: options.returnsPixels ? pixels : nil)
        }
        return results.map { $0! }
    }

    /// Decodes at 1/denominator, a strip at a time, feeding every resampler.
    private func decode(denominator: Int, storedSizes: [(Int, Int)]) throws(TileError)
        -> ((width: Int, height: Int), [AreaResampler])
    {
        let decoder = try JPEGDecoder(
            warningLimit: options.warningLimit, maximumScanCount: options.maximumScanCount, allowsTruncation: false)
        let reader = try SourceReader(source)
        var header: JPEGHeader?
        while header == nil {
            guard let chunk = try reader.next() else {
                try decoder.endInput()
                _ = try decoder.readHeader()
                throw TileError(.truncated, "the input ends inside the JPEG header")
            }
            try decoder.feed(chunk)
            header = try decoder.readHeader()
        }
        let size = try decoder.setScale(denominator: denominator)
        try decoder.storeCoefficients(options.coefficientStorage, in: LevelFiles.defaultDirectory)
        var resamplers = storedSizes.map {
            AreaResampler(inputWidth: size.width, inputHeight: size.height,
                          outputWidth: min($0.0, size.width), outputHeight: min($0.1, size.height))
        }
        let stride = size.width * 4
        let strip = UnsafeMutableRawBufferPointer.allocate(byteCount: stride * 16, alignment: 64)
        defer { strip.deallocate() }
        var started = false
        var rowsDone = 0
        var ended = false
        while true {
            if !started { started = try decoder.start() == .ready }
            if started {
                var step = JPEGDecoder.Step.ready
                while step == .ready {
                    let (rows, s) = try decoder.readRows(into: strip, stride: stride, maxRows: 16)
                    step = s
                    for r in 0..<rows {
                        let row = UnsafeRawBufferPointer(rebasing: strip[(r * stride)..<((r + 1) * stride)])
                        for k in resamplers.indices { resamplers[k].add(row: row) }
                    }
                    rowsDone += rows
                }
                if step == .done, try decoder.finish() == .done { break }
            }
            if decoder.isTruncated { throw TileError(.truncated, "the input ends before the image does") }
            guard !ended else { throw TileError(.truncated, "the input ends before the image does") }
            if let chunk = try reader.next() {
                try decoder.feed(chunk)
            } else {
                try decoder.endInput()
                ended = true
            }
        }
        if decoder.isTruncated { throw TileError(.truncated, "the input ends before the image does") }
        return (size, resamplers)
    }

    private func encode(_ pixels: RGBAPixels, to path: String) throws(TileError) {
        var encoding = JPEGEncoder.Options()
        encoding.quality = options.quality
        encoding.progressive = options.progressive
        encoding.optimizeCoding = true
        let encoder = try JPEGEncoder(width: pixels.width, height: pixels.height, options: encoding)
        if options.keepsEXIF, let block = info.exifBlock, block.count <= 65_527 {
            try encoder.writeMarker(0xE1, Array("Exif\0\0".utf8) + EXIFReader.uprightCopy(of: block))
        }
        if options.keepsICCProfile, let icc = info.iccProfile { try encoder.writeICCProfile(icc) }
        var failure: TileError?
        pixels.bytes.withUnsafeBytes { raw in
            do throws(TileError) { try encoder.writeRows(raw, stride: pixels.width * 4, count: pixels.height) } catch {
                failure = error
            }
        }
        if let failure { throw failure }
        try AtomicFile.write(try encoder.finish(), to: path)
    }

    private func copyThrough(to path: String) throws(TileError) {
        switch source {
        case .data(let data): try AtomicFile.write(data, to: path)
        case .file(let file):
            try file.rewind()
            try AtomicFile.write(Data(try file.readAll()), to: path)
        }
    }
}

/// Reads a source a chunk at a time, through one buffer it owns for its whole life.
private final class SourceReader {
    private let file: InputFile?
    private var data: Data?
    private let buffer: UnsafeMutableRawBufferPointer

    init(_ source: ResizeJob.Source) throws(TileError) {
        switch source {
        case .data(let d):
            data = d
            file = nil
            buffer = UnsafeMutableRawBufferPointer(start: nil, count: 0)
        case .file(let f):
            try f.rewind()
            file = f
            buffer = .allocate(byteCount: 1 << 20, alignment: 16)
        }
    }

    deinit { buffer.deallocate() }

    func next() throws(TileError) -> Data? {
        if let d = data {
            data = nil
            return d.isEmpty ? nil : d
        }
        guard let file else { return nil }
        let n = try file.read(into: buffer)
        return n > 0 ? Data(UnsafeRawBufferPointer(rebasing: buffer[0..<n])) : nil
    }
}
