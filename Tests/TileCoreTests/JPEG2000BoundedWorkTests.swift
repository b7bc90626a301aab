import Foundation
import Testing
import TestSupport
@testable import TileCore

/// JPEG 2000 masters cost what their bytes can justify (issue 37, point 2): a codestream of empty
/// packets that declares a huge tile of tiny code-blocks made OpenJPEG allocate a structure for every
/// code-block (7 GB for 242 bytes declaring 16384 x 16384 in 4 x 4 code-blocks). The codestreams are
/// written plainly here by ISO/IEC 15444-1 Annex A: SOC, SIZ, COD, QCD, one tile-part of empty packets, EOC.
@Suite("JPEG 2000 masters: bounded work")
struct JPEG2000BoundedWorkTests {
    /// A one-tile, one-component, 8-bit codestream of `width` x `height`, reversible 5/3, `levels`
    /// decomposition levels, code-blocks of 2^(xcb+2) x 2^(ycb+2), precincts of 2^pp x 2^pp at every
    /// resolution when `precinct` is given (else the default, 2^15), a COC for component 0 with
    /// code-blocks of 2^(coc+2) when `coc` is given, one quality layer, every packet empty (a 0 bit,
    /// padded to a byte): every coefficient is zero.
    static func emptyCodestream(
        width: UInt32, height: UInt32, levels: UInt8 = 5, xcb: UInt8 = 0, ycb: UInt8 = 0, precinct: UInt8? = nil, coc: UInt8? = nil
    ) -> [UInt8] {
        func be16(_ v: Int) -> [UInt8] { [UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        var out: [UInt8] = [0xFF, 0x4F]  // SOC
        // SIZ: Lsiz 38 + 3 a component, Rsiz 0, Xsiz, Ysiz, XOsiz, YOsiz, XTsiz, YTsiz, XTOsiz, YTOsiz,
        // Csiz 1, then Ssiz 7 (8-bit unsigned), XRsiz 1, YRsiz 1.
        out += [0xFF, 0x51] + be16(41) + be16(0) + be32(width) + be32(height) + be32(0) + be32(0)
        out += be32(width) + be32(height) + be32(0) + be32(0) + be16(1) + [7, 1, 1]
        // COD: Lcod, Scod (bit 0: precincts given), LRCP, 1 layer, no MCT, levels, xcb, ycb, style 0,
        // transform 1 (5/3 reversible), then a PPx | PPy << 4 byte a resolution.
        let precincts = precinct.map { [UInt8](repeating: $0 | $0 << 4, count: Int(levels) + 1) } ?? []
        out += [0xFF, 0x52] + be16(12 + precincts.count) + [precinct == nil ? 0 : 1, 0] + be16(1) + [0, levels, xcb, ycb, 0, 1] + precincts
        // COC (A.6.2): Lcoc 9, Ccoc 0 (one byte: fewer than 257 components), Scoc 0, levels, xcb, ycb, style, transform.
        if let coc { out += [0xFF, 0x53] + be16(9) + [0, 0, levels, coc, coc, 0, 1] }
        // QCD: Sqcd 0x40 (2 guard bits, no quantisation), an exponent a subband (LL 8, HL and LH 9, HH 10).
        let subbands = [8] + (0..<Int(levels)).flatMap { _ in [9, 9, 10] }
        out += [0xFF, 0x5C] + be16(3 + subbands.count) + [0x40] + subbands.map { UInt8($0 << 3) }
        // One empty packet a precinct of each resolution (B.6: resolution r is ceil(size / 2^(levels - r))
        // on each side, cut into precincts of 2^pp).
        var packetCount = 0
        for r in 0...Int(levels) {
            let scale = 1 << (Int(levels) - r), side = 1 << Int(precinct ?? 15)
            let (w, h) = ((Int(width) + scale - 1) / scale, (Int(height) + scale - 1) / scale)
            packetCount += ((w + side - 1) / side) * ((h + side - 1) / side)
        }
        let packets = [UInt8](repeating: 0, count: packetCount)
        // SOT: Lsot 10, Isot 0, Psot (this tile-part's bytes from SOT), TPsot 0, TNsot 1; then SOD.
        out += [0xFF, 0x90] + be16(10) + be16(0) + be32(UInt32(12 + 2 + packets.count)) + [0, 1]
        out += [0xFF, 0x93] + packets
        out += [0xFF, 0xD9]  // EOC
        return out
    }

    @Test("a small codestream of empty packets in 4 x 4 code-blocks is read: every sample the DC level, 128")
    func emptyPacketsAreGray() throws {
        let (width, height) = (64, 48)
        let data = Data(Self.emptyCodestream(width: UInt32(width), height: UInt32(height)))
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
        let data = Data(Self.emptyCodestream(width: side, height: side, xcb: xcb, ycb: ycb))
        #expect(data.count < 256)
        let error = try #require(throws: TileError.self) { try TileBuilder.build(data: data) }
        #expect(error.code == .corrupt)
        #expect(error.message.contains("code-blocks"), "\(error.message)")
    }

    @Test("code-blocks made small by precincts (2 x 2: 1 x 1 blocks above resolution 0) or by a COC are counted and refused")
    func precinctsAndCOC() throws {
        // 64 x 64 code-blocks by the COD, but precincts of 2 x 2: OpenJPEG codes 1 x 1 blocks, 2^28 of them.
        for data in [
            Self.emptyCodestream(width: 16384, height: 16384, xcb: 4, ycb: 4, precinct: 1),
            Self.emptyCodestream(width: 16384, height: 16384, xcb: 4, ycb: 4, coc: 0)
        ] {
            // Refused from the markers, before the (here far too few) packets are looked at.
            let error = try #require(throws: TileError.self) { try TileBuilder.build(data: Data(data)) }
            #expect(error.code == .corrupt && error.message.contains("code-blocks"), "\(error.message)")
        }
        // Small images with the same styles are read: every sample 128.
        for data in [
            Self.emptyCodestream(width: 64, height: 48, xcb: 4, ycb: 4, precinct: 1),
            Self.emptyCodestream(width: 64, height: 48, xcb: 4, ycb: 4, coc: 0)
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
            let data = Data(Self.emptyCodestream(width: 4096, height: 4096, xcb: 4, ycb: 4, precinct: precinct))
            let info = try ImageInfo.read(data: data)
            #expect(info.width == 4096 && info.height == 4096)
            let image = try TileBuilder.build(data: data)
            #expect(try image.readTile(level: 0, column: 5, row: 7) == [UInt8]((0..<(256 * 256)).flatMap { _ in [128, 128, 128, 255] as [UInt8] }))
        }
    }
}
