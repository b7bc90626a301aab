import Foundation
import Testing
import TestSupport
import TileActors
import TileCore
@testable import TileServer

/// The disk attacks of issue 37: a cache or a folder whose disk fills, stores deleted by hand, builds
/// whose stores cannot fit the budget, and masters that declare more than they hold. Each is answered
/// 507 with the reason in `/ready`, and nothing past the budget is written.
@Suite("Server disks under attack", .serialized)
struct ServerDiskAttackTests {
    @Test("a store deleted from the cache folder by hand leaves the budget's accounts (and /ready's count)")
    func storeDeletedByHand() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let catalog = try ImageCatalog(root: folder, cache: "\(folder)/.cache", storeFormat: .raw)
        let catalogService = catalog.started()
        defer { catalogService.cancel() }
        let deadline = ContinuousClock.now + .seconds(120)
        while try await !catalog.image("photo").pyramid.isComplete, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        let store = "\(catalog.cache)/photo.tiles"
        let used = await catalog.health().diskBytesUsed
        #expect(used >= FileFacts.diskBytes(below: store) / 2 && used > 0, "the built store is counted: \(used) bytes")
        try FileManager.default.removeItem(atPath: store)
        var left = used
        while left > 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
            left = await catalog.health().diskBytesUsed
        }
        #expect(left == 0, "the deleted store still counts \(left) bytes")
        #expect(await catalog.health().isReady)
    }

    @Test(
        "a build that finds the cache's disk full answers 507 and /ready says why (a 4 MiB tmpfs)",
        .enabled(if: Tmpfs.isAvailable, Comment(rawValue: Tmpfs.unavailableMessage)))
    func diskFull() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let cache = try #require(Tmpfs.mount(bytes: 4 << 20))
        defer { Tmpfs.unmount(cache) }
        // A raw store of the 1300x900 photo takes about 6 MiB: its build runs out of space.
        let server = try TileServer(root: folder, cache: cache, storeFormat: .raw)
        try await TileServerTests.withServer(server) { base, client in
            let reply = try await TileServerTests.settled(client, "\(base)/iiif/3/photo/full/100,/0/default.jpg")
            #expect(reply.status == 507, "\(reply.status) \(String(decoding: reply.body, as: UTF8.self))")
            #expect(String(decoding: reply.body, as: UTF8.self).contains("disk is full"))
            let ready = try await TileServerTests.get(client, "\(base)/ready")
            #expect(ready.status == 503)
            #expect(String(decoding: ready.body, as: UTF8.self).contains("disk is full"), "\(String(decoding: ready.body, as: UTF8.self))")
        }
    }

    @Test(
        "the default disk budget is a quarter of the cache folder's own file system (an empty 2 GiB and 8 GiB tmpfs), not $TMPDIR's",
        .enabled(if: Tmpfs.isAvailable, Comment(rawValue: Tmpfs.unavailableMessage)))
    func defaultBudgetFromTheCacheDisk() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // An empty tmpfs of a given size has that much free (its pages are taken only as files fill
        // them), whatever $TMPDIR's disk has.
        for gib in [2, 8] {
            let cache = try #require(Tmpfs.mount(bytes: gib << 30))
            defer { Tmpfs.unmount(cache) }
            let catalog = try ImageCatalog(root: folder, cache: cache)
            // (Within a MiB: the catalog may write a few pages there before it sizes the budget.)
            let budget = await catalog.budget.totalByteBudget
            #expect(abs(budget - (gib << 30) / 4) <= 1 << 20, "\(budget)")
        }
    }

    @Test(
        "an upload that finds the folder's disk full answers 507 and /ready says why (a 4 MiB tmpfs)",
        .enabled(if: Tmpfs.isAvailable, Comment(rawValue: Tmpfs.unavailableMessage)))
    func uploadDiskFull() async throws {
        let (folder, jpeg) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let root = try #require(Tmpfs.mount(bytes: 4 << 20))
        defer { Tmpfs.unmount(root) }
        // The upload's raw store (about 6 MiB for the 1300x900 photo) is made in the folder served; the
        // budget has room for it, the disk has not.
        let catalog = try ImageCatalog(
            root: root, cache: "\(folder)/.cache", cacheByteBudget: 1 << 30, storeFormat: .raw)
        try await TileServerTests.withServer(TileServer(catalog: catalog, uploads: UploadPolicy(token: "t"))) { base, client in
            let port = UInt16(base.split(separator: ":").last!)!
            let head =
                "PUT /images/up HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer t\r\nContent-Length: \(jpeg.count)\r\nConnection: close\r\n\r\n"
            let reply = try await RequestGuardTests.send(port, head, body: jpeg)
            #expect(reply.status == 507, "\(reply.status) \(String(decoding: reply.body, as: UTF8.self))")
            #expect(String(decoding: reply.body, as: UTF8.self).contains("disk is full"))
            let ready = try await TileServerTests.get(client, "\(base)/ready")
            #expect(ready.status == 503)
            #expect(String(decoding: ready.body, as: UTF8.self).contains("disk is full"), "\(String(decoding: ready.body, as: UTF8.self))")
        }
        // Nothing of the upload is left on the full disk.
        #expect(try FileManager.default.contentsOfDirectory(atPath: root).filter { $0.contains("up") } == [])
    }

    /// A raw store's bytes, written plainly: every level's tiles, padding included, 4 bytes a pixel.
    static func rawStoreBytes(width: Int, height: Int, tile: Int = 256) -> Int {
        var (w, h, total) = (width, height, 0)
        while true {
            total += ((w + tile - 1) / tile) * ((h + tile - 1) / tile) * tile * tile * 4
            if w <= tile && h <= tile { return total }
            (w, h) = ((w + 1) / 2, (h + 1) / 2)
        }
    }

    @Test(
        "a folder build reserves its store before it writes: refused (507) when it cannot fit, nothing past the budget written; one that fits is built"
    )
    func buildsReserveTheirStores() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = Self.rawStoreBytes(width: 1300, height: 900)
        for (budget, fits) in [(store / 2, false), (store * 3, true)] {
            let cache = "\(folder)/.cache-\(budget)"
            let server = try TileServer(root: folder, cache: cache, cacheByteBudget: budget, storeFormat: .raw)
            try await TileServerTests.withServer(server) { base, _ in
                let port = UInt16(base.split(separator: ":").last!)!
                let reply = try await RequestGuardTests.send(
                    port, "GET /iiif/3/photo/0,0,256,256/256,/0/default.jpg HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                #expect(
                    reply.status == (fits ? 200 : 507),
                    "budget \(budget) for a store of \(store): \(reply.status) \(String(decoding: reply.body, as: UTF8.self))")
                if !fits { #expect(String(decoding: reply.body, as: UTF8.self).contains("disk budget")) }
            }
            #expect(FileFacts.diskBytes(below: cache) <= budget, "\(FileFacts.diskBytes(below: cache)) bytes in the cache for a budget of \(budget)")
        }
    }

    @Test(
        "a TIFF whose 8,192 strips all point at one PackBits row (66 KB for a store of about 22 MB) is refused by the budget (507), nothing past it written"
    )
    func tiffStripBomb() async throws {
        let folder = NSTemporaryDirectory() + "tile-strips-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // 8192 x 8192 8-bit RGB, a row a strip, PackBits (32773): every strip is the same 384 bytes,
        // 192 runs of 0x81 0x00 (128 zeros each, TIFF 6.0 section 9), one black row of 24,576 bytes.
        let side = 8192
        let row = [UInt8]((0..<(side * 3 / 128)).flatMap { _ in [0x81, 0x00] as [UInt8] })
        let tiff = Bombs.tiff(
            [(256, 4, [UInt32(side)]), (257, 4, [UInt32(side)]), (258, 3, [8, 8, 8]), (259, 3, [32773]), (262, 3, [2]), (277, 3, [3]), (278, 4, [1])],
            strips: [row], pointers: [Int](repeating: 0, count: side))
        #expect(tiff.count < 70_000)
        try Data(tiff).write(to: URL(fileURLWithPath: "\(folder)/strips.tif"))
        let budget = 4 << 20
        let cache = "\(folder)/.cache"
        try await TileServerTests.withServer(try TileServer(root: folder, cache: cache, cacheByteBudget: budget)) { base, _ in
            let port = UInt16(base.split(separator: ":").last!)!
            let reply = try await RequestGuardTests.send(
                port, "GET /iiif/3/strips/full/256,/0/default.jpg HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            #expect(reply.status == 507, "\(reply.status) \(String(decoding: reply.body, as: UTF8.self))")
        }
        #expect(FileFacts.diskBytes(below: cache) <= budget)
    }

    @Test(
        "the 1-bit PNG with tRNS (a raw store of 357 MB from 24 KB) never writes more than the budget allows",
        .enabled(if: Tools.have("pnmtopng"), Comment(rawValue: Tools.missing("pnmtopng"))))
    func pngBombOverBudget() async throws {
        let folder = NSTemporaryDirectory() + "tile-budget-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let side = 8192
        try (Data("P4\n\(side) \(side)\n".utf8) + Data(count: side / 8 * side)).write(to: URL(fileURLWithPath: "\(folder)/big.pbm"))
        let png = try Tools.run("pnmtopng", ["-transparent", "white", "\(folder)/big.pbm"]).stdout
        try FileManager.default.removeItem(atPath: "\(folder)/big.pbm")
        try png.write(to: URL(fileURLWithPath: "\(folder)/big.png"))
        #expect(png.count < 64 * 1024 && Self.rawStoreBytes(width: side, height: side) > 300_000_000)
        let budget = 64 << 20
        let cache = "\(folder)/.cache"
        // JPEG tiles asked for: the master with alpha goes into a raw store (by default it would get
        // WebP tiles, a few hundred kilobytes).
        let server = try TileServer(root: folder, cache: cache, cacheByteBudget: budget, storeFormat: .tiff(TIFFWriting(compression: .jpeg)))
        try await TileServerTests.withServer(server) { base, _ in
            let port = UInt16(base.split(separator: ":").last!)!
            let reply = try await RequestGuardTests.send(
                port, "GET /iiif/3/big/full/256,/0/default.png HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            #expect(reply.status == 507, "\(reply.status) \(String(decoding: reply.body, as: UTF8.self))")
        }
        #expect(FileFacts.diskBytes(below: cache) <= budget)
    }
}
