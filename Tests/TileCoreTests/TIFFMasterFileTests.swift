import Foundation
import Testing
import TestTraits
import TestSupport
import TileCore

extension TIFFMasterTests {
    /// Real files other programs ship: debconf's Debian logo and chromium's icon (PNG, RGBA), and
    /// CPython's own image test data (`test/imghdrdata`: a palette PNG and an RGBA TIFF), where present.
    static var realFiles: [String] {
        var paths = ["/usr/share/pixmaps/debian-logo.png", "/usr/share/icons/hicolor/256x256/apps/chromium.png"]
        let python = Tools.run(path: "python3", ["-c", "import test, os; print(os.path.dirname(test.__file__))"])
        if let folder = python?.trimmingCharacters(in: .whitespacesAndNewlines), !folder.isEmpty {
            paths += ["\(folder)/imghdrdata/python.png", "\(folder)/imghdrdata/python.tiff"]
        }
        return paths.filter { FileManager.default.fileExists(atPath: $0) }
    }

    @Test(
        "real PNGs and TIFFs other packages ship (Debian's debconf and chromium, CPython) decode as pngtopnm and vips read them",
        .enabled(if: tools, skip))
    func realFilesMatch() throws {
        let files = Self.realFiles
        try #require(!files.isEmpty, "none of the real files is installed")
        let folder = try PNGSourceTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        for path in files {
            let ours = try TileBuilder.build(contentsOfFile: path).pixels(level: 0)
            let reference: RGBAImage
            if path.hasSuffix(".png") {
                reference = try PNGSourceTests.reference(Data(Tools.readAll(path)), in: folder)
            } else {
                reference = try Self.reference(path, Kind(name: "real", picture: Self.rgba, maker: .vips, options: []), in: folder)
            }
            let same = ours == reference
            #expect(same, "\(path)")
        }
    }
}

extension Tools {
    /// `program`'s standard output, or nil when it is absent or fails.
    fileprivate static func run(path program: String, _ arguments: [String]) -> String? {
        guard let run = try? Tools.run(program, arguments), run.status == 0 else { return nil }
        return run.text
    }
}

extension TIFFMasterTests {
    @Test("finish(rowLimit:) decodes a spooled TIFF a slice of rows at a time, to the same pyramid", .enabled(if: tools, skip))
    func finishInSlices() throws {
        let folder = try PNGSourceTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let bytes = Data(Tools.readAll(try Self.tiff(Self.kind("RGB 8-bit, LZW"), width: 300, height: 190, in: folder)))
        let builder = try TileBuilder()
        try builder.append(bytes)
        #expect(builder.rowsDecoded == 0)  // a TIFF pushed as bytes waits for its last byte
        var calls = 0
        var image: TiledImage?
        while image == nil {
            image = try builder.finish(rowLimit: 16)
            calls += 1
            #expect(builder.rowsDecoded == min(190, 16 * calls))
        }
        #expect(calls == 12)  // 190 rows, 16 a call
        #expect(try image!.allTiles() == TileBuilder.build(data: bytes).allTiles())
    }

    @Test("a TIFF reached through a symbolic link is read from its file, as a JPEG or PNG would be", .enabled(if: tools, skip))
    func throughSymlink() throws {
        let folder = try PNGSourceTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = try Self.tiff(Self.kind("RGB 8-bit, LZW"), width: 64, height: 48, in: folder)
        try FileManager.default.createSymbolicLink(atPath: "\(folder)/link.tif", withDestinationPath: path)
        #expect(try ImageInfo.read(contentsOfFile: "\(folder)/link.tif").format == .tiff)
        #expect(try TileBuilder.build(contentsOfFile: "\(folder)/link.tif").allTiles() == TileBuilder.build(contentsOfFile: path).allTiles())
    }
}
