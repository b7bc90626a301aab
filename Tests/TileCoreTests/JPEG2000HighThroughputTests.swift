import Foundation
import Testing
import TestTraits
import TestSupport
@testable import TileCore

/// HTJ2K masters (ISO/IEC 15444-15), in the JPEG 2000 suite: decoded to the picture, in bands, and
/// corrupt code-blocks failing by name (OpenJPEG's own assertions caught), never killing the process.
extension JPEG2000MasterTests {
    /// HTJ2K (ISO/IEC 15444-15) files as Debian's encoders write them. `ojph_compress` writes a bare
    /// codestream whatever the name (`.jph` too); `grk_compress -M 64` a JP2 or a J2K.
    static let highThroughputKinds: [Kind] = [
        Kind(name: "ojph RGB lossless J2C", channels: 3, suffix: "j2c", options: ["-reversible", "true"], encoder: "ojph_compress"),
        Kind(
            name: "ojph gray 16-bit lossless, 32x32 code-blocks", channels: 1, maxValue: 65535, suffix: "j2c",
            options: ["-reversible", "true", "-block_size", "{32,32}"], encoder: "ojph_compress"),
        Kind(name: "ojph RGB lossy .jph", channels: 3, suffix: "jph", options: ["-qstep", "0.02"], lossy: true, encoder: "ojph_compress"),
        Kind(name: "grk RGB lossless JP2, 128x128 tiles", channels: 3, options: ["-M", "64", "-t", "128,128"], encoder: "grk_compress"),
        Kind(name: "grk RGBA lossless JP2", channels: 3, alpha: true, options: ["-M", "64"], encoder: "grk_compress"),
        Kind(
            name: "grk RGB irreversible J2K, 3 resolutions", channels: 3, suffix: "j2k", options: ["-M", "64", "-I", "-r", "12", "-n", "3"],
            lossy: true, encoder: "grk_compress")
    ]

    @Test(
        "HTJ2K masters: level 0 is the picture (lossless, by the depth rule) or opj_decompress's pixels (lossy); the header says HTJ2K",
        .enabled(if: Tools.have("ojph_compress", "grk_compress"), Comment(rawValue: Tools.missing("ojph_compress", "grk_compress"))),
        arguments: highThroughputKinds)
    func highThroughput(kind: Kind) throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let (width, height) = (301, 203)
        let path = try Self.master(kind, width: width, height: height, in: folder)
        let expected = kind.lossy ? try Self.decompressed(path, kind, in: folder) : Self.reference(kind, width: width, height: height)
        let info = try ImageInfo.read(contentsOfFile: path)
        #expect(info.format == .jpeg2000 && info.width == width && info.height == height && info.hasAlpha == kind.alpha)
        #expect(info.jpeg2000?.isHighThroughput == true && info.jpeg2000?.isCodestream == (kind.encoder == "ojph_compress" || kind.suffix == "j2k"))
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        for (way, image) in [("file", try TileBuilder.build(contentsOfFile: path)), ("pieces", try Synthetic.build(data, chunk: 997))] {
            var rows: [UInt8] = []
            try image.forEachRow(level: 0) { _, row in rows.append(contentsOf: row) }
            #expect(RGBAImage(width: width, height: height, pixels: rows) == expected, "\(kind) \(way)")
        }
    }

    /// OpenJPEG leaves an HT code-block zero (mid-gray) when a window inside its tile is decoded: bands
    /// of HTJ2K are whole rows of tiles, whatever the budget. Budgets of one row over one tile and over
    /// 128x128 tiles (each tile 128 rows, against the 1 to 2 rows such a budget gives other files).
    @Test(
        "HTJ2K in bands smaller than a tile: every row is the picture",
        .enabled(if: Tools.have("ojph_compress", "grk_compress"), Comment(rawValue: Tools.missing("ojph_compress", "grk_compress"))),
        arguments: [
            Kind(name: "ojph, one tile", channels: 3, suffix: "j2c", options: ["-reversible", "true"], encoder: "ojph_compress"),
            Kind(name: "grk, 128x128 tiles", channels: 3, options: ["-M", "64", "-t", "128,128"], encoder: "grk_compress")
        ])
    func highThroughputBands(kind: Kind) throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let (width, height) = (333, 257)
        let path = try Self.master(kind, width: width, height: height, in: folder)
        let decoder = try JPEG2000Decoder(path: path, spoolDirectory: folder, bandBudget: width * 3 * 4)
        #expect(try Self.rows(of: decoder, width: width, height: height) == Self.reference(kind, width: width, height: height))
    }

    /// OpenJPEG decodes a code-block as HT by its COD's code-block style (bit 6), with or without the
    /// CAP marker Part 15 asks for: an ojph codestream with its CAP cut out is still taken for HTJ2K and
    /// read a row of whole tiles at a time.
    @Test(
        "an HTJ2K codestream without its CAP marker is told by its COD, and read whole tiles at a time",
        .enabled(if: Tools.have("ojph_compress"), Comment(rawValue: Tools.missing("ojph_compress"))))
    func highThroughputWithoutCAP() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let kind = Kind(name: "ojph, one tile", channels: 3, suffix: "j2c", options: ["-reversible", "true"], encoder: "ojph_compress")
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: try Self.master(kind, width: 120, height: 90, in: folder))))
        // SOC, then SIZ (its length at offset 4), then CAP: FF50, its length, Pcap, Ccap.
        let cap = 4 + (Int(bytes[4]) << 8 | Int(bytes[5]))
        try #require(bytes[cap] == 0xFF && bytes[cap + 1] == 0x50)
        bytes.removeSubrange(cap..<(cap + 2 + (Int(bytes[cap + 2]) << 8 | Int(bytes[cap + 3]))))
        try Data(bytes).write(to: URL(fileURLWithPath: "\(folder)/nocap.j2c"))
        #expect(try ImageInfo.read(contentsOfFile: "\(folder)/nocap.j2c").jpeg2000?.isHighThroughput == true)
        let decoder = try JPEG2000Decoder(path: "\(folder)/nocap.j2c", spoolDirectory: folder, bandBudget: 120 * 3 * 4)
        #expect(try Self.rows(of: decoder, width: 120, height: 90) == Self.reference(kind, width: 120, height: 90))
    }

    /// OpenJPEG takes a COD in a tile-part header too, and decodes that tile's code-blocks as HT by its
    /// style: a codestream whose main header says nothing of HT (no CAP, its COD's bit 6 clear) but
    /// whose first tile-part's COD says HT is still told HTJ2K, so that it is decoded on the guarded
    /// thread (jp2_guard.c), and decodes to the picture.
    @Test(
        "an HTJ2K style only in a tile-part header is told HTJ2K",
        .enabled(if: Tools.have("ojph_compress"), Comment(rawValue: Tools.missing("ojph_compress"))))
    func highThroughputInTilePart() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let kind = Kind(name: "ojph, one tile", channels: 3, suffix: "j2c", options: ["-reversible", "true"], encoder: "ojph_compress")
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: try Self.master(kind, width: 120, height: 90, in: folder))))
        func marker(_ code: UInt8) throws -> Int { try #require((0..<(bytes.count - 1)).first { bytes[$0] == 0xFF && bytes[$0 + 1] == code }) }
        func length(at offset: Int) -> Int { Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3]) }
        // No CAP (FF50); the main COD (FF52: Lcod, Scod, SGcod, then levels, xcb, ycb, style) without bit 6.
        let cap = try marker(0x50)
        bytes.removeSubrange(cap..<(cap + 2 + length(at: cap)))
        let cod = try marker(0x52)
        let htCOD = Array(bytes[cod..<(cod + 2 + length(at: cod))])
        try #require(htCOD[12] & 0x40 != 0)
        bytes[cod + 12] &= ~0x40
        // The COD with bit 6 in the first tile-part's header, after its SOT (12 bytes; Psot grown by it).
        let sot = try marker(0x90)
        bytes.insert(contentsOf: htCOD, at: sot + 12)
        let psot = bytes[(sot + 6)..<(sot + 10)].reduce(0) { $0 << 8 | Int($1) } + htCOD.count
        bytes.replaceSubrange((sot + 6)..<(sot + 10), with: (0..<4).map { UInt8(psot >> (24 - 8 * $0) & 0xFF) })
        try Data(bytes).write(to: URL(fileURLWithPath: "\(folder)/hidden.j2c"))
        #expect(try ImageInfo.read(contentsOfFile: "\(folder)/hidden.j2c").jpeg2000?.isHighThroughput == true)
        let decoder = try JPEG2000Decoder(path: "\(folder)/hidden.j2c", spoolDirectory: folder)
        #expect(try Self.rows(of: decoder, width: 120, height: 90) == Self.reference(kind, width: 120, height: 90))
    }

    /// A row of HTJ2K tiles is decoded whole: one whose RGBA rows and samples pass 512 MiB is refused by
    /// name, before any row (6000x6000 RGB in one tile: 144 MB of RGBA and 432 MB of samples).
    @Test(
        "an HTJ2K tile too large to decode whole is refused as unsupported, saying why",
        .enabled(if: Tools.have("ojph_compress"), Comment(rawValue: Tools.missing("ojph_compress"))))
    func highThroughputTooLarge() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let side = 6000
        try (Data("P6\n\(side) \(side)\n255\n".utf8) + Data(count: side * side * 3)).write(to: URL(fileURLWithPath: "\(folder)/flat.ppm"))
        _ = try TIFFMasterTests.run("ojph_compress", ["-i", "\(folder)/flat.ppm", "-o", "\(folder)/flat.j2c"])
        try FileManager.default.removeItem(atPath: "\(folder)/flat.ppm")
        do {
            _ = try TileBuilder.build(contentsOfFile: "\(folder)/flat.j2c")
            Issue.record("a 6000x6000 HTJ2K tile was decoded")
        } catch {
            #expect(error.code == .unsupported && "\(error)".contains("HTJ2K tiles of 6000x6000"), "\(error)")
        }
        // Tiled, the same picture is taken (its header read; decoding 36 MP is left to the tests above).
        try (Data("P6\n\(side) \(side)\n255\n".utf8) + Data(count: side * side * 3)).write(to: URL(fileURLWithPath: "\(folder)/flat.ppm"))
        _ = try TIFFMasterTests.run("ojph_compress", ["-i", "\(folder)/flat.ppm", "-o", "\(folder)/tiled.j2c", "-tile_size", "{1024,1024}"])
        let decoder = try JPEG2000Decoder(path: "\(folder)/tiled.j2c", spoolDirectory: folder)
        try decoder.endInput()
        #expect(try decoder.readSourceHeader()?.width == side)
    }

    /// Debian's OpenJPEG 2.5.0 keeps its assertions, and its HT block decoder asserts on what a corrupt
    /// code-block holds (ht_dec.c:319: a MEL byte after 0xFF above 0x8F), which aborted the process: a
    /// hostile .jph killed `tiler`. Every pair of bytes in the first code-blocks is set to FF FF in turn:
    /// each file is a typed error or decodes, some fail by the assertion (caught, named), the process
    /// lives on, and the untouched file still decodes to the picture, from bytes and from a file (where
    /// the decode would otherwise use OpenJPEG's threads).
    @Test(
        "corrupt HTJ2K code-blocks that fail OpenJPEG's assertions: typed errors, the process alive",
        .enabled(if: Tools.have("ojph_compress"), Comment(rawValue: Tools.missing("ojph_compress"))))
    func highThroughputAssertions() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let kind = Kind(name: "ojph", channels: 3, suffix: "j2c", options: ["-reversible", "true", "-num_decomps", "3"], encoder: "ojph_compress")
        let (width, height) = (64, 48)
        let path = try Self.master(kind, width: width, height: height, in: folder)
        let data = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let sod = try #require((0..<(data.count - 1)).first { data[$0] == 0xFF && data[$0 + 1] == 0x93 }) + 2
        var asserted: [Int] = []
        for at in sod..<min(sod + 400, data.count - 2) {
            var corrupt = data
            corrupt[at] = 0xFF
            corrupt[at + 1] = 0xFF
            guard let error = thrownError({ try TileBuilder.build(data: corrupt) }) else { continue }
            #expect([.corrupt, .truncated].contains(error.code), "FF FF at \(at): \(error)")
            if "\(error)".contains("OpenJPEG's own check failed (ht_dec.c:") { asserted.append(at) }
        }
        #expect(!asserted.isEmpty, "no FF FF in the first 400 bytes of code-blocks failed an assertion of OpenJPEG's HT decoder")
        if let at = asserted.first {
            var corrupt = data
            corrupt[at] = 0xFF
            corrupt[at + 1] = 0xFF
            try Data(corrupt).write(to: URL(fileURLWithPath: "\(folder)/corrupt.j2c"))
            let error = thrownError { try TileBuilder.build(contentsOfFile: "\(folder)/corrupt.j2c") }
            let message = error.map { "\($0)" } ?? "no error"
            #expect(error?.code == .corrupt && message.contains("OpenJPEG's own check failed"), "\(message)")
        }
        for image in [try TileBuilder.build(data: data), try TileBuilder.build(contentsOfFile: path)] {
            var rows: [UInt8] = []
            try image.forEachRow(level: 0) { _, row in rows.append(contentsOf: row) }
            #expect(RGBAImage(width: width, height: height, pixels: rows) == Self.reference(kind, width: width, height: height))
        }
    }

    /// The fuzzer's input of 2026-12-03 (jp2_master_fuzz, 895 bytes): a main header whose CAP segment
    /// ends at an EOC. OpenJPEG reads past a marker it does not expect byte by byte, finds a later CAP and
    /// COD that say HT, and decoded the file's code-blocks on its worker threads, where an assertion
    /// (ht_dec.c:319) cannot be caught: the process aborted. A header the scan cannot read through as
    /// OpenJPEG does is now taken for HT (one thread). From a file (where threads would be used): a typed
    /// error or an image, the process alive.
    @Test("a header OpenJPEG reads past an EOC, an HT code-block style behind it: decoded on one thread, its assertion caught")
    func highThroughputBehindEndOfCodestream() throws {
        let base64 =
            "/0//UQAvQAAAAAAlAAAAHQAAAAAAAAAAAAAAJQAAAB0AAAAAAAAAAAADBwEBBwEBBwEB/1AAU3RlYW0gdG9vIHNob3J0hwAAACL/"
            + "UgAp////////AH9A/wAEXAAXImc0Z0xnTGcAAAAA/08AAAAKAP9RAC8AAFEAAAAAABT/kwFs//kAAAAAAf/ZZFAZoMT/T/9RAC9A"
            + "AAAAACUAAAAdAAAAAAAAAAAAAAAlAAAAHQAAAAAAAAAAAAMHAQEHAQEHAQH/UAAIAAIAAAAi/1IADAACAAEBAwQEQAD/XAAXImc1"
            + "Z0xnTGdkUElKHyaKewD20ldh/2QAFgABT3BlbkpQSCBWZXIgMC45LjAu/5AACgAAAAACZQAB/5PABdIANSuu////////////////"
            + "//////////////////////////8AAAAAAAAAAAAAAAAAACUAAAgdAAAAAAAAAAAAAw8BAQ8BAQ8BAf9SAAwAAAABAQQEBAAB/1wA"
            + "EECAiIiQiIiQiIiQiIiQ/2QAJQABQ4ELT6fcpwe7jHFyZWF0ZWQgYnkgT3BlbkpQRUcgdmVyc2lvbiAyLjUuMP+QAAoAAAAABawA"
            + "Af+T3/iQeAe2n5CaX/9P/1EAKQAAAABAAAAAQAAAlpIdtnX21HLjjiBmpnb6AAAAheHJ1FZu7h+PIPftsIlpBCn/2VBtJVo/jSoO"
            + "c18AAADAF7/AF7NAF6iA9pZ+//////////////////////////////////////////////////////////////////////8KQf//"
            + "//////////////////////////////////////////////9/SaQAAtAvMxxdl0IgSQCBhCgYVQ3MMEkE/l0oZwd1TOQenRDgOMbw"
            + "COrIVZQBIf//////6wQAAAAAAAD/////////////////////////////////////f0mkAALQLzMcXZdCIEkAgYQoGFUNzDBJBP5d"
            + "KGcHdUzkHp0Q4DjG8AjqyFWUASFJUhAAWAEAAPoD8TJryqIckqI2p4wspw1AvZrmf8xnIv52y1+z/9m4kkpVrz2su5+cIRI56nmV"
            + "ASdcjVukyDuK/qCIICGI+CDi54ELT6fcpwe7jHEOc18AAADAF7/AF7NAF7wo0/5PXJOogPaWfgAer4Ainlz+c4D/GOaE2Q=="
        let bytes = try #require(Data(base64Encoded: base64))
        #expect(bytes.count == 895)
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try bytes.write(to: URL(fileURLWithPath: "\(folder)/fuzzed.j2c"))
        for build in [{ try TileBuilder.build(contentsOfFile: "\(folder)/fuzzed.j2c") }, { try TileBuilder.build(data: bytes) }] {
            if let error = thrownError({ _ = try build() }) {
                #expect([.corrupt, .truncated, .unsupported, .tooLarge].contains(error.code), "\(error)")
            }
        }
    }

    /// A JPH file (ISO/IEC 15444-15 Annex D: a JP2 file whose brand, and compatibility list, say `jph `)
    /// made from grk_compress's JP2 by rewriting its `ftyp` box; no Debian tool writes one.
    @Test(
        "a JPH file (the JP2 boxes, brand jph) is the picture",
        .enabled(if: Tools.have("grk_compress"), Comment(rawValue: Tools.missing("grk_compress"))))
    func jphFile() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let kind = Kind(name: "grk RGB lossless", channels: 3, options: ["-M", "64"], encoder: "grk_compress")
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: try Self.master(kind, width: 97, height: 61, in: folder))))
        // The ftyp box follows the 12-byte signature box: length, "ftyp", brand, minor version, compatibility list.
        try #require(String(decoding: bytes[16..<24], as: UTF8.self) == "ftypjp2 ")
        let length = bytes[12..<16].reduce(0) { $0 << 8 | Int($1) }
        bytes.replaceSubrange(20..<24, with: Array("jph ".utf8))
        for at in stride(from: 28, to: 12 + length, by: 4) where String(decoding: bytes[at..<(at + 4)], as: UTF8.self) == "jp2 " {
            bytes.replaceSubrange(at..<(at + 4), with: Array("jph ".utf8))
        }
        try Data(bytes).write(to: URL(fileURLWithPath: "\(folder)/master.jph"))
        let info = try ImageInfo.read(contentsOfFile: "\(folder)/master.jph")
        #expect(info.jpeg2000?.isCodestream == false && info.jpeg2000?.isHighThroughput == true)
        var rows: [UInt8] = []
        try TileBuilder.build(contentsOfFile: "\(folder)/master.jph").forEachRow(level: 0) { _, row in rows.append(contentsOf: row) }
        #expect(RGBAImage(width: 97, height: 61, pixels: rows) == Self.reference(kind, width: 97, height: 61))
    }
}
