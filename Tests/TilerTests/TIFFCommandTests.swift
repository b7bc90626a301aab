import Foundation
import Testing
import TestSupport
import TestTraits
import TileCore

/// `tiler build` writes TIFF stores by default; info, render and export read them.
@Suite("tiler and TIFF stores", .ownThreads)
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

    @Test("render and export build a TIFF master of strips, as build and info take it: its pixels, unchanged")
    func stripMaster() throws {
        let folder = try TilerCommandTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // An uncompressed RGB TIFF of one strip: pixel (x, y) is (x * 6, y * 8, 200 - x - y).
        let (width, height) = (40, 30)
        var rgb: [UInt8] = []
        for y in 0..<height { for x in 0..<width { rgb += [UInt8(x * 6), UInt8(y * 7), UInt8(200 - x - y)] } }
        let tiff = Bombs.tiff(
            [
                (256, 4, [UInt32(width)]), (257, 4, [UInt32(height)]), (258, 3, [8, 8, 8]), (259, 3, [1]), (262, 3, [2]), (277, 3, [3]),
                (278, 4, [UInt32(height)]), (284, 3, [1])
            ], strips: [rgb])
        #expect(FileManager.default.createFile(atPath: "\(folder)/strips.tif", contents: Data(tiff)))
        let render = try TilerCommandTests.run(["render", "strips.tif", "--out", "r.ppm"], in: folder)
        #expect(render.status == 0, "\(render.stderr)")
        let ppm = try Data(contentsOf: URL(fileURLWithPath: "\(folder)/r.ppm"))
        let header = Data("P6\n\(width) \(height)\n255\n".utf8)
        #expect(ppm.prefix(header.count) == header && [UInt8](ppm.dropFirst(header.count)) == rgb, "the master's pixels, unchanged")
        let export = try TilerCommandTests.run(["export", "strips.tif", "--layout", "dzi", "--out", "e"], in: folder)
        #expect(export.status == 0, "\(export.stderr)")
        let descriptor = try String(contentsOfFile: "\(folder)/e/strips.dzi", encoding: .utf8)
        #expect(descriptor.contains("Width=\"\(width)\"") && descriptor.contains("Height=\"\(height)\""), "\(descriptor)")
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

    /// An uncompressed RGB TIFF of one strip (`Bombs.tiff`), pixel (x, y) of `page` being
    /// ((x * 6 + page * 40) % 256, y * 7, 200 - x - y): its file and its pixels as a PPM's.
    static func page(_ page: Int, width: Int, height: Int, in folder: String) throws -> (path: String, rgb: [UInt8]) {
        var rgb: [UInt8] = []
        for y in 0..<height { for x in 0..<width { rgb += [UInt8((x * 6 + page * 40) & 255), UInt8(y * 7), UInt8(200 - x - y)] } }
        let tiff = Bombs.tiff(
            [
                (256, 4, [UInt32(width)]), (257, 4, [UInt32(height)]), (258, 3, [8, 8, 8]), (259, 3, [1]), (262, 3, [2]), (277, 3, [3]),
                (278, 4, [UInt32(height)]), (284, 3, [1])
            ], strips: [rgb])
        let path = "\(folder)/page\(page).tif"
        #expect(FileManager.default.createFile(atPath: path, contents: Data(tiff)))
        return (path, rgb)
    }

    @Test(
        "build makes every page of a multi-page TIFF master a store named as the server names pages, or the pages --pages names",
        .enabled(if: Tools.have("tiffcp"), Comment(rawValue: Tools.missing("tiffcp"))))
    func multiPageBuild() throws {
        let folder = try TilerCommandTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let pages = try [(40, 30), (24, 36), (32, 32)].enumerated().map { try Self.page($0, width: $1.0, height: $1.1, in: folder) }
        #expect(try Tools.run("tiffcp", pages.map(\.path) + ["\(folder)/book.tif"]).status == 0)
        func pixels(_ store: String) throws -> [UInt8] {
            let render = try TilerCommandTests.run(["render", store, "--out", "r.ppm"], in: folder)
            #expect(render.status == 0, "\(render.stderr)")
            let ppm = try Data(contentsOf: URL(fileURLWithPath: "\(folder)/r.ppm"))
            return [UInt8](ppm.split(separator: 10, maxSplits: 3, omittingEmptySubsequences: false).last ?? [])
        }
        let all = try TilerCommandTests.run(["build", "book.tif", "--format", "raw", "--out", "shelf"], in: folder)
        #expect(all.status == 0, "\(all.stderr)")
        #expect(all.stdout.contains("book.tif page 2 of 3: 24x36"), "\(all.stdout)")
        let stores = ["book.tif.tiles", "book.tif~2.tiles", "book.tif~3.tiles"]
        #expect(try FileManager.default.contentsOfDirectory(atPath: "\(folder)/shelf").sorted() == stores)
        for (n, store) in stores.enumerated() {
            #expect(try pixels("shelf/\(store)") == pages[n].rgb, "\(store): page \(n + 1)'s pixels")
        }
        let third = try TilerCommandTests.run(["build", "book.tif", "--format", "raw", "--pages", "2", "--out", "third.tiles"], in: folder)
        #expect(third.status == 0, "\(third.stderr)")
        #expect(try pixels("third.tiles") == pages[2].rgb)
        let some = try TilerCommandTests.run(["build", "book.tif", "--format", "raw", "--pages", "0,2", "--out", "some"], in: folder)
        #expect(some.status == 0, "\(some.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: "\(folder)/some").sorted() == ["book.tif.tiles", "book.tif~3.tiles"])
        let missing = try TilerCommandTests.run(["build", "book.tif", "--pages", "1-3"], in: folder)
        #expect(missing.status != 0 && missing.stderr.contains("no page 3"), "\(missing)")
        // A one-page TIFF has no page 1 either; its page 0 builds as any image.
        let single = try TilerCommandTests.run(["build", "page0.tif", "--pages", "1"], in: folder)
        #expect(single.status != 0 && single.stderr.contains("no page 1 (it has 1"), "\(single)")
        #expect(try TilerCommandTests.run(["build", "page0.tif", "--pages", "0"], in: folder).status == 0)
        for arguments in [["--pages", "x"], ["--pages", "2-1"], ["--pages", "1", "--page", "1"]] {
            #expect(try TilerCommandTests.run(["build", "book.tif"] + arguments, in: folder).status == 64, "\(arguments)")
        }
    }
}
