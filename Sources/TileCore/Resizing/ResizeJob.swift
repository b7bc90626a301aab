import Foundation

/// One run of ``ImageResizer``: decode once (DCT-scaled), resample per target, orient, encode, publish.
struct ResizeJob {
    enum Source { case file(InputFile), data(Data) }

    let source: Source
    /// The source's path when it is a regular file (a TIFF is read from it).
    var sourcePath: String? = nil
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
            // A JPEG already within the target is copied through; a PNG or TIFF is always encoded.
            if within && info.format == .jpeg && !options.reencodesSmallImages && !options.returnsPixels && target.path != nil {
                try copyThrough(to: target.path!)
                results[i] = .init(
                    target: target, width: uprightWidth, height: uprightHeight, wasCopied: true,
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
            results[i] = .init(
                target: targets[i], width: pixels.width, height: pixels.height, wasCopied: false,
                decodedWidth: decoded.width, decodedHeight: decoded.height, pixels: options.returnsPixels ? pixels : nil)
        }
        return results.map { $0! }
    }

    /// The decoder for the source's format: a JPEG's (scaled in the DCT domain), or another's (full
    /// size; a TIFF or JPEG 2000 from its own file, or spooled and decoded once its last byte has come).
    private func makeDecoder() throws(TileError) -> any RowDecoder {
        guard info.format == .jpeg else {
            return try info.format.masterDecoder(path: sourcePath, spoolDirectory: LevelFiles.defaultDirectory)
        }
        return try JPEGDecoder(
            warningLimit: options.warningLimit, maximumScanCount: options.maximumScanCount, allowsTruncation: false)
    }

    /// Decodes at 1/denominator (JPEG; other formats at full size), a strip at a time, feeding every
    /// resampler. Rows with alpha are composited onto white first: the outputs are JPEGs, and
    /// averaging composited pixels is compositing the alpha-weighted average.
    private func decode(denominator: Int, storedSizes: [(Int, Int)]) throws(TileError)
        -> ((width: Int, height: Int), [AreaResampler])
    {
        let decoder = try makeDecoder()
        let reader = try SourceReader(source)
        var size = (width: info.width, height: info.height)
        var resamplers: [AreaResampler] = []
        var stride = 0
        var strip = UnsafeMutableRawBufferPointer(start: nil, count: 0)
        defer { strip.deallocate() }
        var driver = DecodeDriver()
        var ended = false
        while try !driver.advance(
            decoder,
            header: { _ throws(TileError) in
                if let jpeg = decoder as? JPEGDecoder {
                    size = try jpeg.setScale(denominator: denominator)
                    try jpeg.storeCoefficients(options.coefficientStorage, in: LevelFiles.defaultDirectory, windowBytes: nil)
                }
                resamplers = storedSizes.map {
                    AreaResampler(
                        inputWidth: size.width, inputHeight: size.height,
                        outputWidth: min($0.0, size.width), outputHeight: min($0.1, size.height))
                }
                stride = size.width * 4
                strip = .allocate(byteCount: stride * 16, alignment: 64)
            },
            rows: { () throws(TileError) -> DecodeStep? in
                let (rows, step) = try decoder.readRows(into: strip, stride: stride, maxRows: 16)
                if info.hasAlpha { Self.compositeOntoWhite(UnsafeMutableRawBufferPointer(rebasing: strip[..<(rows * stride)])) }
                for r in 0..<rows {
                    let row = UnsafeRawBufferPointer(rebasing: strip[(r * stride)..<((r + 1) * stride)])
                    for k in resamplers.indices { resamplers[k].add(row: row) }
                }
                return step
            })
        {
            if decoder.isTruncated { throw TileError(.truncated, "the input ends before the image does") }
            guard !ended else {
                guard driver.phase != .header else {
                    throw TileError(.truncated, "the input ends inside the \(info.format.rawValue.uppercased()) header")
                }
                throw TileError(.truncated, "the input ends before the image does")
            }
            if let chunk = try reader.next() {
                try Self.feed(chunk, to: decoder)
            } else {
                try decoder.endInput()  // a spooled TIFF is read once all of it has come
                ended = true
            }
        }
        if decoder.isTruncated { throw TileError(.truncated, "the input ends before the image does") }
        return (size, resamplers)
    }

    private static func feed(_ chunk: Data, to decoder: any RowDecoder) throws(TileError) {
        let result = chunk.withUnsafeBytes { bytes in Result { () throws(TileError) in try decoder.feed(bytes) } }
        try result.get()
    }

    /// round((c * a + 255 * (255 - a)) / 255) for each colour, alpha 255: what JPEG outputs show.
    private static func compositeOntoWhite(_ pixels: UnsafeMutableRawBufferPointer) {
        for i in Swift.stride(from: 0, to: pixels.count - 3, by: 4) where pixels[i + 3] != 255 {
            let a = Int(pixels[i + 3])
            for c in 0..<3 { pixels[i + c] = UInt8((Int(pixels[i + c]) * a + 255 * (255 - a) + 127) / 255) }
            pixels[i + 3] = 255
        }
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
        // The output is RGB: an RGB profile describes it; a gray or CMYK one does not (see ColorProfile).
        if options.keepsICCProfile, let profile = info.colorProfile, profile.describes(channels: 3) {
            try encoder.writeICCProfile(profile.bytes)
        }
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
