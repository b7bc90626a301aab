import Foundation
import Testing
import TestTraits
import TestSupport
@testable import TileCore

/// JPEG 2000 masters cost what their bytes can justify (issue 37, point 2): a codestream of empty
/// packets that declares a huge tile of tiny code-blocks made OpenJPEG allocate a structure for every
/// code-block (7 GB for 242 bytes declaring 16384 x 16384 in 4 x 4 code-blocks). The codestreams are
/// written plainly by ISO/IEC 15444-1 Annex A (`Bombs.emptyJPEG2000`): SOC, SIZ, COD, QCD, one tile-part
/// of empty packets, EOC.
@Suite("JPEG 2000 masters: bounded work", .ownThreads)
struct JPEG2000BoundedWorkTests {
    @Test("a small codestream of empty packets in 4 x 4 code-blocks is read: every sample the DC level, 128")
    func emptyPacketsAreGray() throws {
        let (width, height) = (64, 48)
        let data = Data(Bombs.emptyJPEG2000(width: UInt32(width), height: UInt32(height)))
        let image = try TileBuilder.build(data: data)
        var rows: [UInt8] = []
        try image.forEachRow(level: 0) { _, row in rows.append(contentsOf: row) }
        // Zero coefficients are zero samples; the inverse DC level shift (G.1.2) adds 2^(8-1).
        let expected = [UInt8]((0..<(width * height)).flatMap { _ in [128, 128, 128, 255] as [UInt8] })
        #expect(rows == expected)
    }

    @Test(
        "a codestream declaring more code-blocks than its bytes can code is refused before OpenJPEG allocates",
        arguments: [
            (UInt32(16384), UInt8(0), UInt8(0)), (8192, 0, 0), (32768, 0, 0), (16384, 1, 0), (32768, 2, 2)
        ])
    func codeBlockBomb(side: UInt32, xcb: UInt8, ycb: UInt8) throws {
        let data = Data(Bombs.emptyJPEG2000(width: side, height: side, xcb: xcb, ycb: ycb))
        #expect(data.count < 256)
        let error = try #require(throws: TileError.self) { try TileBuilder.build(data: data) }
        #expect(error.code == .corrupt)
        #expect(error.message.contains("code-blocks"), "\(error.message)")
    }

    @Test("code-blocks made small by precincts (2 x 2: 1 x 1 blocks above resolution 0) or by a COC are counted and refused")
    func precinctsAndCOC() throws {
        // 64 x 64 code-blocks by the COD, but precincts of 2 x 2: OpenJPEG codes 1 x 1 blocks, 2^28 of them.
        for data in [
            Bombs.emptyJPEG2000(width: 16384, height: 16384, xcb: 4, ycb: 4, precinct: 1),
            Bombs.emptyJPEG2000(width: 16384, height: 16384, xcb: 4, ycb: 4, coc: 0)
        ] {
            // Refused from the markers, before the (here far too few) packets are looked at.
            let error = try #require(throws: TileError.self) { try TileBuilder.build(data: Data(data)) }
            #expect(error.code == .corrupt && error.message.contains("code-blocks"), "\(error.message)")
        }
        // Small images with the same styles are read: every sample 128.
        for data in [
            Bombs.emptyJPEG2000(width: 64, height: 48, xcb: 4, ycb: 4, precinct: 1),
            Bombs.emptyJPEG2000(width: 64, height: 48, xcb: 4, ycb: 4, coc: 0)
        ] {
            let image = try TileBuilder.build(data: Data(data))
            var rows: [UInt8] = []
            try image.forEachRow(level: 0) { _, row in rows.append(contentsOf: row) }
            #expect(rows == [UInt8]((0..<(64 * 48)).flatMap { _ in [128, 128, 128, 255] as [UInt8] }))
        }
    }

    @Test("real 64 x 64 code-blocks over a large tile stay within the allowance (refused only when their bytes are missing)")
    func ordinaryCodeBlocks() throws {
        // 4096 x 4096 in 64 x 64 code-blocks: 4,096 of them, far under the allowance: OpenJPEG reads it.
        for precinct in [nil, UInt8(7)] {  // and in 128 x 128 precincts (64 x 64 above resolution 0)
            let data = Data(Bombs.emptyJPEG2000(width: 4096, height: 4096, xcb: 4, ycb: 4, precinct: precinct))
            let info = try ImageInfo.read(data: data)
            #expect(info.width == 4096 && info.height == 4096)
            let image = try TileBuilder.build(data: data)
            #expect(try image.readTile(level: 0, column: 5, row: 7) == [UInt8]((0..<(256 * 256)).flatMap { _ in [128, 128, 128, 255] as [UInt8] }))
        }
    }
}
