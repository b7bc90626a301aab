import Testing
import TestTraits
@testable import TileCore

/// The one decode loop against a scripted decoder: the order of its calls, where it stops for bytes,
/// and that it never reads rows before the header's step or finishes before the last row.
@Suite("DecodeDriver", .ownThreads)
struct DecodeDriverTests {
    /// A decoder whose answers come from a script of bytes fed: the header needs 2 feeds, the start 3,
    /// then each feed allows 2 of its 5 rows, and its end needs the input ended.
    final class ScriptedDecoder: RowDecoder {
        var calls: [String] = []
        var fed = 0
        var ended = false
        var rowsRead = 0
        var bytesBuffered: Int { 0 }
        var warningCount: Int { 0 }
        var lastMessage: String { "" }
        var isTruncated: Bool { false }
        let height = 5

        func feed(_ bytes: UnsafeRawBufferPointer) throws(TileError) { fed += 1 }
        func endInput() throws(TileError) { ended = true }
        func readSourceHeader() throws(TileError) -> SourceHeader? {
            calls.append("header")
            return fed >= 2
                ? .other(ImageInfo(png: 1, height: height, bitDepth: 8, isGray: false, hasAlpha: false, iccProfile: nil, pixelsPerMetre: nil)) : nil
        }
        func start() throws(TileError) -> DecodeStep {
            calls.append("start")
            return fed >= 3 ? .ready : .needData
        }
        func readRows(into buffer: UnsafeMutableRawBufferPointer, stride: Int, maxRows: Int) throws(TileError)
            -> (rows: Int, step: DecodeStep)
        {
            let allowed = min(height, 2 * (fed - 2)) - rowsRead
            let rows = min(allowed, maxRows)
            rowsRead += rows
            calls.append("rows \(rows)")
            return (rows, rowsRead == height ? .done : (rows < maxRows ? .needData : .ready))
        }
        func finish() throws(TileError) -> DecodeStep {
            calls.append("finish")
            return ended ? .done : .needData
        }
    }

    @Test("header, start, rows and the input's end in that order, each waiting for the bytes it needs")
    func order() throws {
        let decoder = ScriptedDecoder()
        var driver = DecodeDriver()
        var events: [String] = []
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 8, alignment: 4)
        defer { buffer.deallocate() }
        func advance() throws -> Bool {
            try driver.advance(
                decoder, header: { header throws(TileError) in events.append("header \(header.height)") },
                started: { events.append("started") },
                rows: { () throws(TileError) -> DecodeStep? in
                    try decoder.readRows(into: buffer, stride: 4, maxRows: 2).step
                })
        }
        let byte: [UInt8] = [0]
        #expect(try !advance())  // nothing fed
        #expect(driver.phase == .header)
        for _ in 0..<2 { byte.withUnsafeBytes { try? decoder.feed($0) } }
        #expect(try !advance())  // the header, and a start that needs more
        #expect(driver.phase == .starting)
        byte.withUnsafeBytes { try? decoder.feed($0) }
        #expect(try !advance())  // started; 2 rows, then more bytes wanted
        #expect(driver.phase == .rows)
        for _ in 0..<2 { byte.withUnsafeBytes { try? decoder.feed($0) } }
        #expect(try !advance())  // the last 3 rows; the end of the input is not there yet
        #expect(driver.phase == .finishing)
        try decoder.endInput()
        #expect(try advance())
        #expect(driver.phase == .done)
        #expect(try advance())  // an ended decode stays ended, and calls nothing
        #expect(events == ["header 5", "started"])
        #expect(
            decoder.calls == [
                "header", "header", "start", "start", "rows 2", "rows 0", "rows 2", "rows 1", "finish", "finish"
            ])
    }
}
