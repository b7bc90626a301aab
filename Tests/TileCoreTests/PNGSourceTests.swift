import Foundation
import Testing
import TestTraits
import TestSupport
import TileCore

/// PNG masters (issue 28, first part): read through libpng's progressive reader into the same pyramid
/// as JPEGs. References: the test files are made by netpbm's `pnmtopng` from PNM files written plainly
/// here, and decoded back by `pngtopnm` (another PNG reader), with the documented rules applied by hand:
/// gray repeated into R, G and B, 16-bit samples to 8 as round(v * 255 / 65535), alpha 255 where none.
@Suite("PNG masters", .ownThreads)
struct PNGSourceTests {
    static let tools = Tools.have("pnmtopng", "pngtopnm")
    static let skip = Comment(rawValue: Tools.missing("pnmtopng", "pngtopnm"))

    /// A test file: a PNM written here, then `pnmtopng` with `options`.
    struct Kind: CustomStringConvertible, Sendable {
        var name: String
        var channels: Int  // 1 (PGM) or 3 (PPM); 0: a bilevel PBM
        var maxValue: Int
        var alpha = false  // a PGM beside it as the alpha channel (-alpha=)
        var options: [String] = []
        var colours = 0  // > 0: only this many grays or colours (pnmtopng then writes a palette or low bit depth)
        var smooth = false  // ramps instead of a pattern (for lossy levels)
        var description: String { name }
    }

    static let kinds = [
        Kind(name: "RGB 8-bit", channels: 3, maxValue: 255),
        Kind(name: "gray 8-bit", channels: 1, maxValue: 255),
        Kind(name: "RGBA 8-bit", channels: 3, maxValue: 255, alpha: true),
        Kind(name: "RGB 16-bit", channels: 3, maxValue: 65535),
        Kind(name: "gray+alpha 16-bit", channels: 1, maxValue: 65535, alpha: true),
        Kind(name: "palette", channels: 3, maxValue: 255, colours: 12),
        Kind(name: "gray 2-bit", channels: 1, maxValue: 255, colours: 4),
        Kind(name: "gray 4-bit", channels: 1, maxValue: 255, colours: 16),
        Kind(name: "gray+alpha 8-bit", channels: 1, maxValue: 255, alpha: true),
        Kind(name: "bilevel with tRNS", channels: 0, maxValue: 1, options: ["-transparent", "white"])
    ]

    static func folder() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("png-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// Sample `c` of pixel (x, y): a pattern with smooth and sharp parts, or one of `colours` levels.
    static func sample(_ x: Int, _ y: Int, _ c: Int, _ kind: Kind) -> Int {
        if kind.smooth {
            let t = (x + y + 60 * c) % 510
            return t < 256 ? t : 509 - t
        }
        let v = (x * 7919 + y * 104_729 + c * 7_777 + (x * y) % 977) % (kind.maxValue + 1)
        guard kind.colours > 0 else { return v }
        return (v * kind.colours / (kind.maxValue + 1)) * kind.maxValue / (kind.colours - 1)
    }

    /// A PNM file's bytes (P4, P5 or P6, 8 or 16 bits a sample).
    static func pnm(width: Int, height: Int, channels: Int, maxValue: Int, sample: (Int, Int, Int) -> Int) -> Data {
        let magic = channels == 0 ? "P4" : channels == 1 ? "P5" : "P6"
        var data = Data((channels == 0 ? "\(magic)\n\(width) \(height)\n" : "\(magic)\n\(width) \(height)\n\(maxValue)\n").utf8)
        for y in 0..<height {
            if channels == 0 {
                for byte in 0..<((width + 7) / 8) {
                    var bits: UInt8 = 0
                    for bit in 0..<8 where byte * 8 + bit < width && sample(byte * 8 + bit, y, 0) != 0 { bits |= 0x80 >> bit }
                    data.append(bits)
                }
                continue
            }
            for x in 0..<width {
                for c in 0..<channels {
                    let v = sample(x, y, c)
                    if maxValue > 255 { data.append(contentsOf: [UInt8(v >> 8), UInt8(v & 255)]) } else { data.append(UInt8(v)) }
                }
            }
        }
        return data
    }

    /// The PNG of `kind`, `width` x `height`.
    static func png(_ kind: Kind, width: Int, height: Int, in folder: String) throws -> Data {
        let image = "\(folder)/image.pnm", alpha = "\(folder)/alpha.pgm"
        try pnm(width: width, height: height, channels: kind.channels, maxValue: kind.maxValue) { sample($0, $1, $2, kind) }
            .write(to: URL(fileURLWithPath: image))
        var arguments = kind.options
        if kind.alpha {
            try pnm(width: width, height: height, channels: 1, maxValue: kind.maxValue) { x, y, _ in sample(y, x, 5, kind) }
                .write(to: URL(fileURLWithPath: alpha))
            arguments.append("-alpha=\(alpha)")
        }
        let run = try Tools.run("pnmtopng", arguments + [image])
        try #require(run.status == 0, "pnmtopng: \(run.stderr)")
        return run.stdout
    }

    /// `png` decoded by `pngtopnm` into RGBA by the documented rules.
    static func reference(_ png: Data, in folder: String) throws -> RGBAImage {
        let file = "\(folder)/reference.png"
        try png.write(to: URL(fileURLWithPath: file))
        let colour = try parse(try Tools.run("pngtopnm", [file]).stdout)
        let alpha = try parse(try Tools.run("pngtopnm", ["-alpha", file]).stdout)
        var pixels = [UInt8]()
        for i in 0..<(colour.width * colour.height) {
            let rgb = colour.channels == 1 ? Array(repeating: colour.samples[i], count: 3) : Array(colour.samples[(i * 3)..<(i * 3 + 3)])
            pixels += rgb + [alpha.samples[i]]
        }
        return RGBAImage(width: colour.width, height: colour.height, pixels: pixels)
    }

    /// A PNM's samples at 8 bits: round(v * 255 / maxval); a PBM's bits as 0 (black) and 255.
    static func parse(_ data: Data) throws -> (width: Int, height: Int, channels: Int, samples: [UInt8]) {
        let bytes = [UInt8](data)
        var index = 0
        func token() -> Int {
            while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x09 || bytes[index] == 0x0D { index += 1 }
            var value = 0
            while index < bytes.count, (0x30...0x39).contains(bytes[index]) {
                value = value * 10 + Int(bytes[index] - 0x30)
                index += 1
            }
            return value
        }
        let magic = String(decoding: bytes[0..<2], as: UTF8.self)
        index = 2
        let (width, height) = (token(), token())
        let maxValue = magic == "P4" ? 1 : token()
        index += 1
        let channels = magic == "P6" ? 3 : 1
        var samples = [UInt8]()
        if magic == "P4" {
            let row = (width + 7) / 8
            for y in 0..<height {
                for x in 0..<width { samples.append((bytes[index + y * row + x / 8] >> (7 - x % 8)) & 1 == 1 ? 0 : 255) }
            }
            return (width, height, 1, samples)
        }
        for i in 0..<(width * height * channels) {
            let v = maxValue > 255 ? Int(bytes[index + 2 * i]) << 8 | Int(bytes[index + 2 * i + 1]) : Int(bytes[index + i])
            samples.append(UInt8((v * 255 + maxValue / 2) / maxValue))
        }
        return (width, height, channels, samples)
    }

    @Test(
        "level 0 of a PNG master is pngtopnm's pixels by the documented rules, fed whole or in pieces",
        .enabled(if: tools, skip), arguments: kinds)
    func levelZeroMatchesReference(kind: Kind) throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let png = try Self.png(kind, width: 300, height: 190, in: folder)
        let reference = try Self.reference(png, in: folder)
        let whole = try TileBuilder.build(data: png)
        let ours = try whole.pixels(level: 0)
        let same = ours == reference  // (not the pixels in a failure's message)
        #expect(ours.width == 300 && ours.height == 190)
        #expect(same, "\(kind)")
        // Fed in pieces of 997 bytes (rows come out as the bytes arrive): the same tiles.
        #expect(try Synthetic.build(png, chunk: 997).allTiles() == whole.allTiles())
    }

    @Test("a PNG master's metadata is read from its header: format, size, alpha, depth", .enabled(if: tools, skip))
    func metadata() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let png = try Self.png(Self.kinds[4], width: 40, height: 30, in: folder)
        let builder = try TileBuilder()
        try builder.append(png)
        let info = try #require(builder.info)
        #expect(info.format == .png && info.width == 40 && info.height == 30 && info.components == 1)
        #expect(info.hasAlpha && info.bitsPerSample == 16 && builder.header == nil)
        #expect(info.gamma == nil && info.sRGBIntent == nil)
        _ = try builder.finish()
        // gAMA and sRGB chunks, as pnmtopng writes them.
        var tagged = Self.kinds[0]
        tagged.options = ["-gamma", "0.45455", "-srgbintent=perceptual"]
        let withChunks = try ImageInfo.read(data: try Self.png(tagged, width: 20, height: 10, in: folder))
        #expect(abs((withChunks.gamma ?? 0) - 0.45455) < 0.0001 && withChunks.sRGBIntent == 0, "\(withChunks.gamma ?? -1)")
    }

    @Test(
        "a TIFF store of an opaque PNG encodes level 0 from its rows; one with alpha goes into a raw store (JPEG tiles keep none), or is refused",
        .enabled(if: tools, skip))
    func tiffStores() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let png = try Self.png(Kind(name: "smooth RGB", channels: 3, maxValue: 255, smooth: true), width: 300, height: 190, in: folder)
        let image = try TileBuilder.build(data: png, options: TIFFChecks.options())
        #expect(!image.isLevelZeroCopied)
        #expect(Reference.psnr(try image.pixels(level: 0), try Self.reference(png, in: folder)) > 30)
        // With alpha and JPEG tiles asked for: a raw store instead (its RGBA tiles keep it), or refused
        // when asked. (By default such a master gets WebP tiles: WebPStoreTests.)
        let transparent = try Self.png(Self.kinds[2], width: 64, height: 64, in: folder)
        let raw = try TileBuilder.build(data: transparent, options: TIFFChecks.options { $0.format = .tiff(TIFFWriting(compression: .jpeg)) })
        let expected = try Self.reference(transparent, in: folder)
        #expect(raw.tileCoding(ofLevel: 0) == .rawRGBA)
        #expect(try raw.pixels(level: 0) == expected)
        var refusing = TIFFChecks.options()
        refusing.format = .tiff(TIFFWriting(mastersWithAlpha: .refuse, compression: .jpeg))
        #expect(thrownCode { try TileBuilder.build(data: transparent, options: refusing) } == .unsupported)
    }

    @Test("cut and corrupt PNGs give typed errors, interlaced ones too", .enabled(if: tools, skip))
    func hostile() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let png = try Self.png(Self.kinds[0], width: 300, height: 190, in: folder)
        #expect(thrownCode { try TileBuilder.build(data: png.prefix(png.count / 2)) } == .truncated)
        #expect(thrownCode { try TileBuilder.build(data: png.prefix(20)) } == .truncated)
        var flipped = png
        flipped[png.count / 2] ^= 0x55  // inside IDAT: its CRC no longer matches
        #expect(thrownCode { try TileBuilder.build(data: flipped) } == .corrupt)
        var interlaced = Self.kinds[0]
        interlaced.options = ["-interlace"]
        let cut = try Self.png(interlaced, width: 64, height: 64, in: folder)
        #expect(thrownCode { try TileBuilder.build(data: cut.prefix(cut.count * 3 / 4)) } == .truncated)
        // Its image data cut after the first of seven passes, yet a well-formed file (a complete zlib
        // stream, IEND): libpng reaches the end without an error; the rows are not all there.
        try cut.write(to: URL(fileURLWithPath: "\(folder)/whole.png"))
        let script = """
            import sys, zlib, struct
            data = open(sys.argv[1], "rb").read()
            chunks, i = [], 8
            while i < len(data):
                n, kind = struct.unpack(">I4s", data[i:i + 8]); chunks.append((kind, data[i + 8:i + 8 + n])); i += 12 + n
            raw = zlib.decompress(b"".join(c for k, c in chunks if k == b"IDAT"))
            def chunk(kind, body): return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
            out = data[:8]
            for kind, body in chunks:
                if kind == b"IDAT":
                    if body is chunks[[k for k, _ in chunks].index(b"IDAT")][1]:
                        out += chunk(b"IDAT", zlib.compress(raw[:len(raw) // 64]))  # within the first pass
                else:
                    out += chunk(kind, body)
            sys.stdout.buffer.write(out)
            """
        let run = try Tools.run("python3", ["-c", script, "\(folder)/whole.png"])
        try #require(run.status == 0, "\(run.stderr)")
        #expect(thrownCode { try TileBuilder.build(data: run.stdout) } == .corrupt)
    }

    @Test(
        "Adam7-interlaced PNGs are pngtopnm's pixels, their passes combined on disk, fed whole or in pieces",
        .enabled(if: tools, skip), arguments: [0, 3, 4, 9])
    func interlaced(index: Int) throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var kind = Self.kinds[index]
        kind.options.append("-interlace")
        // 301x187: passes of every size, odd edges included.
        let png = try Self.png(kind, width: 301, height: 187, in: folder)
        let reference = try Self.reference(png, in: folder)
        let whole = try TileBuilder.build(data: png)
        let same = try whole.pixels(level: 0) == reference
        #expect(same, "\(kind)")
        #expect(try Synthetic.build(png, chunk: 997).allTiles() == whole.allTiles())
        let builder = try TileBuilder()
        try builder.append(png)
        #expect(builder.info?.format == .png && builder.rowsDecoded == 187)
        // Half of it in: no row is whole yet, the passes so far are in the spool, which the build counts
        // as its scratch bytes (a disk budget counts them with the store's).
        let half = try TileBuilder()
        try half.append(png.prefix(png.count / 2))
        #expect(half.rowsDecoded == 0 && (half.image?.scratchByteCount ?? 0) > 0, "\(half.image?.scratchByteCount ?? -1)")
    }
}
