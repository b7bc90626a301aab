import Foundation
import Testing
import TestSupport
import TestTraits
import TileCore

/// `tiler export` as a user types it, and against `vips dzsave` (the tool people use for this today)
/// where it is installed (`.ci/run` installs Debian's libvips-tools).
@Suite("tiler export", .ownThreads)
struct ExportCommandTests {
    static let vips = ["/usr/bin/vips", "/usr/local/bin/vips"].first { FileManager.default.isExecutableFile(atPath: $0) }

    static func files(_ root: String) -> [String] { regularFiles(below: root) }

    /// A 1300x900 photograph-like JPEG (smooth gradients and rings) in a fresh folder.
    static func folder() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("export-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let jpeg = try JPEGEncoder.encode(pixels: Synthetic.smooth(width: 1300, height: 900), width: 1300, height: 900)
        try jpeg.write(to: URL(fileURLWithPath: "\(path)/photo.jpg"))
        return path
    }

    @Test("dzi and iiif3 from a file, standard input and a store; usage errors and bad input")
    func commandLine() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let dzi = try TilerCommandTests.run(["export", "photo.jpg", "--out", "web"], in: folder)
        #expect(dzi.status == 0, "\(dzi)")
        #expect(dzi.stdout.hasPrefix("photo.jpg: 1300x900, 12 levels, "), "\(dzi.stdout)")
        #expect(dzi.stdout.contains("web/photo_files\n") && dzi.stdout.contains("web/photo.dzi\n"))
        #expect(FileManager.default.fileExists(atPath: "\(folder)/web/photo_files/11/5_3.jpg"))
        // Again: refused, then replaced with --force.
        let again = try TilerCommandTests.run(["export", "photo.jpg", "--out", "web"], in: folder)
        #expect(again.status == 1 && again.stderr.contains("exists: not replaced") && again.stderr.contains("--force"), "\(again.stderr)")
        #expect(try TilerCommandTests.run(["export", "photo.jpg", "--out", "web", "--force"], in: folder).status == 0)

        let iiif = try TilerCommandTests.run(
            [
                "export", "-", "--name", "p", "--layout", "iiif3", "--base-url", "https://example.org/iiif", "--out", "web",
                "--keep-store", "p.tiles"
            ], in: folder, stdin: "photo.jpg")
        #expect(iiif.status == 0 && !iiif.stderr.contains("warning"), "\(iiif)")
        let info = try String(contentsOfFile: "\(folder)/web/p/info.json", encoding: .utf8)
        #expect(info.contains("\"id\" : \"https://example.org/iiif/p\""), "\(info)")
        #expect(FileManager.default.fileExists(atPath: "\(folder)/web/p/1280,768,20,132/20,132/0/default.jpg"))
        let manifest = try String(contentsOfFile: "\(folder)/web/p/manifest.json", encoding: .utf8)
        #expect(manifest.contains("\"id\" : \"https://example.org/iiif/p/manifest.json\""), "\(manifest)")
        #expect(FileManager.default.fileExists(atPath: "\(folder)/web/p/index.html"))
        // Without --id: the local URL, said.
        let local = try TilerCommandTests.run(["export", "photo.jpg", "--name", "l", "--layout", "iiif3", "--out", "local"], in: folder)
        #expect(local.status == 0, "\(local)")
        #expect(
            local.stderr
                == "tiler: warning: the ids in info.json and manifest.json are under http://localhost:8000/l: --base-url names the URL the export will be served from\n"
        )
        #expect(try String(contentsOfFile: "\(folder)/local/l/info.json", encoding: .utf8).contains("\"id\" : \"http://localhost:8000/l\""))
        let store = try TilerCommandTests.run(["export", "p.tiles", "--name", "s", "--out", "web", "--format", "png"], in: folder)
        #expect(store.status == 0, "\(store)")
        #expect(Self.files("\(folder)/web/s_files").count == Self.files("\(folder)/web/photo_files").count)

        let overlap = try TilerCommandTests.run(["export", "photo.jpg", "--layout", "iiif3", "--overlap", "1", "--out", "w"], in: folder)
        #expect(overlap.status != 0 && overlap.stderr.contains("IIIF tiles have no overlap"), "\(overlap.stderr)")
        _ = FileManager.default.createFile(atPath: "\(folder)/bad.jpg", contents: Data([0xFF, 0xD8, 0xFF, 0xDB, 0, 3, 1]))
        let bad = try TilerCommandTests.run(["export", "bad.jpg", "--out", "web"], in: folder)
        #expect(bad.status == 1 && bad.stderr.hasPrefix("tiler: bad.jpg: "), "\(bad.stderr)")
        #expect(bad.stderr.split(separator: "\n").count == 1)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: "\(folder)/web").sorted() == ["p", "photo.dzi", "photo_files", "s.dzi", "s_files"])
    }

    @Test(
        "The same files as vips dzsave writes, and tiles within 35 dB of its tiles",
        .enabled(if: ExportCommandTests.vips != nil, "vips is not installed (apt-get install libvips-tools)"),
        arguments: [(256, 0), (254, 1)])
    func sameAsVips(tile: Int, overlap: Int) throws {
        let vips = try #require(Self.vips)
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let ours = try TilerCommandTests.run(
            ["export", "photo.jpg", "--out", "ours", "--tile-size", "\(tile)", "--overlap", "\(overlap)", "--quality", "80"],
            in: folder)
        #expect(ours.status == 0, "\(ours)")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: vips)
        process.arguments = [
            "dzsave", "\(folder)/photo.jpg", "\(folder)/theirs/photo", "--tile-size", "\(tile)", "--overlap", "\(overlap)",
            "--suffix", ".jpg[Q=80]"
        ]
        try FileManager.default.createDirectory(atPath: "\(folder)/theirs", withIntermediateDirectories: false)
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let theirs = Self.files("\(folder)/theirs").filter { !$0.hasSuffix("vips-properties.xml") }
        #expect(Self.files("\(folder)/ours") == theirs)
        var worst = Double.infinity
        for file in theirs where file.hasSuffix(".jpg") {
            let a = try Reference.decode(Data(contentsOf: URL(fileURLWithPath: "\(folder)/ours/\(file)"))).image
            let b = try Reference.decode(Data(contentsOf: URL(fileURLWithPath: "\(folder)/theirs/\(file)"))).image
            #expect((a.width, a.height) == (b.width, b.height), "\(file)")
            if a.width == b.width && a.height == b.height { worst = min(worst, Reference.psnr(a, b)) }
        }
        #expect(worst >= 35, "worst tile \(worst) dB")
    }
}
