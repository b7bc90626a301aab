import Foundation
import Testing
import TestTraits
import TestSupport
import TileCore

/// A baseline JPEG with restart markers cut inside its scan: with ``BuildOptions/allowTruncated`` it
/// builds, grey below the cut, whatever the number of restart intervals left (each gives libjpeg's
/// "found marker 0xd9 instead of RSTn"; they no longer count toward the 100-warning limit).
@Suite("A cut file with restart markers", .ownThreads)
struct TruncatedRestartTests {
    /// 1024x2048, 4:2:0, a restart marker every MCU row: 128 intervals; cut at a fifth of its bytes.
    static func cutJPEG() throws -> (cut: Data, whole: Data) {
        let whole = try Synthetic.jpeg(.init(width: 1024, height: 2048, restartRows: 1))
        return (whole.prefix(whole.count / 5), whole)
    }

    @Test("builds with allowTruncated (raw and TIFF), grey below the cut; refused without", arguments: ["raw", "tiff"])
    func cutWithRestarts(_ format: String) throws {
        let (cut, _) = try Self.cutJPEG()
        var options = format == "raw" ? BuildOptions() : TIFFChecks.options()
        #expect(thrownCode { try TileBuilder.build(data: cut, options: options) } == .truncated)
        options.allowTruncated = true
        let builder = try TileBuilder(options: options)
        try builder.append(cut)
        let image = try builder.finish()
        #expect(builder.warningCount > 100)  // two a restart interval left: none counted toward the limit
        let level = try image.level(0)
        let bottom = try image.readTile(level: 0, column: level.columns - 1, row: level.rows - 1)
        let grey = stride(from: 0, to: bottom.count, by: 4).allSatisfy { i in
            (0..<3).allSatisfy { abs(Int(bottom[i + $0]) - 128) <= 1 } || bottom[i + 3] == 0
        }
        #expect(grey)
        let top = try image.readTile(level: 0, column: 0, row: 0)
        #expect(!stride(from: 0, to: top.count, by: 4).allSatisfy { top[$0] == 128 && top[$0 + 1] == 128 })
    }

    @Test("a whole stream whose restart markers are misnumbered still fails on the warning limit")
    func misnumberedRestarts() throws {
        let (_, whole) = try Self.cutJPEG()
        var damaged = [UInt8](whole)
        // Every restart marker made RST0: seven in eight are out of sequence, each a corrupt-data warning.
        var count = 0
        for i in 600..<(damaged.count - 1) where damaged[i] == 0xFF && (0xD1...0xD7).contains(damaged[i + 1]) {
            damaged[i + 1] = 0xD0
            count += 1
        }
        #expect(count > 100)
        var options = BuildOptions()
        options.allowTruncated = true
        #expect(thrownCode { try TileBuilder.build(data: Data(damaged), options: options) } == .tooManyWarnings)
    }
}
