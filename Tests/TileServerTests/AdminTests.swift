import AsyncHTTPClient
import Foundation
import NIOHTTP1
import Testing
import TestSupport
import TileCore
@testable import TileServer

/// The admin API as an operator's script uses it: off without a token, refused with a wrong one;
/// listing, building, purging and rebuilding an image, checked against the files on disk.
@Suite("Admin API", .serialized)
struct AdminTests {
    @Test("off (404) without a token, 401 with a wrong one; list, build, purge (store deleted), rebuild")
    func admin() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var server = try TileServer(root: folder, cache: "\(folder)/.cache", storeFormat: .raw)
        try await TileServerTests.withServer(server) { base, client in
            let status1 = try await TileServerTests.get(client, "\(base)/admin/images").status
            #expect(status1 == 404, "off without a token")
        }
        // A TIFF pyramid of the photo, as `tiler build --format tiff` writes one, named as a camera would.
        var options = BuildOptions()
        options.format = .tiff()
        options.storage = .persistent(path: "\(folder)/.scan.tiles")
        _ = try TileBuilder.build(contentsOfFile: "\(folder)/photo.jpg", options: options)
        try FileManager.default.moveItem(atPath: "\(folder)/.scan.tiles/pyramid.tif", toPath: "\(folder)/scan.TIF")
        try FileManager.default.removeItem(atPath: "\(folder)/.scan.tiles")
        let token = "0123456789abcdef-admin"
        // A server of its own: the first one's catalog was shut down with it.
        server = try TileServer(root: folder, cache: "\(folder)/.cache", storeFormat: .raw)
        server.routes.admin = AdminPolicy(token: token)
        let auth = [("Authorization", "Bearer \(token)")]
        try await TileServerTests.withServer(server) { base, client in
            let status2 = try await TileServerTests.get(client, "\(base)/admin/images").status
            #expect(status2 == 401)
            let status3 = try await TileServerTests.get(client, "\(base)/admin/images", headers: [("Authorization", "Bearer wrong")]).status
            #expect(status3 == 401)
            // The folder's JPEG, not built yet, and its store.
            var list = try await TileServerTests.get(client, "\(base)/admin/images", headers: auth)
            var entries = try #require(try JSONSerialization.jsonObject(with: list.body) as? [[String: Any]])
            let ids = entries.compactMap { ($0["summary"] as? [String: Any])?["id"] as? String }
            #expect(ids == ["kept", "photo", "scan"], "\(ids)")
            // Built on request: the cache's store appears, and the listing has its size and fingerprint.
            let status4 = try await TileServerTests.get(client, "\(base)/admin/images/photo/build", method: .POST, headers: auth).status
            #expect(status4 == 202)
            let store = "\(folder)/.cache/photo.tiles"
            for _ in 0..<600 where !(try TiledImage.open(store: store).isComplete) { try await Task.sleep(for: .milliseconds(50)) }
            for _ in 0..<100 {
                list = try await TileServerTests.get(client, "\(base)/admin/images", headers: auth)
                entries = try #require(try JSONSerialization.jsonObject(with: list.body) as? [[String: Any]])
                if (Self.entry("photo", of: entries)?["summary"] as? [String: Any])?["state"] as? String == "ready" { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            let photo = try #require(Self.entry("photo", of: entries))
            #expect((photo["summary"] as? [String: Any])?["state"] as? String == "ready")
            #expect((photo["bytesOnDisk"] as? Int ?? 0) >= 1300 * 900 * 4, "a raw store holds at least level 0's pixels")
            #expect((photo["fingerprint"] as? String)?.isEmpty == false)
            // Purged: the store is gone, the source is not; asked again, it is built again.
            let status5 = try await TileServerTests.get(client, "\(base)/admin/images/photo", method: .DELETE, headers: auth).status
            #expect(status5 == 200)
            #expect(!FileManager.default.fileExists(atPath: store) && FileManager.default.fileExists(atPath: "\(folder)/photo.jpg"))
            let status6 = try await TileServerTests.get(client, "\(base)/admin/images/nothing", method: .DELETE, headers: auth).status
            #expect(status6 == 404)
            let status7 = try await TileServerTests.get(client, "\(base)/admin/images/photo/rebuild", method: .POST, headers: auth).status
            #expect(status7 == 202)
            for _ in 0..<600 where !((try? TiledImage.open(store: store))?.isComplete ?? false) { try await Task.sleep(for: .milliseconds(50)) }
            #expect(try TiledImage.open(store: store).isComplete)
            // A TIFF pyramid in the folder, its suffix upper-case: listed with its size on disk.
            let scan = try #require(Self.entry("scan", of: entries))
            let scanBytes = try FileManager.default.attributesOfItem(atPath: "\(folder)/scan.TIF")[.size] as? Int
            #expect(scan["bytesOnDisk"] as? Int == scanBytes, "\(scan)")
            // The folder's own store is never deleted by a purge.
            let status8 = try await TileServerTests.get(client, "\(base)/admin/images/kept", method: .DELETE, headers: auth).status
            #expect(status8 == 200)
            #expect(FileManager.default.fileExists(atPath: "\(folder)/kept.tiles"))
        }
    }

    /// The listing's entry of `id`.
    static func entry(_ id: String, of entries: [[String: Any]]) -> [String: Any]? {
        entries.first { ($0["summary"] as? [String: Any])?["id"] as? String == id }
    }
}
