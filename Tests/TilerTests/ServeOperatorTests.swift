import Foundation
import Testing
import TestSupport
import TestTraits
import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// Running another user's process: what the two-user test needs, and why it may not run.
enum Users {
    /// `nobody`'s number on Debian.
    static let nobody: uid_t = 65534
    static let setpriv = Tools.path("setpriv") ?? "/usr/bin/setpriv"

    /// Why a process cannot be run as `nobody` here, or nil when it can: the tests run as root, util-linux's
    /// `setpriv` is there, and `nobody` may run the tiler under test (every folder above it searchable).
    static let whyNot: String? = {
        guard getuid() == 0 else { return "needs root, to run tiler serve as another user (nobody)" }
        guard Tools.have("setpriv") else { return Tools.missing("setpriv") }
        guard let run = try? Tools.run("setpriv", ["--reuid=\(nobody)", "--regid=\(nobody)", "--clear-groups", TilerCommandTests.binary, "--help"]),
            run.status == 0
        else { return "the user nobody cannot run \(TilerCommandTests.binary) (a folder above it is not searchable by others)" }
        return nil
    }()
}

/// What an operator meets: the access log written to a file and reopened on `SIGHUP` (logrotate, the
/// systemd unit's `ExecReload`), and stores built by one user served by a server running as another.
@Suite("tiler serve for operators", .serialized, .ownThreads)
struct ServeOperatorTests {
    /// Waits (holding the thread: this suite has threads of its own) until `done`, at most 60 s.
    static func wait(until done: () -> Bool) {
        let deadline = ContinuousClock.now + .seconds(60)
        while !done(), ContinuousClock.now < deadline { usleep(20_000) }
    }

    /// The file's text, read with `read(2)` (Foundation's `String(contentsOfFile:)` leaked a 4 KiB buffer
    /// here under LeakSanitizer, reading the log while the server appended to it).
    static func text(_ path: String) -> String { FileFacts.procText(path, limit: 1 << 16) ?? "" }

    @Test("--access-log-file with --access-log-format combined: nginx's combined lines; SIGHUP reopens the file after it was renamed")
    func accessLogFile() throws {
        let folder = try TilerCommandTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let log = "\(folder)/access.log"
        let server = try ServeCommandTests.Server([folder, "--port", "0", "--access-log-file", log, "--access-log-format", "combined"])
        defer { if server.process.isRunning { kill(server.process.processIdentifier, SIGKILL) } }
        let connection = try LoopbackConnection(port: UInt16(server.port))
        try connection.send(
            Data(
                "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nReferer: http://example.org/a\r\nUser-Agent: Test \"1\"\r\nConnection: close\r\n\r\n".utf8
            ))
        _ = connection.read(timeout: .seconds(60))
        let first = "\"GET /health HTTP/1.1\" 200 3 \"http://example.org/a\" \"Test \\x221\\x22\"\n"
        Self.wait { Self.text(log).hasSuffix(first) }
        #expect(Self.text(log).hasPrefix("127.0.0.1 - - [") && Self.text(log).hasSuffix(first), "\(Self.text(log))")

        // logrotate's way: rename, then SIGHUP; the server makes a new file at the path and writes there.
        #expect(rename(log, "\(log).1") == 0)
        kill(server.process.processIdentifier, SIGHUP)
        Self.wait { access(log, F_OK) == 0 }
        // A request the router answers (not the connection handler): the same combined fields.
        let routed = try LoopbackConnection(port: UInt16(server.port))
        try routed.send(
            Data("GET /ready HTTP/1.1\r\nHost: 127.0.0.1\r\nReferer: http://example.org/b\r\nUser-Agent: Test\r\nConnection: close\r\n\r\n".utf8))
        _ = routed.read(timeout: .seconds(60))
        let second = "\"GET /ready HTTP/1.1\" 200 6 \"http://example.org/b\" \"Test\"\n"
        Self.wait { Self.text(log).hasSuffix(second) }
        #expect(Self.text(log).split(separator: "\n").count == 1 && Self.text(log).hasSuffix(second), "\(Self.text(log))")
        #expect(Self.text("\(log).1").split(separator: "\n").count == 1, "\(Self.text("\(log).1"))")
        #expect(server.process.isRunning)
        #expect(server.terminate(within: 30)?.status == 0)
    }

    @Test(
        "a store built by root (umask 022) is served by a server running as nobody; a store left 0700 and a master left 0600 answer 403 (tiles, state and viewer page), and the log says which file",
        .enabled(if: Users.whyNot == nil, Comment(rawValue: Users.whyNot ?? "")))
    func anotherUser() throws {
        let folder = try TilerCommandTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let master = "\(folder)/master.jpg"
        let photo = try DemoImage.jpeg(width: 600, height: 400)
        try photo.write(to: URL(fileURLWithPath: master))
        let previous = umask(0o022)
        defer { umask(previous) }
        for name in ["shared", "private", "both"] {
            let build = try TilerCommandTests.run(["build", master, "--out", "\(folder)/\(name).tiles"], in: folder)
            #expect(build.status == 0, "\(build.stderr)")
        }
        #expect(chmod("\(folder)/private.tiles", 0o700) == 0 && chmod("\(folder)/base.jpg", 0o600) == 0)
        // A master the server may not read beside a store it may: the store is served.
        try FileManager.default.copyItem(atPath: master, toPath: "\(folder)/both.jpg")
        #expect(chmod("\(folder)/both.jpg", 0o600) == 0)
        let cache = "\(folder)-cache"
        try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: cache) }
        #expect(chown(cache, Users.nobody, Users.nobody) == 0)

        let server = try ServeCommandTests.Server([folder, "--port", "0", "--cache", cache, "--no-access-log"], user: Users.nobody)
        defer { if server.process.isRunning { kill(server.process.processIdentifier, SIGKILL) } }
        // The store's level 0 tile (0, 0) against libjpeg's decode of the master.
        let tile = try ServeCommandTests.request(server.port, "GET", "/iiif/3/shared/0,0,256,256/256,/0/default.jpg")
        #expect(tile.status == 200)
        if tile.status == 200 {
            let decoded = try Reference.decode(tile.body).image
            let reference = Reference.crop(try Reference.decode(photo).image, x: 0, y: 0, width: 256, height: 256)
            #expect(Reference.psnr(decoded, reference) >= 30)
        }
        #expect(try ServeCommandTests.request(server.port, "GET", "/iiif/3/both/info.json").status == 200)
        for id in ["private", "base"] {
            let refused = try ServeCommandTests.request(server.port, "GET", "/iiif/3/\(id)/info.json")
            #expect(refused.status == 403 && String(decoding: refused.body, as: UTF8.self).contains("may not read the file of \(id)"))
            // Its state and its viewer page say the same as its tiles, not that there is no such image.
            for page in ["/images/\(id)", "/view/\(id)"] {
                #expect(try ServeCommandTests.request(server.port, "GET", page).status == 403, "\(page)")
            }
        }
        let logged = { server.errorsSoFar() }
        Self.wait { logged().contains("base.jpg: Permission denied") }
        #expect(logged().contains("error=cannot open \(folder)/private.tiles/manifest.json: Permission denied id=private"), "\(logged())")
        #expect(logged().contains("error=cannot open \(folder)/base.jpg: Permission denied id=base"), "\(logged())")
        // Asked for three times each (info.json, its state, its viewer page): said once each.
        for id in ["private", "base"] {
            let lines = logged().split(separator: "\n").filter {
                $0.contains("refused: the server may not read") && $0.contains("Permission denied id=\(id)")
            }
            #expect(lines.count == 1, "\(lines)")
        }
        #expect(server.terminate(within: 30)?.status == 0)
    }
}
