import Foundation
import NIOConcurrencyHelpers
import Testing
import TestTraits
import CJpegShim
import TestSupport
import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// Faults that need a process of their own: a file-size limit, a kill in the middle of a build.
/// Each runs in an exit test (a child process); folders are fixed paths, since exit tests capture nothing.
@Suite("Faults", .serialized, .ownThreads)
struct FaultTests {
    static let root = "/tmp/tiledimagekit-fault-tests"

    static func freshFolder(_ name: String) throws -> String {
        let path = "\(root)/\(name)"
        try? FileManager.default.removeItem(atPath: path)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func storeOptions(_ path: String, format: StoreFormat = .raw) -> BuildOptions {
        var options = BuildOptions()
        options.storage = .persistent(path: path)
        options.format = format
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
            if code != .io || left != ["other.tiles"]
                || thrownError({ try TileBuilder.build(data: data, options: FaultTests.storeOptions("\(folder)/big.tiles")) })?.errno != EFBIG
            {
                FileHandle.standardError.write(Data("fsize child: \(String(describing: code)), left \(left)\n".utf8))
                _exit(1)
            }
            // _exit: the child's work is done; skip exit-time handlers (a leak check under ASan would
            // report what a process that ends this way never frees).
            _exit(0)
        }
        #expect(try TiledImage.open(store: "\(folder)/other.tiles").allTiles() == before)
    }

    @Test("a TIFF store's write that hits a file-size limit fails with EFBIG and the writer's message, and removes its files")
    func tiffFileSizeLimit() async throws {
        let folder = try Self.freshFolder("fsize-tiff")
        await #expect(processExitsWith: .exitCode(0)) {
            let folder = "\(FaultTests.root)/fsize-tiff"
            signal(SIGXFSZ, SIG_IGN)
            var limit = rlimit(rlim_cur: 1 << 18, rlim_max: 1 << 18)  // the TIFF is about 1 MB
            setrlimit(Int32(RLIMIT_FSIZE.rawValue), &limit)
            var options = FaultTests.storeOptions("\(folder)/big.tiles")
            options.format = .tiff()
            let data = try Synthetic.jpeg(.init(width: 1500, height: 1200))
            let error = thrownError { try TileBuilder.build(data: data, options: options) }
            let left = try FileManager.default.contentsOfDirectory(atPath: folder)
            // The message is the writer's own (copied under its lock), not the fallback text.
            guard let error, error.code == .io, error.errno == EFBIG, !error.message.contains("the TIFF writer failed"), left.isEmpty else {
                FileHandle.standardError.write(Data("fsize-tiff child: \(String(describing: error)), left \(left)\n".utf8))
                _exit(1)
            }
            _exit(0)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder).isEmpty)
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
            // Reopening finds the previous complete store, and changes nothing on disk: what the killed
            // build left is the next build's to clean.
            #expect(try TiledImage.open(store: "\(folder)/photo.tiles").allTiles() == previous)
            let left = try FileManager.default.contentsOfDirectory(atPath: folder)
            #expect(left.contains("photo.tiles") && left.allSatisfy { $0 == "photo.tiles" || $0.hasPrefix(".photo.tiles.partial-") }, "\(left)")
        }
        _ = try TileBuilder.build(data: data, options: Self.storeOptions("\(folder)/photo.tiles"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["photo.tiles"])
    }

    @Test("store files are created exclusively with the umask's modes, and a symlink planted at the store path is not followed")
    func safeCreation() throws {
        let folder = try Self.freshFolder("safe")
        let target = try Self.freshFolder("safe-target")
        try "keep".write(toFile: "\(target)/precious", atomically: false, encoding: .utf8)
        try FileManager.default.createSymbolicLink(atPath: "\(folder)/photo.tiles", withDestinationPath: target)
        let data = try Synthetic.jpeg(.init(width: 100, height: 80))
        #expect(thrownCode { try TileBuilder.build(data: data, options: Self.storeOptions("\(folder)/photo.tiles")) } == .invalidStore)
        #expect(FileManager.default.fileExists(atPath: "\(target)/precious"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["photo.tiles"])
        // Modes as for any file the process makes (the kernel's report of its umask): a server running as
        // another user can read what `tiler build` wrote.
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("Umask:") })
        let mask = try #require(mode_t(line.dropFirst(6).trimmingCharacters(in: .whitespaces), radix: 8))
        for options in [Self.storeOptions("\(folder)/real.tiles"), Self.storeOptions("\(folder)/real.tif.tiles", format: .tiff())] {
            guard case .persistent(let path) = options.storage else { continue }
            _ = try TileBuilder.build(data: data, options: options)
            var info = stat()
            stat(path, &info)
            #expect(info.st_mode & 0o777 == 0o777 & ~mask, "the store's folder")
            for name in try FileManager.default.contentsOfDirectory(atPath: path) {
                stat("\(path)/\(name)", &info)
                #expect(info.st_mode & 0o777 == 0o666 & ~mask, "\(name)")
            }
        }
    }
}

@Suite("Descriptor ownership", .ownThreads)
struct DescriptorOwnershipTests {
    @Test("concurrent builds where half fail mid-build: every surviving store equals a build made alone")
    func failingBuildsDoNotWriteIntoOthers() throws {
        let jpeg = try Synthetic.jpeg(.init(width: 1400, height: 1100, quality: 80))
        let bytes = [UInt8](jpeg)
        // Cut in the middle of the scan and closed with EOI: refused as truncated while the writer's
        // threads still have rows and writes in flight.
        let cut = Data(bytes[..<(bytes.count * 3 / 5)] + [0xFF, 0xD9])
        let expected = try TileBuilder.build(data: jpeg).allTiles()
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("owners-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        for round in 0..<4 {
            let results = NIOLockedValueBox<[Int: Result<Void, any Error>]>([:])
            DispatchQueue.concurrentPerform(iterations: 12) { index in
                var options = BuildOptions()
                options.storage = .persistent(path: "\(root)/r\(round)-\(index).tiles")
                let outcome = Result<Void, any Error> {
                    if index % 2 == 1 {
                        #expect(thrownCode { try TileBuilder.build(data: cut, options: options) } == .truncated)
                        return
                    }
                    let image = try TileBuilder.build(data: jpeg, options: options)
                    // Reopened from disk: what the files hold, after every writer of every build is gone.
                    _ = image
                }
                results.withLockedValue { $0[index] = outcome }
            }
            for index in stride(from: 0, to: 12, by: 2) {
                let path = "\(root)/r\(round)-\(index).tiles"
                try results.withLockedValue { try $0[index]!.get() }
                #expect(try TiledImage.open(store: path).allTiles() == expected, "round \(round), build \(index)")
            }
        }
    }
}

/// A write that fails in the middle of a build, injected at the C level: the level file's descriptor
/// is replaced (dup2) by a read-only one half-way, so later writes fail with EBADF.
@Suite("Write faults mid-build", .ownThreads)
struct MidBuildWriteFaultTests {
    @Test(
        "a write failing half-way through fails the pyramid with that errno, whichever thread writes",
        arguments: [Int32(CJS_BANDS_ON_CALLER.rawValue), Int32(CJS_BANDS_ON_WORKER.rawValue), Int32(CJS_BANDS_WRITE_BEHIND.rawValue)])
    func writeFailsHalfWay(threading: Int32) throws {
        let geometry = try TileGeometry(storedWidth: 1200, storedHeight: 1000)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("midfault-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var fds: [Int32] = []
        defer { fds.forEach { close($0) } }
        let levels = geometry.levels.enumerated().map { index, level in
            let fd = open("\(folder)/level-\(index)", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            fds.append(fd)
            return cjs_level(
                fd: fd, width: UInt32(level.width), height: UInt32(level.height), x_offset: 0, y_offset: 0,
                columns: UInt32(level.columns), rows: UInt32(level.rows))
        }
        #expect(!fds.contains(-1))
        var config = cjs_writer_config(
            kind: Int32(CJS_WRITER_BANDS.rawValue), band_rows: 0, band_threading: threading, bypass_page_cache: 0, export_to: nil,
            tiff: nil, tiff_quality: 0, tiff_tables: 0, tiff_orientation: 0, first_level: 0)
        var handle: OpaquePointer?
        var number: Int32 = -1
        #expect(cjs_pyramid_create(levels, UInt32(levels.count), 256, &config, nil, &handle, &number) == CJS_OK)
        #expect(number == 0)
        let pyramid = try #require(handle)
        defer { cjs_pyramid_destroy(pyramid) }
        func push(_ rows: Int) -> cjs_status {
            var pushed = 0
            while pushed < rows {
                var slot: UnsafeMutableRawPointer?
                var stride = 0
                var capacity: UInt32 = 0
                let acquired = cjs_pyramid_acquire_rows(pyramid, &slot, &stride, &capacity)
                guard acquired == CJS_OK, let slot else { return acquired }
                let count = min(Int(capacity), rows - pushed)
                slot.initializeMemory(as: UInt8.self, repeating: 200, count: stride * count)
                let submitted = cjs_pyramid_submit_rows(pyramid, UInt32(count))
                guard submitted == CJS_OK else { return submitted }
                pushed += count
            }
            return cjs_pyramid_sync(pyramid)
        }
        #expect(push(512) == CJS_OK)
        let readOnly = open("\(folder)/level-0", O_RDONLY | O_CLOEXEC)
        #expect(dup2(readOnly, fds[0]) == fds[0])
        close(readOnly)
        var status = push(488)
        if status == CJS_OK { status = cjs_pyramid_finish(pyramid) }
        #expect(status == CJS_ERR_IO)
        #expect(cjs_pyramid_errno(pyramid) == EBADF)
    }

    @Test("a level file that cannot be sized reports the real errno (EFBIG under a file-size limit), not 0")
    func sizingFailureReportsItsErrno() async throws {
        await #expect(processExitsWith: .exitCode(0)) {
            signal(SIGXFSZ, SIG_IGN)
            var limit = rlimit(rlim_cur: 1 << 20, rlim_max: 1 << 20)
            setrlimit(Int32(RLIMIT_FSIZE.rawValue), &limit)
            let error = thrownError { try TileBuilder.build(data: try Synthetic.jpeg(.init(width: 1500, height: 1200))) }
            _exit(error?.code == .io && error?.errno == EFBIG ? 0 : 1)
        }
    }
}
