import Foundation
import Testing
import TestTraits
import TestSupport
import TileCore

@Suite("Metadata without decoding", .ownThreads)
struct MetadataTests {
    /// A TIFF/EXIF block written by hand: IFD0 with Make, Orientation and an Exif sub-IFD pointer;
    /// the sub-IFD with ExposureTime (a rational) and PixelXDimension (a long).
    static func exifBlock(bigEndian: Bool, orientation: Int = 6) -> [UInt8] {
        var b: [UInt8] = []
        func u16(_ v: Int) { b += bigEndian ? [UInt8(v >> 8 & 255), UInt8(v & 255)] : [UInt8(v & 255), UInt8(v >> 8 & 255)] }
        func u32(_ v: Int) { if bigEndian { u16(v >> 16); u16(v & 0xFFFF) } else { u16(v & 0xFFFF); u16(v >> 16) } }
        b += bigEndian ? [0x4D, 0x4D] : [0x49, 0x49]
        u16(42); u32(8)
        // IFD0 at 8: 3 entries -> 2 + 36 + 4 = 42 bytes, ends at 50.
        u16(3)
        u16(0x010F); u16(2); u32(6); u32(50)  // Make -> "Canon\0" at 50
        u16(0x0112); u16(3); u32(1); u16(orientation); u16(0)
        u16(0x8769); u16(4); u32(1); u32(56)  // Exif IFD at 56
        u32(0)
        b += Array("Canon\0".utf8)  // 50..<56
        // Exif IFD at 56: 2 entries -> 2 + 24 + 4 = 30, ends at 86.
        u16(2)
        u16(0x829A); u16(5); u32(1); u32(86)  // ExposureTime -> rational at 86
        u16(0xA002); u16(4); u32(1); u32(4000)
        u32(0)
        u32(1); u32(250)
        return b
    }

    static func jpeg(withEXIF block: [UInt8]) throws -> Data {
        let encoder = try JPEGEncoder(width: 16, height: 8)
        try encoder.writeMarker(0xE1, Array("Exif\0\0".utf8) + block)
        let pixels = [UInt8](repeating: 128, count: 16 * 8 * 4)
        try pixels.withUnsafeBytes { try encoder.writeRows($0, stride: 64, count: 8) }
        return try encoder.finish()
    }

    @Test("EXIF tags of IFD0 and the Exif sub-IFD are typed values, in both byte orders", arguments: [false, true])
    func readsTypedTags(bigEndian: Bool) throws {
        let info = try ImageInfo.read(data: try Self.jpeg(withEXIF: Self.exifBlock(bigEndian: bigEndian)))
        #expect(info.exifOrientation == 6)
        #expect(info.exif["Make"] == .string("Canon"))
        #expect(info.exif["ExposureTime"] == .rationals([EXIFRational(numerator: 1, denominator: 250)]))
        #expect(info.exif["PixelXDimension"] == .integers([4000]))
        #expect(info.orientedWidth == 8 && info.orientedHeight == 16)
        #expect(info.exifProblem == nil)
    }

    @Test("malformed EXIF blocks give a result with the EXIF part reported unreadable, never a crash")
    func malformedEXIF() throws {
        var loop = Self.exifBlock(bigEndian: false)
        // The Exif sub-IFD's second entry (at 56 + 2 + 12 = 70) becomes an Exif-IFD pointer back at
        // IFD0 (offset 8): IFD0 -> sub-IFD -> IFD0, a loop through a nested pointer.
        loop[70...71] = [0x69, 0x87]
        loop[78...81] = [8, 0, 0, 0]
        var outOfRange = Self.exifBlock(bigEndian: false)
        outOfRange[4...7] = [0xF0, 0xFF, 0xFF, 0x7F]  // IFD0 offset far outside
        var hugeCount = Self.exifBlock(bigEndian: false)
        hugeCount[14...17] = [0xFF, 0xFF, 0xFF, 0xFF]  // Make's count overflows
        let cases: [[UInt8]] = [
            [], [0x49], Array(repeating: 0xFF, count: 40), loop, outOfRange, hugeCount,
            Array(Self.exifBlock(bigEndian: true).prefix(20))
        ]
        for block in cases {
            let info = try ImageInfo.read(data: try Self.jpeg(withEXIF: block))
            #expect(info.width == 16 && info.height == 8)
        }
        let looped = try ImageInfo.read(data: try Self.jpeg(withEXIF: loop))
        #expect(looped.exifProblem == "EXIF IFDs form a loop")
        #expect(looped.exifOrientation == 6 && looped.exif["Make"] == .string("Canon"))
        let info = try ImageInfo.read(data: try Self.jpeg(withEXIF: outOfRange))
        #expect(info.exifProblem != nil)
        #expect(try ImageInfo.read(data: try Self.jpeg(withEXIF: hugeCount)).exifProblem != nil)
    }

    @Test("an IFD that points at itself is read once")
    func selfLoop() throws {
        var block = Self.exifBlock(bigEndian: false)
        // Point the Exif sub-IFD entry (value at 8 + 2 + 2*12 + 8 = 42) at IFD0 (offset 8).
        block[42...45] = [8, 0, 0, 0]
        let info = try ImageInfo.read(data: try Self.jpeg(withEXIF: block))
        #expect(info.exifProblem == "EXIF IFDs form a loop")
        #expect(info.exifOrientation == 6)
    }

    @Test("the builder sees the header's metadata and honours its orientation")
    func builderUsesEXIF() throws {
        let data = try Self.jpeg(withEXIF: Self.exifBlock(bigEndian: true, orientation: 8))
        let builder = try TileBuilder()
        try builder.append(data)
        #expect(builder.info?.exifOrientation == 8)
        let image = try builder.finish()
        #expect(image.geometry.orientation == .rotate270)
        #expect(try image.level(0).width == 8 && image.level(0).height == 16)
    }

    @Test("reading a large file's info reads only its header")
    func readsOnlyTheHeader() throws {
        let data = try Synthetic.jpeg(.init(width: 2000, height: 1500, subsampling: .s444, quality: 95))
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("info-\(UUID().uuidString).jpg").path
        #expect(FileManager.default.createFile(atPath: path, contents: data))
        defer { try? FileManager.default.removeItem(atPath: path) }
        var bytesRead = 0
        let info = try ImageInfo.read(contentsOfFile: path, bytesRead: &bytesRead)
        #expect(info.width == 2000 && info.height == 1500 && info.subsampling == "4:4:4")
        #expect(data.count > 1_000_000)
        #expect(bytesRead <= 64 * 1024, "read \(bytesRead) of \(data.count) bytes")
        #expect(info.headerByteCount < 2000)
    }

    @Test("empty, truncated and unknown input fail with typed errors")
    func badHeaders() throws {
        let data = try Synthetic.jpeg(.init(width: 64, height: 64))
        #expect(thrownCode { try ImageInfo.read(data: Data()) } == .truncated)  // as TileBuilder: one code for empty input
        #expect(thrownCode { try ImageInfo.read(data: data.prefix(40)) } == .truncated)
        #expect(thrownCode { try ImageInfo.read(data: Data("GIF89a..".utf8)) } == .corrupt)  // no format read here
        // The first bytes of a PNG's and a TIFF's signatures: read as those formats, cut short.
        #expect(thrownCode { try ImageInfo.read(data: Data([0x89, 0x50, 0x4E, 0x47])) } == .truncated)
        #expect(thrownCode { try ImageInfo.read(data: Data([0x49, 0x49, 0x2A, 0x00, 0x08])) } == .truncated)
    }
}

@Suite("Metadata over the corpus", .enabled(if: Corpus.isPresent, Comment(rawValue: Corpus.skipMessage)), .ownThreads)
struct CorpusMetadataTests {
    static let withFrame = Corpus.entries.filter { !$0["width"].isEmpty && $0["width"] != "-" }

    @Test("ImageInfo matches the manifest's size, orientation and properties", arguments: withFrame)
    func matchesManifest(entry: Corpus.Entry) throws {
        let info = try ImageInfo.read(contentsOfFile: entry.path)
        #expect(info.width == Int(entry["width"]) && info.height == Int(entry["height"]))
        #expect(info.components == Int(entry["components"]))
        #expect((info.exifOrientation ?? 0) == Int(entry["exif_orientation"]))
        if !entry["oriented_width"].isEmpty {
            #expect(info.orientedWidth == Int(entry["oriented_width"]) && info.orientedHeight == Int(entry["oriented_height"]))
        }
        #expect(info.isProgressive == (entry["progressive"] == "y"))
        #expect(info.isArithmetic == (entry["arithmetic"] == "y"))
        #expect(info.restartInterval == Int(entry["restart_interval"]))
        #expect(info.subsampling == entry["subsampling"])
        #expect(info.colorSpace.rawValue == entry["color_space"].lowercased())
        #expect((info.iccProfile != nil) == (entry["icc"] == "y"))
    }
}
