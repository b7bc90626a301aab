import Foundation
import Testing
import TestTraits
import TestSupport
@testable import TileCore

/// JPEG 2000 masters (issue 28). Test files are made here by OpenJPEG's `opj_compress` (and vips) from
/// pictures written plainly in the test; the references are the picture itself for lossless files
/// (16-bit and 12-bit samples reduced by the documented rule round(v * 255 / (2^P - 1)) written here),
/// and `opj_decompress`'s output for lossy ones.
@Suite(
    "JPEG 2000 masters",
    .enabled(
        if: Tools.have("opj_compress", "opj_decompress", "pnmtopng"), Comment(rawValue: Tools.missing("opj_compress", "opj_decompress", "pnmtopng"))),
    .ownThreads)
struct JPEG2000MasterTests {
    struct Kind: CustomStringConvertible, Sendable {
        var name: String
        /// 1 gray, 3 RGB; with `alpha` one more.
        var channels: Int
        var maxValue = 255
        var alpha = false
        var suffix = "jp2"
        var options: [String] = []
        var lossy = false
        /// The program that compresses it: `opj_compress`, or an HTJ2K encoder (`ojph_compress`, `grk_compress`).
        var encoder = "opj_compress"
        var description: String { name }
    }

    static let kinds: [Kind] = [
        Kind(name: "RGB lossless, 64x64 tiles", channels: 3, options: ["-t", "64,64"]),
        Kind(
            name: "RGB lossy J2K, one tile, precincts, RPCL", channels: 3, suffix: "j2k",
            options: ["-r", "20", "-c", "[64,64],[32,32]", "-p", "RPCL"], lossy: true),
        Kind(
            name: "RGB irreversible, 96x96 tiles, SOP/EPH, 32x32 code-blocks", channels: 3,
            options: ["-I", "-r", "10", "-t", "96,96", "-SOP", "-EPH", "-b", "32,32"], lossy: true),
        Kind(
            name: "gray lossless, 3 resolutions, image and tile offsets", channels: 1, options: ["-n", "3", "-t", "96,80", "-d", "7,5", "-T", "3,2"]),
        Kind(name: "gray 16-bit lossless, tiles", channels: 1, maxValue: 65535, options: ["-t", "128,128"]),
        Kind(name: "RGB 12-bit lossless", channels: 3, maxValue: 4095),
        Kind(name: "RGBA lossless", channels: 3, alpha: true, options: ["-t", "128,64"]),
        Kind(name: "gray+alpha lossless J2K", channels: 1, alpha: true, suffix: "j2k"),
        // 15,351 tiles: windows of many tile columns each (one codec per tile would read the main header 15,351 times).
        Kind(name: "gray, 1x4 tiles", channels: 1, suffix: "j2k", options: ["-t", "1,4", "-n", "1"])
    ]

    static func folder() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("jp2-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// Sample `c` of pixel (x, y): a pattern that uses the whole range (alpha is channel `channels`).
    static func sample(_ x: Int, _ y: Int, _ c: Int, _ maxValue: Int) -> Int {
        (x * 7919 + y * 104_729 + c * 7_777 + (x * y) % 977) % (maxValue + 1)
    }

    /// The picture as 8-bit RGBA by the documented rules (gray repeated, alpha 255 where none).
    static func reference(_ kind: Kind, width: Int, height: Int) -> RGBAImage {
        func to8(_ v: Int) -> UInt8 { UInt8(kind.maxValue == 255 ? v : (v * 255 + kind.maxValue / 2) / kind.maxValue) }
        var pixels = [UInt8]()
        pixels.reserveCapacity(width * height * 4)
        for y in 0..<height {
            for x in 0..<width {
                let colour = (0..<kind.channels).map { to8(sample(x, y, $0, kind.maxValue)) }
                pixels += kind.channels == 1 ? [colour[0], colour[0], colour[0]] : colour
                pixels.append(kind.alpha ? to8(sample(x, y, kind.channels, kind.maxValue)) : 255)
            }
        }
        return RGBAImage(width: width, height: height, pixels: pixels)
    }

    /// The master of `kind` at `folder/master.<suffix>`: a PGM/PPM (16-bit big-endian past 255), or a
    /// PNG with alpha (8-bit, libpng through the shim), compressed by `opj_compress`.
    static func master(_ kind: Kind, width: Int, height: Int, in folder: String) throws -> String {
        let input: String
        if kind.alpha {
            input = "\(folder)/picture.png"
            let rgba = reference(kind, width: width, height: height)
            let png = try RGBAPixels(width: width, height: height, bytes: rgba.pixels).encoded(as: .png)
            if kind.channels == 1 {
                // Gray + alpha: netpbm's pnmtopng writes it from a PGM and an alpha PGM.
                let gray = Data("P5\n\(width) \(height)\n255\n".utf8) + Data(stride(from: 0, to: rgba.pixels.count, by: 4).map { rgba.pixels[$0] })
                let alpha = Data("P5\n\(width) \(height)\n255\n".utf8) + Data(stride(from: 3, to: rgba.pixels.count, by: 4).map { rgba.pixels[$0] })
                try gray.write(to: URL(fileURLWithPath: "\(folder)/gray.pgm"))
                try alpha.write(to: URL(fileURLWithPath: "\(folder)/alpha.pgm"))
                try TIFFMasterTests.run("pnmtopng", ["-alpha", "\(folder)/alpha.pgm", "\(folder)/gray.pgm"]).write(to: URL(fileURLWithPath: input))
            } else {
                try png.write(to: URL(fileURLWithPath: input))
            }
        } else {
            input = "\(folder)/picture.\(kind.channels == 1 ? "pgm" : "ppm")"
            var data = Data("\(kind.channels == 1 ? "P5" : "P6")\n\(width) \(height)\n\(kind.maxValue)\n".utf8)
            for y in 0..<height {
                for x in 0..<width {
                    for c in 0..<kind.channels {
                        let v = sample(x, y, c, kind.maxValue)
                        if kind.maxValue > 255 { data += [UInt8(v >> 8), UInt8(v & 0xFF)] } else { data.append(UInt8(v)) }
                    }
                }
            }
            try data.write(to: URL(fileURLWithPath: input))
        }
        let master = "\(folder)/master.\(kind.suffix)"
        _ = try TIFFMasterTests.run(kind.encoder, ["-i", input, "-o", master] + kind.options)
        return master
    }

    /// `opj_decompress`'s pixels of `path` (a PNG for alpha, else PGM/PPM; 8-bit samples asked for lossy files).
    static func decompressed(_ path: String, _ kind: Kind, in folder: String) throws -> RGBAImage {
        let out = "\(folder)/reference.png"
        _ = try TIFFMasterTests.run("opj_decompress", ["-i", path, "-o", out])
        return try Reference.decodePNG(Data(contentsOf: URL(fileURLWithPath: out)))
    }

    @Test("level 0 is the picture (lossless) or opj_decompress's pixels (lossy), read from the file, pushed whole and in pieces", arguments: kinds)
    func levelZero(kind: Kind) throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let (width, height) = (301, 203)
        let path = try Self.master(kind, width: width, height: height, in: folder)
        let expected = kind.lossy ? try Self.decompressed(path, kind, in: folder) : Self.reference(kind, width: width, height: height)
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        let info = try ImageInfo.read(contentsOfFile: path)
        #expect(info.format == .jpeg2000 && info.width == width && info.height == height && info.hasAlpha == kind.alpha)
        #expect(info.jpeg2000?.isCodestream == (kind.suffix == "j2k") && info.jpeg2000?.isHighThroughput == false)
        let built = [
            ("file", try TileBuilder.build(contentsOfFile: path)), ("whole", try TileBuilder.build(data: data)),
            ("pieces", try Synthetic.build(data, chunk: 997))
        ]
        for (way, image) in built {
            var rows: [UInt8] = []
            try image.forEachRow(level: 0) { _, row in rows.append(contentsOf: row) }
            #expect(RGBAImage(width: width, height: height, pixels: rows) == expected, "\(kind) \(way)")
        }
    }

    /// Every row `decoder` gives (the whole input, its header read first), 5 rows a call; nil when it
    /// stops short of `height` rows.
    static func rows(of decoder: JPEG2000Decoder, width: Int, height: Int) throws -> RGBAImage? {
        try decoder.endInput()
        _ = try #require(try decoder.readSourceHeader())
        var pixels = [UInt8](repeating: 0, count: width * height * 4)
        var done = 0
        while done < height {
            let (got, step) = try pixels.withUnsafeMutableBytes { raw in
                try decoder.readRows(
                    into: UnsafeMutableRawBufferPointer(rebasing: raw[(done * width * 4)...]), stride: width * 4, maxRows: min(5, height - done))
            }
            done += got
            if step == .done || got == 0 { break }
        }
        return done == height ? RGBAImage(width: width, height: height, pixels: pixels) : nil
    }

    @Test("bands smaller than a row of tiles: every band's rows as the whole decode's", arguments: [1, 7, 64])
    func bands(rows: Int) throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let kind = Kind(name: "RGB lossy, 128x128 tiles", channels: 3, options: ["-r", "15", "-t", "128,128", "-d", "5,9"], lossy: true)
        let path = try Self.master(kind, width: 333, height: 257, in: folder)
        let expected = try Self.decompressed(path, kind, in: folder)
        // A budget of `rows` rows of OpenJPEG's samples (3 components, 4 bytes each).
        let decoder = try JPEG2000Decoder(path: path, spoolDirectory: folder, bandBudget: rows * 333 * 3 * 4)
        #expect(try Self.rows(of: decoder, width: 333, height: 257) == expected)
        #expect(decoder.bandByteCount <= rows * 333 * 3 * 4)
    }

    /// `jp2` with its `colr` box replaced by one that carries `profile` (method 2, an ICC profile), as
    /// ISO 15444-1 I.5.3.3 lays it out: the `jp2h` box's length grows by the difference.
    static func withProfile(_ jp2: [UInt8], _ profile: [UInt8]) throws -> [UInt8] {
        func box(at offset: Int) -> (length: Int, type: String) {
            (jp2[offset..<(offset + 4)].reduce(0) { $0 << 8 | Int($1) }, String(decoding: jp2[(offset + 4)..<(offset + 8)], as: UTF8.self))
        }
        func bigEndian(_ value: Int) -> [UInt8] { (0..<4).map { UInt8(value >> (24 - 8 * $0) & 0xFF) } }
        var at = 0
        while box(at: at).type != "jp2h" { at += box(at: at).length }
        let header = at
        var inner = header + 8
        while box(at: inner).type != "colr" { inner += box(at: inner).length }
        let old = box(at: inner).length
        let colr = bigEndian(8 + 3 + profile.count) + Array("colr".utf8) + [2, 0, 0] + profile
        var out = Array(jp2[..<inner]) + colr + jp2[(inner + old)...]
        out.replaceSubrange(header..<(header + 4), with: bigEndian(box(at: header).length + colr.count - old))
        return out
    }

    @Test(
        "a vips JP2 (its tiles) is opj_decompress's pixels; a JP2's ICC profile reaches the image and its outputs",
        .enabled(if: Tools.have("vips", "djpeg"), Comment(rawValue: Tools.missing("vips", "djpeg"))))
    func vipsAndProfile() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try ICCProfiles.jpeg(width: 640, height: 480, profile: ICCProfiles.profile()).write(to: URL(fileURLWithPath: "\(folder)/a.jpg"))
        _ = try TIFFMasterTests.run("vips", ["copy", "\(folder)/a.jpg", "\(folder)/a.jp2[Q=60,tile-width=128,tile-height=128]"])
        let image = try TileBuilder.build(contentsOfFile: "\(folder)/a.jp2")
        let expected = try Self.decompressed("\(folder)/a.jp2", Kind(name: "vips", channels: 3), in: folder)
        var rows: [UInt8] = []
        try image.forEachRow(level: 0) { _, row in rows.append(contentsOf: row) }
        #expect(RGBAImage(width: 640, height: 480, pixels: rows) == expected)
        #expect(try ImageInfo.read(contentsOfFile: "\(folder)/a.jp2").jpeg2000?.tileWidth == 128)
        // vips writes no profile into JP2s: one is put into the colr box here.
        let profile = ICCProfiles.profile(padding: 900)
        let withProfile = try Self.withProfile([UInt8](Data(contentsOf: URL(fileURLWithPath: "\(folder)/a.jp2"))), profile)
        let profiled = try TileBuilder.build(data: withProfile)
        #expect(profiled.colorProfile?.bytes == profile)
        let request = try ImageRequest(path: "full/200,/0/default.jpg").resolve(width: 640, height: 480)
        #expect(try ICCProfiles.djpeg(profiled.renderEncoded(request)) == (profile, true))
    }

    @Test("cut and corrupt JPEG 2000 files: typed errors, never a crash")
    func hostile() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let kind = Kind(name: "RGB, tiles", channels: 3, options: ["-t", "64,64", "-r", "8"])
        let data = try Data(contentsOf: URL(fileURLWithPath: try Self.master(kind, width: 200, height: 150, in: folder)))
        for cut in [1, 12, 40, 100, data.count / 3, data.count - 10] {
            let code = thrownCode { try TileBuilder.build(data: data.prefix(cut)) }
            #expect(code == .truncated, "cut at \(cut): \(String(describing: code))")
        }
        // A whole file whose COD declares 40 decomposition levels (at most 32): corrupt, not cut.
        var levels = [UInt8](data)
        let cod = try #require((0..<(levels.count - 1)).first { levels[$0] == 0xFF && levels[$0 + 1] == 0x52 })
        levels[cod + 9] = 40
        #expect(thrownCode { try TileBuilder.build(data: levels) } == .corrupt)
        // A SIZ marker (a bare codestream's, from byte 2) declaring 1x1 tiles (60,000 of them in a few
        // kilobytes), or 5 components: refused before OpenJPEG allocates by it.
        let codestream = [UInt8](
            try Data(
                contentsOf: URL(fileURLWithPath: try Self.master(Kind(name: "J2K", channels: 3, suffix: "j2k"), width: 300, height: 200, in: folder)))
        )
        var tiny = codestream
        tiny.replaceSubrange(24..<32, with: [0, 0, 0, 1, 0, 0, 0, 1])
        #expect(thrownCode { try TileBuilder.build(data: tiny) } == .corrupt)
        // Bytes alone may be a file's beginning (an upload's): their header is read from the markers, no OpenJPEG.
        #expect(try ImageInfo.read(data: Data(tiny)).jpeg2000?.tileCount == 300 * 200)
        var five = codestream
        five[41] = 5
        #expect(thrownCode { try TileBuilder.build(data: five) } == .unsupported)
        // Found by jp2_master_fuzz: a JP2 whose jp2c box claims more bytes than the file has, declaring
        // 65,535 tiles in 171 bytes (OpenJPEG took 776 MB on it), and a codestream with a marker between
        // SOC and SIZ (184 MB): both refused before OpenJPEG allocates.
        let found = [
            "AAAADGpQICANCocKAAAAFGZ0eXBqcDIgAAAAAGpwMiAAAAAtanAyaAAAABZpaGRyAAABAQAAAP8AAwcHAAAAAAAPY29scgEAAAAAABAAAQAAanAyY/9P/1EALwEAAAAA/wAAAQEAAAAAAAAAAAAAAAEAAAABAAAAAAAAAAAAAwcBAQcBAQoBAf9SAAwAAAABAQQEBAAB/1wAEEBASEhQSEhQSEguNS4w/5DZ",
            "/0//T/9RAC8BABAAACUAAAAdAAAAAQAAAAAAAEQlAAAAHQAAAAAAAAAAAAMHAQEHAQEKAQH/UgAMAAAAAQEEBAQAAf9cABBAQEhIUEhIUEhILjUuMP+Q2Q=="
        ]
        for text in found {
            let bytes = try #require(Data(base64Encoded: text))
            #expect(thrownCode { try TileBuilder.build(data: bytes) } == .corrupt)
        }
        // Found by jp2_master_fuzz: 172 bytes whose COD declares 65,535 quality layers (OpenJPEG spent
        // 16 s allocating for them), and the same in a real file's main header and in a tile-part
        // header: more packets a tile (layers x resolutions x components) than bytes, refused first.
        let layered = try #require(
            Data(
                base64Encoded:
                    "/0//UQAvAAAAAAAlAAAA0gAAAAAAAAAAAAAAJR0AAAAAAAAAAAAAAAADBQEBBwEBBwEB/1IADAAA//8BBAQEAAH/XAAQQEBISFBISFBISFBKSFD/ZAAlAAFDcmVhdGVlIGJ5IE9wZW5KUHNHIHZlcnNpb24gMi41LjD/kAAKAAAAAAAwAAH/k8+AUAi+TAAAAAAAAAAP1guAgN8AoCVTPCEYgICAgICAgEWAgA=="
            ))
        #expect(thrownCode { try TileBuilder.build(data: layered) } == .corrupt)
        var layers = codestream
        let mainCOD = try #require((0..<(layers.count - 1)).first { layers[$0] == 0xFF && layers[$0 + 1] == 0x52 })
        layers.replaceSubrange((mainCOD + 6)..<(mainCOD + 8), with: [0xFF, 0xFF])
        #expect(thrownCode { try TileBuilder.build(data: layers) } == .corrupt)
        var tilePart = codestream  // the main COD, with 65,535 layers, copied into the first tile-part's header
        let sot = try #require((0..<(tilePart.count - 1)).first { tilePart[$0] == 0xFF && tilePart[$0 + 1] == 0x90 })
        let codLength = Int(tilePart[mainCOD + 2]) << 8 | Int(tilePart[mainCOD + 3])
        var tileCOD = Array(tilePart[mainCOD..<(mainCOD + 2 + codLength)])
        tileCOD.replaceSubrange(6..<8, with: [0xFF, 0xFF])
        tilePart.insert(contentsOf: tileCOD, at: sot + 12)
        var psot = 0
        for i in (sot + 6)..<(sot + 10) { psot = psot << 8 | Int(tilePart[i]) }
        psot += tileCOD.count
        let psotBytes: [UInt8] = [UInt8(psot >> 24 & 0xFF), UInt8(psot >> 16 & 0xFF), UInt8(psot >> 8 & 0xFF), UInt8(psot & 0xFF)]
        tilePart.replaceSubrange((sot + 6)..<(sot + 10), with: psotBytes)
        #expect(thrownCode { try TileBuilder.build(data: tilePart) } == .corrupt)
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15  // a fixed sequence: the same flips every run
        func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
        for _ in 0..<30 {
            var flipped = [UInt8](data)
            for _ in 0..<8 { flipped[12 + next(flipped.count - 12)] ^= UInt8(1 + next(255)) }
            if let code = thrownCode({ try TileBuilder.build(data: flipped) }) {
                #expect([.truncated, .corrupt, .unsupported, .tooLarge].contains(code), "\(code)")
            }
        }
    }

    /// `jp2` with its first colr box's enumerated colour space set to `space` (ISO 15444-1 I.5.3.3).
    static func withColourSpace(_ jp2: [UInt8], _ space: UInt32) throws -> [UInt8] {
        var out = jp2
        let colr = try #require((0..<(out.count - 4)).first { out[$0..<($0 + 4)].elementsEqual("colr".utf8) })
        try #require(out[colr + 4] == 1, "the colr box is not enumerated")
        out.replaceSubrange((colr + 7)..<(colr + 11), with: (0..<4).map { UInt8(space >> (24 - 8 * $0) & 0xFF) })
        return out
    }

    @Test("colour spaces from the colr box: CMYK by the documented rule; sYCC and palettes refused by name")
    func colourSpaces() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // Four 8-bit components (raw input), lossless, declared CMYK (EnumCS 12).
        let (width, height) = (64, 48)
        var raw = [UInt8]()
        for c in 0..<4 { for y in 0..<height { for x in 0..<width { raw.append(UInt8(Self.sample(x, y, c, 255))) } } }
        try Data(raw).write(to: URL(fileURLWithPath: "\(folder)/cmyk.raw"))
        _ = try TIFFMasterTests.run("opj_compress", ["-i", "\(folder)/cmyk.raw", "-o", "\(folder)/four.jp2", "-F", "\(width),\(height),4,8,u"])
        let four = [UInt8](try Data(contentsOf: URL(fileURLWithPath: "\(folder)/four.jp2")))
        let cmyk = try TileBuilder.build(data: try Self.withColourSpace(four, 12))
        var expected = [UInt8]()
        for y in 0..<height {
            for x in 0..<width {
                let k = 255 - Self.sample(x, y, 3, 255)
                expected += (0..<3).map { UInt8(((255 - Self.sample(x, y, $0, 255)) * k + 127) / 255) } + [255]
            }
        }
        var rows: [UInt8] = []
        try cmyk.forEachRow(level: 0) { _, row in rows.append(contentsOf: row) }
        #expect(rows == expected)
        // sYCC (EnumCS 18) on a three-component file.
        let rgb = [UInt8](
            try Data(contentsOf: URL(fileURLWithPath: try Self.master(Kind(name: "RGB", channels: 3), width: 64, height: 64, in: folder))))
        #expect(thrownCode { try TileBuilder.build(data: try Self.withColourSpace(rgb, 18)) } == .unsupported)
        // A palette: a pclr box (2 entries, 3 columns of 8 bits) put into jp2h.
        let pclr: [UInt8] = [0, 0, 0, 8 + 3 + 3 + 6] + Array("pclr".utf8) + [0, 2, 3, 7, 7, 7, 0, 0, 0, 255, 255, 255]
        var palette = rgb
        let header = try #require((0..<(palette.count - 4)).first { palette[$0..<($0 + 4)].elementsEqual("jp2h".utf8) }) - 4
        let length = palette[header..<(header + 4)].reduce(0) { $0 << 8 | Int($1) } + pclr.count
        palette.insert(contentsOf: pclr, at: header + 8)
        palette.replaceSubrange(header..<(header + 4), with: (0..<4).map { UInt8(length >> (24 - 8 * $0) & 0xFF) })
        #expect(thrownCode { try TileBuilder.build(data: palette) } == .unsupported)
    }
}
