import CJpegShim
import Foundation
import TileCore

/// The in-process scenarios, run once in a child process; the elapsed seconds go to `--report`.
func runChild(_ name: String, arguments: Arguments) throws {
    guard let input = arguments.value("--input"), let report = arguments.value("--report") else {
        throw BenchmarkError("--child needs --input and --report")
    }
    let clock = ContinuousClock()
    let start = clock.now
    switch name {
    case "decode-floor":
        var result = cjs_reference_result()
        guard cjs_reference_decode_file_discard(input, &result) == CJS_OK else {
            throw BenchmarkError("decode failed")
        }
    case "build", "build-buffered", "build-1thread", "build-mmap":
        // build: the defaults (pwrite strips, tiling and writing on threads of their own, O_DIRECT).
        // build-buffered: the same through the page cache; build-1thread: everything on the caller's
        // thread, through the page cache; build-mmap: the two-tile-row mmap window, one thread.
        var options = BuildOptions()
        options.writer = name == "build-mmap" ? .mappedWindow : .stripWrite
        options.overlapsWriting = name == "build" || name == "build-buffered"
        options.bypassesPageCache = name == "build"
        let image = try TileBuilder.build(contentsOfFile: input, options: options)
        guard image.isComplete else { throw BenchmarkError("incomplete pyramid") }
    default:
        throw BenchmarkError("unknown scenario \(name)")
    }
    let elapsed = clock.now - start
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    try "\(seconds)\n".write(toFile: report, atomically: false, encoding: .utf8)
}
