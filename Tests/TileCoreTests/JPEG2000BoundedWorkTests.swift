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
    /// decomposition levels, code-blocks of 2^(xcb+2) x 2^(ycb+2), one quality layer, every packet
    /// empty (a 0 bit, padded to a byte): every coefficient is zero.
    static func emptyCodestream(width: UInt32, height: UInt32, levels: UInt8 = 5, xcb: UInt8 = 0, ycb: UInt8 = 0) -> [UInt8] {
        func be16(_ v: Int) -> [UInt8] { [UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        var out: [UInt8] = [0xFF, 0x4F]  // SOC
        // SIZ: Lsiz 38 + 3 a component, Rsiz 0, Xsiz, Ysiz, XOsiz, YOsiz, XTsiz, YTsiz, XTOsiz, YTOsiz,
        // Csiz 1, then Ssiz 7 (8-bit unsigned), XRsiz 1, YRsiz 1.
        out += [0xFF, 0x51] + be16(41) + be16(0) + be32(width) + be32(height) + be32(0) + be32(0)
        out += be32(width) + be32(height) + be32(0) + be32(0) + be16(1) + [7, 1, 1]
        // COD: Lcod 12, Scod 0 (no precincts, SOP, EPH), LRCP, 1 layer, no MCT, levels, xcb, ycb,
        // style 0, transform 1 (5/3 reversible).
        out += [0xFF, 0x52] + be16(12) + [0, 0] + be16(1) + [0, levels, xcb, ycb, 0, 1]
        // QCD: Sqcd 0x40 (2 guard bits, no quantisation), an exponent a subband (LL 8, HL and LH 9, HH 10).
        let subbands = [8] + (0..<Int(levels)).flatMap { _ in [9, 9, 10] }
        out += [0xFF, 0x5C] + be16(3 + subbands.count) + [0x40] + subbands.map { UInt8($0 << 3) }
        let packets = [UInt8](repeating: 0, count: Int(levels) + 1)  // one a resolution: "empty", padded
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

    @Test("a codestream declaring more code-blocks than its bytes can code is refused before OpenJPEG allocates", arguments: [
        (UInt32(16384), UInt8(0), UInt8(0)), (8192, 0, 0), (32768, 0, 0), (16384, 1, 0), (32768, 2, 2),
    ])
    func codeBlockBomb(side: UInt32, xcb: UInt8, ycb: UInt8) throws {
        let data = Data(Self.emptyCodestream(width: side, height: side, xcb: xcb, ycb: ycb))
        #expect(data.count < 256)
        let error = try #require(throws: TileError.self) { try TileBuilder.build(data: data) }
        #expect(error.code == .corrupt)
        #expect(error.message.contains("code-blocks"), "\(error.message)")
    }

    @Test("real 64 x 64 code-blocks over a large tile stay within the allowance (refused only when their bytes are missing)")
    func ordinaryCodeBlocks() throws {
        // 4096 x 4096 in 64 x 64 code-blocks: 4,096 of them, far under the allowance: OpenJPEG reads it.
        let data = Data(Self.emptyCodestream(width: 4096, height: 4096, xcb: 4, ycb: 4))
        let info = try ImageInfo.read(data: data)
        #expect(info.width == 4096 && info.height == 4096)
        let image = try TileBuilder.build(data: data)
        #expect(image.geometry.width == 4096)
    }
}
