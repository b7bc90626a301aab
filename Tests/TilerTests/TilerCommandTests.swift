import Foundation
import Testing
import TestSupport
import TestTraits
import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// The `tiler` tool run as a user types it: the built binary in a child process, inputs made here.
@Suite("tiler on the command line", .ownThreads)
struct TilerCommandTests {
    struct Run {
        var status: Int32
        var signalled: Bool
        var stdout: String
        var stderr: String
    }

    /// The `tiler` binary SwiftPM built beside this test bundle.
    static let binary: String = {
        let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var folder = URL(fileURLWithPath: me).deletingLastPathComponent()
        if folder.lastPathComponent == "MacOS" { folder = folder.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent() }
        return folder.appendingPathComponent("tiler").path
    }()

    static func run(_ arguments: [String], in folder: String, stdin: String? = nil, environment extra: [String: String] = [:]) throws -> Run {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        // Under the address sanitizer the tool's process-lifetime singletons (the HTTP client's event
        // loops) are still reachable at exit; the suite's own leak check covers the library.
        var environment = ProcessInfo.processInfo.environment
        environment["ASAN_OPTIONS"] = "detect_leaks=0"
        environment.merge(extra) { $1 }
        process.environment = environment
        process.currentDirectoryURL = URL(fileURLWithPath: folder)
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        if let stdin { process.standardInput = FileHandle(forReadingAtPath: "\(folder)/\(stdin)") }
        try process.run()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        let errData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Run(
            status: process.terminationStatus, signalled: process.terminationReason == .uncaughtSignal,
            stdout: String(decoding: outData, as: UTF8.self), stderr: String(decoding: errData, as: UTF8.self))
    }

    /// A fresh folder holding `base.jpg` (64x64) and `p.jpg` (progressive), encoded through the shim.
    static func folder() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tiler-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        var pixels = [UInt8](repeating: 255, count: 64 * 64 * 4)
        for i in stride(from: 0, to: pixels.count, by: 4) {
            pixels[i] = UInt8(i / 4 % 64 * 4)
            pixels[i + 2] = UInt8(i / 256 * 4 & 255)
        }
        let base = try JPEGEncoder.encode(pixels: pixels, width: 64, height: 64)
        var options = JPEGEncoder.Options()
        options.progressive = true
        let progressive = try JPEGEncoder.encode(pixels: pixels, width: 64, height: 64, options: options)
        #expect(FileManager.default.createFile(atPath: "\(path)/base.jpg", contents: base))
        #expect(FileManager.default.createFile(atPath: "\(path)/p.jpg", contents: progressive))
        return path
    }

    static func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    @Test("a negative, missing or largest level or page, and the demo's chunks and port, are a usage error or one line, never a signal")
    func levelArguments() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        #expect(try Self.run(["build", "base.jpg", "--out", "s.tiles"], in: folder).status == 0)
        for input in ["base.jpg", "s.tiles"] {
            let negative = try Self.run(["render", input, "--level=-1", "--out", "r.ppm"], in: folder)
            #expect(!negative.signalled && negative.status == 64, "\(negative)")
            let missing = try Self.run(["render", input, "--level=5", "--out", "r.ppm"], in: folder)
            #expect(!missing.signalled && missing.status == 1)
            // The same count of levels as build and info report (1 for a 64x64 image).
            #expect(missing.stderr == "tiler: \(input): level 5 does not exist (the pyramid has 1 level, 0...0)\n", "\(missing.stderr)")
            // The largest level the option takes: one line too (its count of levels to build trapped).
            let largest = try Self.run(["render", input, "--level=\(Int.max)", "--out", "r.ppm"], in: folder)
            #expect(!largest.signalled && largest.status == 1 && largest.stderr.contains("level \(Int.max) does not exist"), "\(largest)")
        }
        // A JPEG has one page: --page 3 was built as `base~4.tiles`.
        let third = try Self.run(["build", "base.jpg", "--page", "3", "--out", "p.tiles"], in: folder)
        #expect(!third.signalled && third.status == 1 && third.stderr.contains("the image has no page 3 (it has 1; 0 is the first)"), "\(third)")
        #expect(!Self.exists("\(folder)/p.tiles"))
        // The largest page overflowed its store's name (`~N+1`), whatever the input: a usage error now.
        for input in ["base.jpg", "-"] {
            let largest = try Self.run(["build", input, "--page", "\(Int.max)", "--out", "q.tiles"], in: folder, stdin: "base.jpg")
            #expect(!largest.signalled && largest.status == 64 && largest.stderr.contains("--page must be 0-2147483647"), "\(largest)")
        }
        // The demo's chunks and port: 0 bytes a chunk never ended, a negative count trapped, ports wrapped.
        for arguments in [["--chunk-size", "0"], ["--chunk-size=-1"], ["--port", "65536"], ["--port=-1"]] {
            let run = try Self.run(["demo", "--width", "64", "--height", "64"] + arguments, in: folder)
            #expect(!run.signalled && run.status == 64, "\(arguments): \(run)")
        }
        #expect(!Self.exists("\(folder)/r.ppm"))
    }

    @Test("an output that is the input is refused, also through a link, and the input is kept")
    func outputIsInput() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let original = FileManager.default.contents(atPath: "\(folder)/base.jpg")
        #expect(symlink("base.jpg", "\(folder)/link.jpg") == 0)
        #expect(symlink("base.jpg", "\(folder)/same.ppm") == 0)  // a name render writes to, the input behind it
        for arguments in [
            ["thumb", "base.jpg", "--max-edge", "32", "--out", "base.jpg"], ["thumb", "base.jpg", "--max-edge", "32", "--out", "link.jpg"],
            ["render", "base.jpg", "--out", "same.ppm"], ["render", "link.jpg", "--out", "same.ppm"]
        ] {
            let run = try Self.run(arguments, in: folder)
            #expect(run.status != 0 && run.stderr.contains("input"), "\(arguments): \(run)")
        }
        #expect(FileManager.default.contents(atPath: "\(folder)/base.jpg") == original)
    }

    @Test("render honours --orientation for a raw store as for a JPEG")
    func renderStoreOrientation() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        #expect(try Self.run(["build", "base.jpg", "--format", "raw", "--orientation", "6", "--out", "s.tiles"], in: folder).status == 0)
        for (orientation, expected) in [("none", "base.jpg"), ("6", "base.jpg")] {
            #expect(try Self.run(["render", "s.tiles", "--orientation", orientation, "--out", "store.ppm"], in: folder).status == 0)
            #expect(try Self.run(["render", expected, "--orientation", orientation, "--out", "jpeg.ppm"], in: folder).status == 0)
            let store = FileManager.default.contents(atPath: "\(folder)/store.ppm")
            #expect(store != nil && store == FileManager.default.contents(atPath: "\(folder)/jpeg.ppm"), "\(orientation)")
        }
    }

    @Test("render of a TIFF store in another orientation than it was built with is refused, saying why; its own works")
    func renderTIFFStoreOrientation() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        #expect(try Self.run(["build", "base.jpg", "--orientation", "6", "--out", "t.tiles"], in: folder).status == 0)
        for orientation in ["none", "3"] {
            let run = try Self.run(["render", "t.tiles", "--orientation", orientation, "--out", "store.ppm"], in: folder)
            #expect(run.status != 0 && run.stderr.contains("TIFF store") && run.stderr.contains("raw store"), "\(orientation): \(run)")
        }
        // The orientation it holds: as the JPEG turned the same way.
        for arguments in [["render", "t.tiles", "--orientation", "6", "--out", "store.ppm"], ["render", "t.tiles", "--out", "auto.ppm"]] {
            #expect(try Self.run(arguments, in: folder).status == 0)
        }
        #expect(try Self.run(["render", "base.jpg", "--orientation", "6", "--out", "jpeg.ppm"], in: folder).status == 0)
        let jpeg = FileManager.default.contents(atPath: "\(folder)/jpeg.ppm")
        for file in ["store.ppm", "auto.ppm"] {
            #expect(jpeg != nil && FileManager.default.contents(atPath: "\(folder)/\(file)")?.count == jpeg?.count, "\(file)")
        }
    }

    @Test("two inputs that would share a store name are refused before anything is built")
    func duplicateStoreNames() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        for sub in ["dupA", "dupB"] { try FileManager.default.createDirectory(atPath: "\(folder)/\(sub)", withIntermediateDirectories: true) }
        try FileManager.default.copyItem(atPath: "\(folder)/base.jpg", toPath: "\(folder)/dupA/img.jpg")
        try FileManager.default.copyItem(atPath: "\(folder)/p.jpg", toPath: "\(folder)/dupB/img.jpg")
        let run = try Self.run(["build", "dupA/img.jpg", "dupB/img.jpg", "--out", "DIR"], in: folder)
        #expect(run.status == 64 && run.stderr.contains("dupA/img.jpg and dupB/img.jpg"), "\(run)")
        #expect(!Self.exists("\(folder)/DIR"))
    }

    @Test("--out follows cp: an existing folder receives <name>.tiles whatever the number of inputs")
    func outFolderConvention() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try FileManager.default.createDirectory(atPath: "\(folder)/out", withIntermediateDirectories: true)
        #expect(try Self.run(["build", "base.jpg", "--out", "out"], in: folder).status == 0)
        #expect(Self.exists("\(folder)/out/base.jpg.tiles/manifest.json"))
        #expect(try Self.run(["build", "base.jpg", "--out", "named.tiles"], in: folder).status == 0)
        #expect(Self.exists("\(folder)/named.tiles/manifest.json"))
        #expect(try Self.run(["build", "base.jpg", "p.jpg", "--out", "many"], in: folder).status == 0)
        #expect(Self.exists("\(folder)/many/base.jpg.tiles/manifest.json") && Self.exists("\(folder)/many/p.jpg.tiles/manifest.json"))
    }

    @Test(
        "bad option values are usage errors at parse time, with one message and nothing written",
        arguments: [
            ["thumb", "base.jpg", "--max-edge", "32", "--sizes", "a,b", "--out", "o"],
            ["thumb", "base.jpg", "--max-edge", "32", "--sizes", "50,abc,20", "--out", "o"],
            ["thumb", "base.jpg", "--max-edge", "32", "--sizes", "99999999999999999999", "--out", "o"],
            ["thumb", "base.jpg", "--max-edge", "32", "--sizes", "1e3", "--out", "o"],
            ["thumb", "base.jpg", "--max-edge", "7", "--sizes", "7,7,7", "--out", "o"],
            ["thumb", "base.jpg", "--max-edge", "0", "--out", "o"],
            ["thumb", "base.jpg", "--max-edge", "32", "--quality", "0", "--out", "o"],
            ["thumb", "base.jpg", "--max-edge", "32", "--quality", "1000", "--out", "o"],
            ["build", "base.jpg", "--jobs", "0", "--out", "o"], ["build", "base.jpg", "--jobs=-1", "--out", "o"],
            ["build", "base.jpg", "p.jpg", "--tile-size", "7", "--out", "o"]
        ])
    func badOptions(arguments: [String]) throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let run = try Self.run(arguments, in: folder)
        #expect(run.status == 64, "\(run)")
        #expect(run.stderr.components(separatedBy: "\n").filter { $0.hasPrefix("Error:") }.count == 1, "\(run.stderr)")
        #expect(!Self.exists("\(folder)/o"))
    }

    @Test("- reads standard input for build, info, render and thumb; thumb reads a FIFO once")
    func standardInputAndFIFOs() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        #expect(try Self.run(["build", "-"], in: folder, stdin: "base.jpg").status == 0)
        #expect(try Self.run(["info", "-"], in: folder, stdin: "base.jpg").stdout.hasPrefix("stdin: JPEG, 64x64"))
        #expect(try Self.run(["render", "-", "--out", "r.ppm"], in: folder, stdin: "base.jpg").status == 0)
        let thumb = try Self.run(["thumb", "-", "--max-edge", "32", "--out", "t.jpg"], in: folder, stdin: "base.jpg")
        #expect(thumb.status == 0, "\(thumb)")
        #expect(try ImageInfo.read(contentsOfFile: "\(folder)/t.jpg").width == 32)
        #expect(mkfifo("\(folder)/fifo", 0o600) == 0)
        let jpeg = try #require(FileManager.default.contents(atPath: "\(folder)/base.jpg"))
        Thread.detachNewThread {
            let fd = open("\(folder)/fifo", O_WRONLY | O_CLOEXEC)
            jpeg.withUnsafeBytes { _ = write(fd, $0.baseAddress!, $0.count) }
            close(fd)
        }
        let fromFIFO = try Self.run(["thumb", "fifo", "--max-edge", "16", "--out", "f.jpg"], in: folder)
        #expect(fromFIFO.status == 0, "\(fromFIFO)")
    }

    @Test("errors are one line naming the file and the cause; names with newlines are escaped")
    func messages() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let directory = try Self.run(["build", folder], in: folder)
        #expect(directory.status == 1 && directory.stderr.contains("Is a directory") && !directory.stderr.contains("NSCocoa"))
        #expect(directory.stderr.split(separator: "\n").count == 1, "\(directory.stderr)")
        let render = try Self.run(["render", "base.jpg", "--out", "/nonexistent/x.ppm"], in: folder)
        #expect(render.stderr == "tiler: base.jpg: cannot create /nonexistent/x.ppm: No such file or directory\n", "\(render.stderr)")
        try FileManager.default.copyItem(atPath: "\(folder)/base.jpg", toPath: "\(folder)/new\nline.jpg")
        let named = try Self.run(["build", "new\nline.jpg", "gone\nfile.jpg"], in: folder)
        #expect(named.stdout.contains("new\\nline.jpg: 64x64"))
        #expect(named.stderr == "tiler: cannot open gone\\nfile.jpg: No such file or directory\n", "\(named.stderr)")
        #expect(named.stderr.split(separator: "\n").count == 1)
    }

    @Test("build --out refuses to replace a store without --force, as export does, and replaces it with --force")
    func replaceOnlyWithForce() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        #expect(try Self.run(["build", "base.jpg", "--format", "raw", "--out", "s.tiles"], in: folder).status == 0)
        let manifest = try Data(contentsOf: URL(fileURLWithPath: "\(folder)/s.tiles/manifest.json"))
        let again = try Self.run(["build", "base.jpg", "--out", "s.tiles"], in: folder)
        #expect(
            again.status == 1 && again.stderr == "tiler: s.tiles: a store exists there: not replaced (remove it, or --force replaces it)\n",
            "\(again.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: "\(folder)/s.tiles/manifest.json")) == manifest, "left as it was")
        let forced = try Self.run(["build", "base.jpg", "--out", "s.tiles", "--force"], in: folder)
        #expect(forced.status == 0 && !forced.stdout.contains("batch:"), "one image: its summary, no batch's")
        let two = try Self.run(["build", "base.jpg", "p.jpg", "--out", "two"], in: folder)
        #expect(two.status == 0 && two.stdout.contains("batch: 2 images, 0 failed"), "\(two)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: "\(folder)/s.tiles").contains("pyramid.tif"), "replaced by the TIFF store")
    }

    @Test("an output named for another format than the one written is refused before anything runs")
    func outputExtensions() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        for arguments in [
            ["render", "base.jpg", "--out", "r.png"], ["render", "base.jpg", "--out", "r.JPG"],
            ["thumb", "base.jpg", "--max-edge", "10", "--out", "t.png"]
        ] {
            let run = try Self.run(arguments, in: folder)
            #expect(run.status == 64 && run.stderr.contains("names a ."), "\(arguments): \(run.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: "\(folder)/r.png") && !FileManager.default.fileExists(atPath: "\(folder)/t.png"))
        for arguments in [
            ["render", "base.jpg", "--out", "r.PPM"], ["render", "base.jpg", "--out", "r"],
            ["thumb", "base.jpg", "--max-edge", "10", "--out", "t.jpeg"]
        ] {
            let run = try Self.run(arguments, in: folder)
            #expect(run.status == 0, "\(arguments): \(run.stderr)")
        }
    }

    @Test("a mistyped command suggests the nearest one; a word near none is left to the parser")
    func typos() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        for (typed, meant) in [("buidl", "build"), ("serv", "serve"), ("exprot", "export"), ("inf", "info"), ("thumbs", "thumb")] {
            let run = try Self.run([typed, "base.jpg"], in: folder)
            #expect(run.status == 64 && run.stderr.contains("did you mean \"\(meant)\"?"), "\(typed): \(run.stderr)")
        }
        let far = try Self.run(["zzzzzzzz"], in: folder)
        #expect(far.status == 64 && !far.stderr.contains("did you mean"), "\(far.stderr)")
    }

    @Test("every command's help says each option's default once")
    func helpDefaultsOnce() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        for command in ["build", "info", "render", "thumb", "export", "serve", "demo"] {
            let help = try Self.run([command, "--help"], in: folder)
            // The help's lines joined (ArgumentParser wraps them), spaces collapsed.
            let text = help.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
            #expect(help.status == 0 && text.contains("OPTIONS:"), "\(command): \(help.stderr)")
            let twice = text.components(separatedBy: " --").filter { option in
                option.components(separatedBy: "(default").count > 2
            }
            #expect(twice.isEmpty, "\(command): \(twice)")
        }
    }

    @Test("a file that is no image gets one wording from every command that reads a master")
    func notAnImage() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        #expect(FileManager.default.createFile(atPath: "\(folder)/text.jpg", contents: Data("hello, this is text\n".utf8)))
        let wording = "text.jpg: not an image this package reads (JPEG, PNG, TIFF or JPEG 2000): it starts with 0x68 0x65"
        for arguments in [
            ["build", "text.jpg"], ["info", "text.jpg"], ["render", "text.jpg", "--out", "r.ppm"],
            ["thumb", "text.jpg", "--max-edge", "10", "--out", "t.jpg"],
            ["export", "text.jpg", "--layout", "dzi", "--out", "e"]
        ] {
            let run = try Self.run(arguments, in: folder)
            #expect(run.status == 1 && run.stderr.contains(wording) && run.stderr.split(separator: "\n").count == 1, "\(arguments): \(run.stderr)")
        }
    }
}
