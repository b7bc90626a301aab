import Foundation
import Testing
import TestTraits
import TestSupport
import TileCore

/// TIFF masters (issue 28): read through libtiff into the same pyramid as JPEGs and PNGs. The test
/// files are made by netpbm's `pnmtotiff` and `pnmtotiffcmyk` from PNM files written plainly here (by
/// ``PNGSourceTests``), then rewritten by libtiff's `tiffcp` (compression, tiles, planes, byte order,
/// BigTIFF), `tiffset` and `vips tiffsave` (alpha). References, never this package's decoder: netpbm's
/// `tifftopnm` (with `-alphaout`), or for CMYK the samples `vips rawsave` reads; the documented rules
/// applied by hand (gray repeated into R, G and B; 16-bit to 8 as round(v * 255 / 65535), which the
/// PNM parser does for maxval 65535; CMYK as round((255 - C)(255 - K) / 255); associated alpha undone
/// as round(c * 255 / a), 0 where a is 0).
@Suite("TIFF masters", .ownThreads)
struct TIFFMasterTests {
    static let tools = Tools.have("pnmtotiff", "pnmtotiffcmyk", "tiffcp", "tiffset", "tifftopnm", "vips", "vipsheader", "pnmtopng")
    static let skip = Comment(
        rawValue: Tools.missing("pnmtotiff", "pnmtotiffcmyk", "tiffcp", "tiffset", "tifftopnm", "vips", "vipsheader", "pnmtopng"))

    typealias Picture = PNGSourceTests.Kind

    /// A test file: a picture made a TIFF by `maker`, then rewritten by `tiffcp` with `copy` (if any).
    struct Kind: CustomStringConvertible, Sendable {
        /// (No payloads: LeakSanitizer misreads a multi-payload enum's tagged array pointers as leaks.)
        enum Maker: Sendable {
            case pnmtotiff  // with `options`
            case cmyk  // pnmtotiffcmyk
            case vips  // vips tiffsave of the picture as a PNG (alpha kept), with `options`
        }
        var name: String
        var picture: Picture
        var maker: Maker
        var options: [String] = []
        var copy: [String] = []
        /// `tiffset` arguments run on the file at the end (e.g. marking alpha associated).
        var set: [String] = []
        var associated = false
        var lossy = false
        var description: String { name }
    }

    static let rgb = Picture(name: "RGB", channels: 3, maxValue: 255)
    static let rgb16 = Picture(name: "RGB 16", channels: 3, maxValue: 65535)
    static let gray = Picture(name: "gray", channels: 1, maxValue: 255)
    static let gray16 = Picture(name: "gray 16", channels: 1, maxValue: 65535)
    static let rgba = Picture(name: "RGBA", channels: 3, maxValue: 255, alpha: true)

    static let kinds = [
        Kind(name: "RGB 8-bit, strips, none", picture: rgb, maker: .pnmtotiff, options: ["-truecolor", "-none"]),
        Kind(
            name: "RGB 8-bit, LZW + predictor, 7-row strips", picture: rgb, maker: .pnmtotiff, options: ["-truecolor"],
            copy: ["-c", "lzw:2", "-r", "7"]),
        Kind(
            name: "RGB 8-bit, deflate, 64x64 tiles", picture: rgb, maker: .pnmtotiff, options: ["-truecolor"],
            copy: ["-c", "zip", "-t", "-w", "64", "-l", "64"]),
        Kind(
            name: "RGB 8-bit, PackBits, separate planes", picture: rgb, maker: .pnmtotiff, options: ["-truecolor"],
            copy: ["-c", "packbits", "-p", "separate", "-r", "16"]),
        Kind(name: "RGB 8-bit, big-endian BigTIFF", picture: rgb, maker: .pnmtotiff, options: ["-truecolor"], copy: ["-B", "-8", "-c", "lzw"]),
        Kind(name: "RGB 16-bit, LZW", picture: rgb16, maker: .pnmtotiff, options: ["-truecolor", "-lzw"]),
        Kind(
            name: "RGB 16-bit, tiles", picture: rgb16, maker: .pnmtotiff, options: ["-truecolor"], copy: ["-c", "zip:2", "-t", "-w", "32", "-l", "48"]
        ),
        Kind(
            name: "RGB 8-bit, tiles in separate planes", picture: rgb, maker: .pnmtotiff, options: ["-truecolor"],
            copy: ["-c", "lzw", "-p", "separate", "-t", "-w", "48", "-l", "32"]),
        Kind(name: "gray 8-bit", picture: gray, maker: .pnmtotiff, options: ["-flate"]),
        Kind(name: "gray 8-bit, MinIsWhite", picture: gray, maker: .pnmtotiff, options: ["-miniswhite"]),
        Kind(name: "gray 16-bit, big-endian", picture: gray16, maker: .pnmtotiff, options: ["-msb2lsb"], copy: ["-B"]),
        Kind(name: "gray 4-bit", picture: Picture(name: "gray 4", channels: 1, maxValue: 15), maker: .pnmtotiff, options: []),
        Kind(
            name: "gray 2-bit, tiles", picture: Picture(name: "gray 2", channels: 1, maxValue: 3), maker: .pnmtotiff, options: [],
            copy: ["-t", "-w", "16", "-l", "16"]),
        Kind(
            name: "bilevel, CCITT G4", picture: Picture(name: "bilevel", channels: 0, maxValue: 1), maker: .pnmtotiff, options: [], copy: ["-c", "g4"]
        ),
        Kind(name: "palette 8-bit", picture: Picture(name: "palette", channels: 3, maxValue: 255, colours: 12), maker: .pnmtotiff, options: []),
        Kind(
            name: "palette 4-bit, tiles", picture: Picture(name: "palette 4", channels: 3, maxValue: 255, colours: 2), maker: .pnmtotiff,
            options: ["-indexbits=4"], copy: ["-t", "-w", "32", "-l", "32"]),
        Kind(name: "CMYK 8-bit", picture: rgb, maker: .cmyk),
        Kind(name: "RGBA unassociated, deflate", picture: rgba, maker: .vips, options: ["--compression", "deflate"]),
        Kind(
            name: "RGBA associated, tiles", picture: rgba, maker: .vips, options: ["--tile", "--tile-width", "64", "--tile-height", "64"],
            set: ["-s", "338", "1", "1"], associated: true),
        Kind(
            name: "gray+alpha 16-bit", picture: Picture(name: "gray+alpha 16", channels: 1, maxValue: 65535, alpha: true), maker: .vips,
            options: ["--compression", "lzw"]),
        Kind(
            name: "gray+alpha 8-bit, tiles", picture: Picture(name: "gray+alpha", channels: 1, maxValue: 255, alpha: true), maker: .vips,
            options: ["--tile", "--tile-width", "32", "--tile-height", "32"]),
        Kind(
            name: "YCbCr JPEG, 4:2:0", picture: Picture(name: "smooth", channels: 3, maxValue: 255, smooth: true), maker: .vips,
            options: ["--compression", "jpeg", "--Q", "90"], lossy: true)
    ]

    static func run(_ program: String, _ arguments: [String]) throws -> Data {
        let run = try Tools.run(program, arguments)
        try #require(run.status == 0, "\(program) \(arguments): \(run.stderr)")
        return run.stdout
    }

    /// The TIFF of `kind`, `width` x `height`, at `folder/master.tif`; returns its path.
    static func tiff(_ kind: Kind, width: Int, height: Int, in folder: String) throws -> String {
        let picture = kind.picture
        let image = "\(folder)/image.pnm", made = "\(folder)/made.tif", master = "\(folder)/master.tif"
        try PNGSourceTests.pnm(width: width, height: height, channels: picture.channels, maxValue: picture.maxValue) {
            PNGSourceTests.sample($0, $1, $2, picture)
        }.write(to: URL(fileURLWithPath: image))
        switch kind.maker {
        case .pnmtotiff: try run("pnmtotiff", kind.options + [image]).write(to: URL(fileURLWithPath: made))
        case .cmyk: try run("pnmtotiffcmyk", [image]).write(to: URL(fileURLWithPath: made))
        case .vips:
            let png = "\(folder)/picture.png"
            try PNGSourceTests.png(picture, width: width, height: height, in: folder).write(to: URL(fileURLWithPath: png))
            _ = try run("vips", ["tiffsave", png, made] + kind.options)
        }
        if kind.copy.isEmpty {
            try FileManager.default.copyItem(atPath: made, toPath: master)
        } else {
            _ = try run("tiffcp", kind.copy + [made, master])
        }
        if !kind.set.isEmpty { _ = try run("tiffset", kind.set + [master]) }
        return master
    }

    /// The TIFF first made (`made.tif`, before `tiffcp` and `tiffset`, which change how the pixels are
    /// stored, not what they are) decoded by `tifftopnm` (vips' files and CMYK: the samples `vips
    /// rawsave` writes), made RGBA by the documented rules (`kind.associated`: the alpha `tiffset`
    /// declares associated undone).
    static func reference(_ path: String, _ kind: Kind, in folder: String) throws -> RGBAImage {
        switch kind.maker {
        case .cmyk:
            let (width, _, samples) = try vipsSamples(path, in: folder)
            var pixels = [UInt8]()
            for i in stride(from: 0, to: samples.count, by: 4) {
                let k = 255 - Int(samples[i + 3])
                for c in 0..<3 {
                    let ink = 255 - Int(samples[i + c])
                    pixels.append(UInt8((ink * k + 127) / 255))
                }
                pixels.append(255)
            }
            return RGBAImage(width: width, height: samples.count / 4 / width, pixels: pixels)
        case .vips:
            let (width, bands, samples) = try vipsSamples(path, in: folder)
            var pixels = [UInt8]()
            let colours = bands >= 3 ? 3 : 1
            for i in stride(from: 0, to: samples.count, by: bands) {
                let a = colours < bands ? Int(samples[i + colours]) : 255
                for c in 0..<3 {
                    let v = Int(samples[i + (colours == 3 ? c : 0)])
                    pixels.append(kind.associated ? (a == 0 ? 0 : UInt8(min(255, (v * 255 + a / 2) / a))) : UInt8(v))
                }
                pixels.append(UInt8(a))
            }
            return RGBAImage(width: width, height: samples.count / bands / width, pixels: pixels)
        case .pnmtotiff:
            let colour = try PNGSourceTests.parse(try run("tifftopnm", ["-byrow", path]))
            var pixels = [UInt8]()
            for i in 0..<(colour.width * colour.height) {
                pixels += colour.channels == 1 ? Array(repeating: colour.samples[i], count: 3) : Array(colour.samples[(i * 3)..<(i * 3 + 3)])
                pixels.append(255)
            }
            return RGBAImage(width: colour.width, height: colour.height, pixels: pixels)
        }
    }

    /// The samples `vips rawsave` writes of `path` (vips reads TIFFs through libtiff): width, bands, and
    /// the samples at 8 bits (16-bit ones as round(v * 255 / 65535)).
    static func vipsSamples(_ path: String, in folder: String) throws -> (width: Int, bands: Int, samples: [UInt8]) {
        let raw = "\(folder)/reference.raw"
        _ = try run("vips", ["rawsave", path, raw])
        let width = Int(try run("vipsheader", ["-f", "width", path]).trimmedText)!
        let bands = Int(try run("vipsheader", ["-f", "bands", path]).trimmedText)!
        let format = try run("vipsheader", ["-f", "format", path]).trimmedText
        let bytes = Tools.readAll(raw)
        if format.contains("USHORT") {
            var samples = [UInt8]()
            for i in stride(from: 0, to: bytes.count - 1, by: 2) {
                let value = Int(bytes[i]) | Int(bytes[i + 1]) << 8  // the host's order: little-endian
                samples.append(UInt8((value * 255 + 32767) / 65535))
            }
            return (width, bands, samples)
        }
        try #require(format.contains("UCHAR"), "vips reads \(path) as \(format)")
        return (width, bands, bytes)
    }

    @Test(
        "level 0 of a TIFF master is tifftopnm's pixels by the documented rules, from its file, whole or in pieces",
        .enabled(if: tools, skip), arguments: kinds)
    func levelZeroMatchesReference(kind: Kind) throws {
        let folder = try PNGSourceTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = try Self.tiff(kind, width: 300, height: 190, in: folder)
        let reference = try Self.reference("\(folder)/made.tif", kind, in: folder)
        let fromFile = try TileBuilder.build(contentsOfFile: path)
        let ours = try fromFile.pixels(level: 0)
        #expect(ours.width == 300 && ours.height == 190)
        if kind.lossy {
            // libjpeg inside libtiff, for both: the same decoder, yet tifftopnm reads through another path.
            #expect(Reference.psnr(ours, reference) > 40, "\(kind)")
        } else {
            let same = ours == reference  // (not the pixels in a failure's message)
            #expect(same, "\(kind)")
        }
        // Pushed as bytes (spooled), whole and in pieces of 997 bytes: the same tiles.
        let bytes = Data(Tools.readAll(path))
        let tiles = try fromFile.allTiles()
        #expect(try TileBuilder.build(data: bytes).allTiles() == tiles)
        #expect(try Synthetic.build(bytes, chunk: 997).allTiles() == tiles)
    }
}

extension Data {
    fileprivate var trimmedText: String { String(decoding: self, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) }
}

extension TIFFMasterTests {
    /// The kind whose name begins with `prefix`.
    static func kind(_ prefix: String) -> Kind { kinds.first { $0.name.hasPrefix(prefix) }! }

    @Test(
        "a TIFF master's metadata is read from its directory: format, size, depth, alpha, resolution, orientation, descriptive text",
        .enabled(if: tools, skip))
    func metadata() throws {
        let folder = try PNGSourceTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let kind = Kind(name: "16-bit gray", picture: Self.gray16, maker: .pnmtotiff, options: ["-xresolution", "300", "-yresolution", "300"])
        let path = try Self.tiff(kind, width: 40, height: 30, in: folder)
        _ = try Self.run("tiffset", ["-s", "274", "6", path])  // Orientation: rotate 90 degrees clockwise to show
        // Descriptive tags (what a manifest's metadata shows), as tiffset writes them.
        _ = try Self.run("tiffset", ["-s", "270", "A harbour at dawn", path])
        _ = try Self.run("tiffset", ["-s", "315", "Ana Lima", path])
        _ = try Self.run("tiffset", ["-s", "33432", "CC BY 4.0", path])
        #expect(
            try ImageInfo.read(regularFile: path).exif.filter { ["ImageDescription", "Artist", "Copyright", "DateTime"].contains($0.key) } == [
                "ImageDescription": .string("A harbour at dawn"), "Artist": .string("Ana Lima"), "Copyright": .string("CC BY 4.0")
            ])
        let builder = try TileBuilder()
        builder.sourcePath = path
        try builder.append(Data(Tools.readAll(path)))
        let info = try #require(builder.info)
        #expect(info.format == .tiff && info.width == 40 && info.height == 30 && info.components == 1)
        #expect(info.bitsPerSample == 16 && !info.hasAlpha && builder.header == nil)
        #expect(info.density?.unit == 1 && info.density?.x == 300 && info.density?.y == 300)
        #expect(info.exifOrientation == 6 && info.tiff?.compression == 1 && info.tiff?.isTiled == false)
        let image = try builder.finish()
        // Shown upright: 30 wide, 40 high; upright (x, y) is stored (y, 29 - x).
        let upright = try image.pixels(level: 0)
        let stored = try Self.reference("\(folder)/made.tif", kind, in: folder)
        #expect(upright.width == 30 && upright.height == 40)
        var same = true
        for y in 0..<40 { for x in 0..<30 where upright[x, y] != stored[y, 29 - x] { same = false } }
        #expect(same)
    }

    @Test(
        "a multi-page TIFF builds the page asked for; reduced-resolution directories (a pyramid's levels) are not pages",
        .enabled(if: tools, skip))
    func pages() throws {
        let folder = try PNGSourceTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let first = try Self.tiff(Self.kind("RGB 8-bit, LZW"), width: 120, height: 90, in: folder)
        try FileManager.default.moveItem(atPath: first, toPath: "\(folder)/first.tif")
        let firstReference = try Self.reference("\(folder)/made.tif", Self.kind("RGB 8-bit, LZW"), in: folder)
        try FileManager.default.removeItem(atPath: "\(folder)/made.tif")
        let second = try Self.tiff(Self.kind("gray 8-bit"), width: 64, height: 50, in: folder)
        let secondReference = try Self.reference("\(folder)/made.tif", Self.kind("gray 8-bit"), in: folder)
        _ = try Self.run("tiffcp", ["\(folder)/first.tif", second, "\(folder)/pages.tif"])
        var options = BuildOptions()
        #expect(try TileBuilder.build(contentsOfFile: "\(folder)/pages.tif", options: options).pixels(level: 0) == firstReference)
        options.page = 1
        #expect(try TileBuilder.build(contentsOfFile: "\(folder)/pages.tif", options: options).pixels(level: 0) == secondReference)
        options.page = 2
        #expect(thrownCode { try TileBuilder.build(contentsOfFile: "\(folder)/pages.tif", options: options) } == .invalidArgument)
        #expect(try ImageInfo.read(regularFile: "\(folder)/pages.tif").tiff?.pageCount == 2)
        // libvips' pyramid (deflate tiles): its first page is the full-resolution image, and its
        // levels (NewSubfileType 1, reduced) are not pages.
        _ = try Self.run("vips", ["tiffsave", "\(folder)/first.tif", "\(folder)/pyramid.tif", "--tile", "--pyramid", "--compression", "deflate"])
        #expect(try TileBuilder.build(contentsOfFile: "\(folder)/pyramid.tif").pixels(level: 0) == firstReference)
        #expect(try ImageInfo.read(regularFile: "\(folder)/pyramid.tif").tiff?.pageCount == 1)
        // A reduced-resolution directory (marked so by tiffset) between two pages: skipped, page 1 is
        // the third directory.
        try FileManager.default.moveItem(atPath: second, toPath: "\(folder)/reduced.tif")
        _ = try Self.run("tiffset", ["-s", "254", "1", "\(folder)/reduced.tif"])
        let third = try Self.tiff(Self.kind("RGB 8-bit, LZW"), width: 70, height: 40, in: folder)
        let thirdReference = try Self.reference("\(folder)/made.tif", Self.kind("RGB 8-bit, LZW"), in: folder)
        _ = try Self.run("tiffcp", ["\(folder)/first.tif", "\(folder)/reduced.tif", third, "\(folder)/marked.tif"])
        #expect(try ImageInfo.read(regularFile: "\(folder)/marked.tif").tiff?.pageCount == 2)
        options.page = 1
        #expect(try TileBuilder.build(contentsOfFile: "\(folder)/marked.tif", options: options).pixels(level: 0) == thirdReference)
    }

    @Test("cut, bit-flipped and unsupported TIFFs give typed errors, never a crash", .enabled(if: tools, skip))
    func hostile() throws {
        let folder = try PNGSourceTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        for kind in [Self.kind("RGB 8-bit, LZW"), Self.kind("RGB 8-bit, deflate")] {  // strips with the directory last; tiles
            let bytes = Data(Tools.readAll(try Self.tiff(kind, width: 300, height: 190, in: folder)))
            try FileManager.default.removeItem(atPath: "\(folder)/made.tif")
            try FileManager.default.removeItem(atPath: "\(folder)/master.tif")
            #expect(thrownCode { try TileBuilder.build(data: bytes.prefix(bytes.count / 2)) } == .truncated, "\(kind)")
            #expect(thrownCode { try TileBuilder.build(data: bytes.prefix(6)) } == .truncated, "\(kind)")
            // Each byte of the file in turn, flipped (a stride through the data, every byte of the header
            // and directory): an image, or a typed error.
            var codes = Set<TileError.Code>()
            let directory = Int(bytes[4]) | Int(bytes[5]) << 8 | Int(bytes[6]) << 16 | Int(bytes[7]) << 24
            let positions = Array(stride(from: 0, to: bytes.count, by: 97)) + Array(0..<8) + Array(directory..<min(bytes.count, directory + 200))
            for position in positions {
                var flipped = bytes
                flipped[position] ^= 0xA5
                do { _ = try TileBuilder.build(data: flipped) } catch { codes.insert(error.code) }
            }
            #expect(codes.isSubset(of: [.corrupt, .truncated, .unsupported, .tooLarge, .invalidArgument]), "\(codes)")
        }
        // Floating-point samples are refused by name.
        let made = try Self.tiff(Self.kind("RGB 8-bit, strips"), width: 32, height: 32, in: folder)
        _ = try Self.run("vips", ["cast", made, "\(folder)/float.tif", "float"])
        #expect(thrownCode { try TileBuilder.build(contentsOfFile: "\(folder)/float.tif") } == .unsupported)
    }

    @Test(
        "a TIFF store of an opaque TIFF master encodes level 0 from its rows; one with alpha gets WebP tiles, or with JPEG tiles asked a raw store, or is refused",
        .enabled(if: tools, skip))
    func tiffStores() throws {
        let folder = try PNGSourceTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let smooth = Kind(
            name: "smooth", picture: Picture(name: "smooth", channels: 3, maxValue: 255, smooth: true), maker: .pnmtotiff, options: ["-truecolor"])
        let path = try Self.tiff(smooth, width: 300, height: 190, in: folder)
        let image = try TileBuilder.build(contentsOfFile: path, options: TIFFChecks.options())
        #expect(!image.isLevelZeroCopied)
        #expect(Reference.psnr(try image.pixels(level: 0), try Self.reference("\(folder)/made.tif", smooth, in: folder)) > 30)
        try FileManager.default.removeItem(atPath: "\(folder)/made.tif")
        try FileManager.default.removeItem(atPath: path)
        // With alpha: WebP tiles that keep it exactly (lossless asked for here); with JPEG tiles asked
        // for, a raw store instead (its RGBA tiles keep it), or refused when asked.
        let transparent = try Self.tiff(Self.kind("RGBA unassociated"), width: 64, height: 64, in: folder)
        let webp = try TileBuilder.build(
            contentsOfFile: transparent, options: TIFFChecks.options { $0.format = .tiff(TIFFWriting(webpLossless: true)) })
        let raw = try TileBuilder.build(
            contentsOfFile: transparent, options: TIFFChecks.options { $0.format = .tiff(TIFFWriting(compression: .jpeg)) })
        #expect(webp.tileCoding(ofLevel: 0) == .webp && raw.tileCoding(ofLevel: 0) == .rawRGBA)
        #expect(try raw.pixels(level: 0).pixels.contains { $0 != 255 })
        #expect(try webp.pixels(level: 0) == (try raw.pixels(level: 0)))
        var refusing = TIFFChecks.options()
        refusing.format = .tiff(TIFFWriting(mastersWithAlpha: .refuse, compression: .jpeg))
        #expect(thrownCode { try TileBuilder.build(contentsOfFile: transparent, options: refusing) } == .unsupported)
    }
}
