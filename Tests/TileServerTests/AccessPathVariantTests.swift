import AsyncHTTPClient
import Foundation
import Testing
import TestSupport
import TileCore
@testable import TileServer

/// Restricted images asked for by paths written in other ways than the plain one: doubled slashes, a
/// final slash, a query, percent-encoded letters and slashes, an absolute target. Two readers of a path
/// decide an answer (the connection handler's ``TileAddress``, which answers cached tiles, and the
/// router); if they read another identifier from the same bytes, an answer cached for someone allowed
/// could go to anyone. Each path is asked first with a session allowed the image (its answer cached,
/// when the server answers it), then without one, on raw connections (nothing normalised by a client):
/// the second must never be a 200.
@Suite("Restricted images under paths written otherwise", .serialized)
struct AccessPathVariantTests {
    /// `path` written other ways, its identifier `id` (as the plain path writes it) in `encodedIDs`' ways too.
    static func variants(of path: String, id: String, encodedIDs: [String]) -> [String] {
        var paths = [path, path + "/", path + "?x=1", path + "?", "/" + path, path.replacingOccurrences(of: "/", with: "//")]
        for slash in path.indices.filter({ path[$0] == "/" }) { paths.append(String(path[..<slash]) + "/" + path[slash...]) }
        paths += encodedIDs.map {
            path.replacingOccurrences(of: "/\(id)/", with: "/\($0)/").replacingOccurrences(of: "/\(id)_files/", with: "/\($0)_files/")
        }
        return paths
    }

    /// One request on a new connection kept alive (as browsers ask: the connection handler answers cached
    /// tiles of such requests only), as written; its answer's status (0: none).
    static func status(_ port: UInt16, _ target: String, cookie: String?, method: String = "GET") async throws -> Int {
        let head = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n" + (cookie.map { "Cookie: \($0)\r\n" } ?? "") + "\r\n"
        let connection = try LoopbackConnection(port: port)
        try connection.send(Data(head.utf8))
        let read = await LoopbackConnection.onOwnThread {
            HTTPAnswers.read(connection, count: 1, timeout: LoopbackConnection.answerTimeout, grace: .zero, isHead: { _ in method == "HEAD" })
        }
        return read.answers.first?.status ?? 0
    }

    @Test("a restricted image's tiles and regions, under every writing of their paths: never 200 without a session")
    func variants() async throws {
        let folder = try AccessTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await TileServerTests.withServer(try AccessTests.server(folder)) { base, client in
            let port = UInt16(base.split(separator: ":").last!)!
            // bob is staff: `secret` in full; `archive/inside` for anyone who logged in. alice: `restricted-a` in
            // full, which anyone else sees at most 400 pixels wide (its full-size tiles: 401).
            let (_, bob) = try await AccessTests.logIn(client, base, user: "bob", password: "builder-42")
            let (_, alice) = try await AccessTests.logIn(client, base, user: "alice", password: "wonderland-7")
            let (staff, tiered) = (try #require(bob), try #require(alice))
            let plain = [
                ("secret", "/iiif/3/secret/0,0,256,256/256,/0/default.jpg", ["%73ecret", "secre%74", "%73%65%63%72%65%74"], staff),
                ("secret", "/iiif/2/secret/0,0,256,256/256,/0/default.jpg", ["%73ecret"], staff),
                ("secret", "/iiif/3/secret/full/max/0/default.jpg", ["%73ecret"], staff),
                ("secret", "/dzi/secret_files/11/0_0.jpg", ["%73ecret", "secre%74"], staff),
                ("archive%2Finside", "/iiif/3/archive%2Finside/0,0,256,256/256,/0/default.jpg", ["archive%2finside", "%61rchive%2Finside"], staff),
                ("archive%2Finside", "/dzi/archive%2Finside_files/11/0_0.jpg", ["archive%2finside"], staff),
                ("restricted-a", "/iiif/3/restricted-a/0,0,256,256/256,/0/default.jpg", ["%72estricted-a", "restricted%2Da"], tiered),
                ("restricted-a", "/dzi/restricted-a_files/11/1_1.jpg", ["restricted%2da"], tiered)
            ]
            for (id, path, encodings, cookie) in plain {
                // The plain path: built, answered in full to the session, refused to anyone else.
                #expect(try await AccessTests.get(client, base + path, cookie: cookie).status == 200, "\(path)")
                #expect(try await Self.status(port, path, cookie: nil) == 401, "\(path)")
                var answered = 0
                for variant in Self.variants(of: path, id: id, encodedIDs: encodings) {
                    if try await Self.status(port, variant, cookie: cookie) == 200 { answered += 1 }
                    for method in ["GET", "HEAD"] {
                        let status = try await Self.status(port, variant, cookie: nil, method: method)
                        #expect(status != 200 && status != 0, "\(method) \(variant): \(status) without a session")
                    }
                }
                #expect(answered > 1, "\(path): the session's answers to the other writings (\(answered))")
            }
            // An absolute target names the same path.
            let absolute = "http://127.0.0.1:\(port)/iiif/3/secret/0,0,256,256/256,/0/default.jpg"
            _ = try await Self.status(port, absolute, cookie: staff)
            #expect(try await Self.status(port, absolute, cookie: nil) != 200)
            // The same writings of an open image's path are answered: what is refused above is the rule's doing.
            let open = "/iiif/3/open/0,0,256,256/256,/0/default.jpg"
            #expect(try await AccessTests.get(client, base + open).status == 200)
            for variant in [open, open + "?x=1", "/iiif//3/open//0,0,256,256/256,/0/default.jpg", "/iiif/3/%6Fpen/0,0,256,256/256,/0/default.jpg"] {
                #expect(try await Self.status(port, variant, cookie: nil) == 200, "\(variant)")
            }
        }
    }
}
