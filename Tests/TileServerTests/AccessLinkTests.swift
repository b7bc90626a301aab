import AsyncHTTPClient
import Foundation
import Testing
import TestSupport
import TileCore
@testable import TileServer

/// Restricted images and followed symlinks, over HTTP on loopback: a link names an image only when the
/// rule that decides its target decides it too. Without that, `public.jpg -> restricted/secret.jpg`
/// would serve a restricted master in full to anyone, under a name no rule matches.
@Suite("Restricted images behind symlinks", .serialized)
struct AccessLinkTests {
    /// The folder: `restricted/secret.jpg`, `restricted/alias.jpg` (a link to it: the same rule),
    /// `public.jpg` (a link to it from outside the rule), `shortcut` (a link to the folder `restricted`),
    /// `open.jpg` and `open-link.jpg` (a link to it: no rule either side).
    static func folder() throws -> String {
        let (folder, jpeg) = try TileServerTests.folder()
        let files = FileManager.default
        try files.createDirectory(atPath: "\(folder)/restricted", withIntermediateDirectories: true)
        try jpeg.write(to: URL(fileURLWithPath: "\(folder)/restricted/secret.jpg"))
        try jpeg.write(to: URL(fileURLWithPath: "\(folder)/open.jpg"))
        try files.createSymbolicLink(atPath: "\(folder)/restricted/alias.jpg", withDestinationPath: "secret.jpg")
        try files.createSymbolicLink(atPath: "\(folder)/public.jpg", withDestinationPath: "restricted/secret.jpg")
        try files.createSymbolicLink(atPath: "\(folder)/shortcut", withDestinationPath: "restricted")
        try files.createSymbolicLink(atPath: "\(folder)/open-link.jpg", withDestinationPath: "\(folder)/open.jpg")
        return folder
    }

    static func server(_ folder: String, policy: AccessPolicy?) throws -> TileServer {
        var server = try TileServer(root: folder, cache: "\(folder)/.cache", followsSymlinks: true, storeFormat: .raw)
        server.routes.downloads = true
        server.routes.access = policy
        return server
    }

    static let policy = AccessPolicy(
        rules: [.init(match: "restricted/*", allow: ["alice"])], users: AccessPolicy.users(htpasswd: AccessTests.htpasswd),
        sessionKey: AccessTests.key)

    @Test("without rules, every link inside the folder names its target's image")
    func linksWithoutRules() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await TileServerTests.withServer(try Self.server(folder, policy: nil)) { base, client in
            for id in ["public", "shortcut%2Fsecret", "restricted%2Falias", "open-link"] {
                let tile = try await TileServerTests.settled(client, "\(base)/iiif/3/\(id)/full/64,/0/default.jpg")
                #expect(tile.status == 200, "\(id)")
            }
        }
    }

    @Test("with rules, a link to an image another rule decides names nothing; one within its rule is restricted as its target")
    func linksUnderRules() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await TileServerTests.withServer(try Self.server(folder, policy: Self.policy)) { base, client in
            let iiif = "\(base)/iiif/3"
            // No rule either side: as without a policy.
            #expect(try await TileServerTests.settled(client, "\(iiif)/open-link/full/64,/0/default.jpg").status == 200)
            // A link's name no rule matches, to a restricted master (its own, or a folder's on the way): nothing,
            // to anyone, by any route.
            let refused = [
                "/iiif/3/public/info.json", "/iiif/3/public/full/64,/0/default.jpg", "/iiif/3/public/0,0,256,256/256,/0/default.jpg",
                "/iiif/2/public/full/64,/0/default.jpg", "/dzi/public.dzi", "/download/public", "/iiif/3/shortcut%2Fsecret/info.json",
                "/iiif/3/shortcut%2Fsecret/full/64,/0/default.jpg", "/download/shortcut%2Fsecret"
            ]
            for path in refused {
                let reply = try await TileServerTests.get(client, base + path)
                #expect(reply.status == 404, "\(path): \(reply.status)")
            }
            // A link within the rule: restricted as its target is (info.json and its services; no tile).
            let info = try await AccessTests.get(client, "\(iiif)/restricted%2Falias/info.json")
            #expect(info.status == 200 && String(decoding: info.body, as: UTF8.self).contains("AuthProbeService2"))
            #expect(try await AccessTests.get(client, "\(iiif)/restricted%2Falias/full/64,/0/default.jpg").status == 401)
            // The link to the folder is not listed as a folder of its own.
            let top = try await TileServerTests.get(client, "\(iiif)/collection")
            let items = (try JSONSerialization.jsonObject(with: top.body) as? [String: Any])?["items"] as? [[String: Any]] ?? []
            #expect(!items.contains { ($0["id"] as? String)?.contains("shortcut") == true }, "\(items)")

            // Logged in as the one the rule allows: the link within the rule in full; the others still nothing.
            let (_, cookie) = try await AccessTests.logIn(client, base, user: "alice", password: "wonderland-7")
            let session = try #require(cookie)
            let full = try await AccessTests.get(client, "\(iiif)/restricted%2Falias/full/64,/0/default.jpg", cookie: session)
            #expect(full.status == 200)
            for path in ["/iiif/3/public/full/64,/0/default.jpg", "/iiif/3/shortcut%2Fsecret/info.json"] {
                #expect(try await AccessTests.get(client, base + path, cookie: session).status == 404, "\(path)")
            }
            let listed = try await TileServerTests.get(client, "\(iiif)/collection", headers: [("Cookie", session)])
            let names = (try JSONSerialization.jsonObject(with: listed.body) as? [String: Any])?["items"] as? [[String: Any]] ?? []
            #expect(names.contains { ($0["id"] as? String) == "\(iiif)/restricted/collection" }, "\(names)")
            #expect(!names.contains { ($0["id"] as? String)?.contains("shortcut") == true }, "\(names)")
        }
    }
}
