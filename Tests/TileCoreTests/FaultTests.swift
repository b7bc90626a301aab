import Foundation
import Testing
import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// Faults that need a process of their own: a file-size limit, a kill in the middle of a build.
/// Each runs in an exit test (a child process); folders are fixed paths, since exit tests capture nothing.
@Suite("Faults", .serialized)
struct FaultTests {
    static let root = "/tmp/tiledimagekit-fault-tests"

    static func freshFolder(_ name: String) throws -> String {
        let path = "\(root)/\(name)"
        try? FileManager.default.removeItem(atPath: path)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func storeOptions(_ path: String) -> BuildOptions {
        var options = BuildOptions()
        options.storage = .persistent(path: path)
        return options
    }

    @Test("a write that hits a file-size limit fails with an I/O error, removes its files, and leaves other stores alone")
    func fileSizeLimit() async throws {
        let folder = try Self.freshFolder("fsize")
        let small = try TileBuilder.build(data: try Synthetic.jpeg(.init(width: 64, height: 64)), options: Self.storeOptions("\(folder)/other.tiles"))
        let before = try small.allTiles()
        await #expect(processExitsWith: .exitCode(0)) {
            let folder = "\(FaultTests.root)/fsize"
            signal(SIGXFSZ, SIG_IGN)
            var limit = rlimit(rlim_cur: 1 << 20, rlim_max: 1 << 20)
            setrlimit(Int32(RLIMIT_FSIZE.rawValue), &limit)
            let data = try Synthetic.jpeg(.init(width: 1500, height: 1200))
            let code = thrownCode { try TileBuilder.build(data: data, options: FaultTests.storeOptions("\(folder)/big.tiles")) }
            let left = try FileManager.default.contentsOfDirectory(atPath: folder).sorted()
            if code != .io || left != ["other.tiles"] {
                FileHandle.standardError.write(Data("fsize child: \(String(describing: code)), left \(left)\n".utf8))
                _exit(1)
            }
            // _exit: the child's work is done; skip exit-time handlers (a leak check under ASan would
            // report what a process that ends this way never frees).
            _exit(0)
        }
        #expect(try TiledImage.open(store: "\(folder)/other.tiles").allTiles() == before)
    }

    @Test("a build killed with SIGKILL leaves the previous complete store or none, never a half-written one")
    func killedMidBuild() async throws {
        let folder = try Self.freshFolder("kill")
        let data = try Synthetic.jpeg(.init(width: 1200, height: 900))
        let previous = try TileBuilder.build(data: data, options: Self.storeOptions("\(folder)/photo.tiles")).allTiles()
        for round in 0..<3 {
            setenv("TILEDIMAGEKIT_KILL_AFTER", "\(round * 3 + 1)", 1)
            await #expect(processExitsWith: .signal(SIGKILL)) {
                let folder = "\(FaultTests.root)/kill"
                let after = Int(String(cString: getenv("TILEDIMAGEKIT_KILL_AFTER"))) ?? 1
                let data = try Synthetic.jpeg(.init(width: 1200, height: 900))
                let builder = try TileBuilder(options: FaultTests.storeOptions("\(folder)/photo.tiles"))
                var chunks = 0
                for offset in stride(from: 0, to: data.count, by: 4096) {
                    try builder.append(data[offset..<min(offset + 4096, data.count)])
                    chunks += 1
                    if chunks == after { kill(getpid(), SIGKILL) }
                }
                kill(getpid(), SIGKILL)
            }
            // Reopening finds the previous complete store, and cleans what the killed build left.
            #expect(try TiledImage.open(store: "\(folder)/photo.tiles").allTiles() == previous)
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["photo.tiles"])
        }
    }

    @Test("store files are created exclusively, mode 0600, and a symlink planted at the store path is not followed")
    func safeCreation() throws {
        let folder = try Self.freshFolder("safe")
        let target = try Self.freshFolder("safe-target")
        try "keep".write(toFile: "\(target)/precious", atomically: false, encoding: .utf8)
        try FileManager.default.createSymbolicLink(atPath: "\(folder)/photo.tiles", withDestinationPath: target)
        let data = try Synthetic.jpeg(.init(width: 100, height: 80))
        #expect(thrownCode { try TileBuilder.build(data: data, options: Self.storeOptions("\(folder)/photo.tiles")) } == .invalidStore)
        #expect(FileManager.default.fileExists(atPath: "\(target)/precious"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["photo.tiles"])
        _ = try TileBuilder.build(data: data, options: Self.storeOptions("\(folder)/real.tiles"))
        for name in try FileManager.default.contentsOfDirectory(atPath: "\(folder)/real.tiles") {
            var info = stat()
            stat("\(folder)/real.tiles/\(name)", &info)
            #expect(info.st_mode & 0o777 == 0o600, "\(name)")
        }
    }
}
