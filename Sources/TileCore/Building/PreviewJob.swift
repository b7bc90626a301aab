import Foundation
import Dispatch
import Synchronization

/// One whole-image preview of a progressive JPEG (``PreviewPolicy``), made on a thread of its own
/// while the build goes on: the stream cut at the end of a scan, with an EOI appended, decoded at 1/8
/// scale into levels ``TileBuilder/previewLevel``... of the pyramid, then published as preliminary.
///
/// @unchecked Sendable: `decoder` is used by the job's thread only, but for `requestStop` (an atomic
/// store, safe from any thread); everything else is immutable, atomic, or Sendable.
final class PreviewJob: @unchecked Sendable {
    let scan: Int
    private let decoder: JPEGDecoder
    private let stopped = Atomic<Bool>(false)
    private let finished = Atomic<Bool>(false)
    private let group = DispatchGroup()

    /// Starts the job on a thread of its own, like the pyramid's writer threads (blocking work stays
    /// off Swift's cooperative pool, and the job does not take a thread of anyone's pool for its
    /// whole decode).
    /// - Parameters:
    ///   - prefix: the stream up to the end of scan `scan`.
    ///   - files: the pyramid's level files, of which the job writes levels `previewLevel...`.
    init(
        scan: Int, prefix: [UInt8], image: TiledImage, files: LevelFiles, scratchDirectory: String,
        options: BuildOptions
    ) throws(TileError) {
        self.scan = scan
        decoder = try JPEGDecoder(
            warningLimit: options.warningLimit, maximumScanCount: options.maximumScanCount, allowsTruncation: false)
        group.enter()
        let thread = Thread { [self] in
            do throws(TileError) {
                try run(prefix: prefix, image: image, files: files, scratchDirectory: scratchDirectory, options: options)
            } catch {
                // Best effort: a preview that fails or is stopped is not published; the build goes on.
            }
            finished.store(true, ordering: .releasing)
            group.leave()
        }
        thread.name = "tile-preview"
        thread.start()
    }

    /// Whether the job has ended (written and published, failed, or stopped).
    var isFinished: Bool { finished.load(ordering: .acquiring) }

    /// Stops the job soon (its decode fails at its next row of input) and waits until it has ended
    /// and nothing of it writes any more.
    func stop() {
        stopped.store(true, ordering: .relaxed)
        decoder.requestStop()
        group.wait()
    }

    /// Waits until the job has ended.
    func wait() { group.wait() }

    private func run(
        prefix: [UInt8], image: TiledImage, files: LevelFiles, scratchDirectory: String, options: BuildOptions
    ) throws(TileError) {
        try decoder.feed(prefix)  // the stream cut at the end of the scan
        try decoder.feed([UInt8]([0xFF, 0xD9]))  // and an EOI
        try decoder.endInput()
        let geometry = image.geometry
        let firstLevel = TileBuilder.previewLevel
        var writer: PyramidWriter?
        var size = (width: 0, height: 0)
        var hasEveryRow = false
        var driver = DecodeDriver()
        _ = try driver.advance(
            decoder,
            header: { _ throws(TileError) in
                let first = geometry.levels[firstLevel]
                size = try decoder.setScale(denominator: 1 << firstLevel)
                guard size.width == first.storedWidth, size.height == first.storedHeight else {
                    throw TileError(.corrupt, "the preview's size \(size) is not level \(firstLevel)'s")
                }
                try decoder.storeCoefficients(
                    options.coefficientStorage, in: scratchDirectory, windowBytes: options.coefficientWindowBytes)
            },
            started: { () throws(TileError) in
                let levels = try TileGeometry(
                    storedWidth: size.width, storedHeight: size.height, orientation: geometry.orientation,
                    placement: geometry.placement, tileSize: geometry.tileSize,
                    levels: .count(geometry.levels.count - firstLevel))
                // Counters of its own: the image's preview counters change only once every tile is written.
                writer = try PyramidWriter(
                    geometry: levels, files: LevelFiles(levelsFrom: firstLevel, of: files),
                    progress: TileRowCounters(count: levels.levels.count), writer: options.writer)
            },
            rows: { () throws(TileError) -> DecodeStep? in
                if stopped.load(ordering: .relaxed) { throw TileError(.cancelled, "the preview was stopped") }
                let step = try writer!.withRowBuffer { (buffer, stride, capacity) throws(TileError) in
                    let (rows, step) = try decoder.readRows(into: buffer, stride: stride, maxRows: capacity)
                    return (rows, step)
                }
                guard step == .done else { return step }
                hasEveryRow = true
                return nil  // every row is in: the end of the cut stream is not read
            })
        // The stream was cut after a scan, with an EOI: every byte is in, so a decode that stops short
        // of its rows stops for good.
        guard hasEveryRow, let writer else {
            switch driver.phase {
            case .header: throw TileError(.corrupt, "the preview's header is incomplete")
            case .starting: throw TileError(.corrupt, "the preview's scans are incomplete")
            default: throw TileError(.corrupt, "the preview decode ran out of bytes")
            }
        }
        try writer.finish()
        if stopped.load(ordering: .relaxed) { throw TileError(.cancelled, "the preview was stopped") }
        image.publishPreview(scan: scan, levelsFrom: firstLevel)
    }
}
