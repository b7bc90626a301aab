import Foundation
import Testing
import TestSupport
import TileCore

/// `tiler build` writes TIFF stores by default; info, render and export read them.
@Suite("tiler and TIFF stores")
struct TIFFCommandTests {
    @Test("build writes a TIFF store by default (raw on --format raw); info reports levels, coding, size on disk")
    func buildAndInfo() throws {
        let folder = try TilerCommandTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let run = try TilerCommandTests.run(["build", "base.jpg", "--out", "t.tiles"], in: folder)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("level 0: 64x64, 1x1 tiles, JPEG"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: "\(folder)/t.tiles").sorted() == ["manifest.json", "pyramid.tif"])
        let info = try TilerCommandTests.run(["info", "t.tiles"], in: folder)
        #expect(info.status == 0, "\(info.stderr)")
        #expect(info.stdout.contains("tiff store, 64x64, 1 levels") && info.stdout.contains("level 0: copied"))
        #expect(info.stdout.contains("size on disk: "))
        let tif = try TilerCommandTests.run(["info", "t.tiles/pyramid.tif"], in: folder)
        #expect(tif.status == 0 && tif.stdout.contains("level 0: 64x64, 1x1 tiles, JPEG"), "\(tif)")
        #expect(try TilerCommandTests.run(["build", "base.jpg", "--format", "raw", "--out", "r.tiles"], in: folder).status == 0)
        let raw = try TilerCommandTests.run(["info", "r.tiles"], in: folder)
        #expect(raw.stdout.contains("raw store") && raw.stdout.contains("raw RGBA"), "\(raw)")
    }

    @Test("render and export read a TIFF store and a bare TIFF as they read the JPEG")
    func renderAndExport() throws {
        let folder = try TilerCommandTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        #expect(try TilerCommandTests.run(["build", "base.jpg", "--out", "t.tiles"], in: folder).status == 0)
        for input in ["t.tiles", "t.tiles/pyramid.tif"] {
            let render = try TilerCommandTests.run(["render", input, "--out", "r.ppm"], in: folder)
            #expect(render.status == 0, "\(render.stderr)")
            let export = try TilerCommandTests.run(["export", input, "--layout", "dzi", "--name", "x", "--out", "e", "--force"], in: folder)
            #expect(export.status == 0, "\(export.stderr)")
        }
        #expect(FileManager.default.fileExists(atPath: "\(folder)/e/x.dzi"))
    }

    @Test("--quality and a TIFF's tile size are checked when parsed")
    func options() throws {
        let folder = try TilerCommandTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        for arguments in [
            ["build", "base.jpg", "--quality", "0"], ["build", "base.jpg", "--tile-size", "40"], ["build", "base.jpg", "--format", "png"]
        ] {
            let run = try TilerCommandTests.run(arguments, in: folder)
            #expect(run.status == 64, "\(arguments): \(run)")
        }
        #expect(try TilerCommandTests.run(["build", "base.jpg", "--format", "raw", "--tile-size", "40"], in: folder).status == 0)
    }
}
