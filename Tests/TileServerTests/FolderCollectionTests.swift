import AsyncHTTPClient
import Foundation
import Testing
import TestSupport
import TileCore
@testable import TileServer

/// Sub-folders (issue 40, point 2: "a folder of folders becomes a collection of collections"). The
/// expected documents are written out here from the folder the test makes: each folder a
/// Presentation 3.0 `Collection` listing its sub-folders' collections, then its images' manifests, by
/// name; an image in a sub-folder is the identifier `maps/old/rome`, `maps%2Fold%2Frome` in URLs, and
/// every URI a document gives is fetched, down to the image, decoded by libjpeg at its stated size.
@Suite("Sub-folders as collections", .serialized)
struct FolderCollectionTests {
    /// `top.jpg`, `maps/berlin.jpg`, `maps/old/rome.jpg` (each of its own size), and what must never be
    /// served: a hidden folder's image, and links to folders (one outside the folder, one inside).
    static func folder() throws -> (path: String, sizes: [String: (Int, Int)]) {
        let sizes = ["top": (64, 48), "maps/berlin": (80, 40), "maps/old/rome": (50, 70), ".hidden/secret": (32, 32)]
        let folder = try ServerLimitsTests.folder([:])
        for (id, (width, height)) in sizes {
            let path = "\(folder)/\(id).jpg"
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            let jpeg = try JPEGEncoder.encode(pixels: Synthetic.smooth(width: width, height: height), width: width, height: height)
            try jpeg.write(to: URL(fileURLWithPath: path))
        }
        // A store folder in a sub-folder is an image (`maps/shelf`); its files are never images of their
        // own, nor is a folder in it.
        var options = BuildOptions()
        options.storage = .persistent(path: "\(folder)/maps/shelf.tiles")
        let shelf = try JPEGEncoder.encode(pixels: Synthetic.smooth(width: 40, height: 60), width: 40, height: 60)
        _ = try TileBuilder.build(data: shelf, options: options)
        try FileManager.default.createDirectory(atPath: "\(folder)/maps/shelf.tiles/inner", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: "\(folder)/top.jpg", toPath: "\(folder)/maps/shelf.tiles/page.jpg")
        try FileManager.default.copyItem(atPath: "\(folder)/top.jpg", toPath: "\(folder)/maps/shelf.tiles/inner/page.jpg")
        try FileManager.default.createSymbolicLink(atPath: "\(folder)/outside", withDestinationPath: "/usr/share")
        try FileManager.default.createSymbolicLink(atPath: "\(folder)/inner", withDestinationPath: "\(folder)/maps/old")
        return (folder, sizes.filter { !$0.key.hasPrefix(".") }.merging(["maps/shelf": (40, 60)]) { $1 })
    }

    @Test("each folder a collection of its sub-folders' collections and its images' manifests; every id resolves to its image")
    func nested() async throws {
        let (folder, sizes) = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await TileServerTests.withServer(folder) { base, client in
            let iiif = "\(base)/iiif/3"
            func document(_ url: String) async throws -> [String: Any] {
                let reply = try await SourceVersionTests.get(client, url)
                #expect(reply.status == 200, "\(url)")
                return try #require(try JSONSerialization.jsonObject(with: reply.body) as? [String: Any], "\(url)")
            }
            func items(_ url: String) async throws -> [String] {
                let collection = try await document(url)
                #expect(collection["id"] as? String == url && collection["type"] as? String == "Collection")
                let items = try #require(collection["items"] as? [[String: Any]])
                #expect(items.allSatisfy { PresentationTests.isLanguageMap($0["label"]) })
                return items.map { "\($0["type"] as? String ?? "?") \($0["id"] as? String ?? "?")" }
            }
            #expect(try await items("\(iiif)/collection") == ["Collection \(iiif)/maps/collection", "Manifest \(iiif)/top/manifest"])
            #expect(
                try await items("\(iiif)/maps/collection") == [
                    "Collection \(iiif)/maps%2Fold/collection", "Manifest \(iiif)/maps%2Fberlin/manifest",
                    "Manifest \(iiif)/maps%2Fshelf/manifest"
                ])
            #expect(try await items("\(iiif)/maps%2Fold/collection") == ["Manifest \(iiif)/maps%2Fold%2Frome/manifest"])
            // Every image: its manifest, its service's info.json naming the same service, its full image.
            for (id, (width, height)) in sizes {
                let segment = id.replacingOccurrences(of: "/", with: "%2F")
                let manifest = try await document("\(iiif)/\(segment)/manifest")
                #expect(manifest["id"] as? String == "\(iiif)/\(segment)/manifest")
                #expect(manifest["label"] as? [String: [String]] == ["none": [String(id.split(separator: "/").last!)]])
                let canvas = try #require((manifest["items"] as? [[String: Any]])?.first)
                #expect(canvas["width"] as? Int == width && canvas["height"] as? Int == height, "\(id)")
                let page = try #require((canvas["items"] as? [[String: Any]])?.first?["items"] as? [[String: Any]])
                let body = try #require(page.first?["body"] as? [String: Any])
                let service = try #require((body["service"] as? [[String: Any]])?.first?["id"] as? String)
                #expect(service == "\(iiif)/\(segment)")
                #expect(try await document("\(service)/info.json")["id"] as? String == service)
                let image = try await SourceVersionTests.get(client, try #require(body["id"] as? String))
                let decoded = try Reference.decode(image.body).image
                #expect(image.status == 200 && decoded.width == width && decoded.height == height, "\(id)")
            }
            // 2.1: the same tree, in `collections` and `manifests`.
            let old = try await document("\(base)/iiif/2/maps/collection")
            #expect((old["collections"] as? [[String: Any]])?.map { $0["@id"] as? String } == ["\(base)/iiif/2/maps%2Fold/collection"])
            #expect(
                (old["manifests"] as? [[String: Any]])?.map { $0["@id"] as? String } == [
                    "\(base)/iiif/2/maps%2Fberlin/manifest", "\(base)/iiif/2/maps%2Fshelf/manifest"
                ])
            // Never served: a hidden folder, links to folders (the catalogue follows none by default), a
            // way up, a folder that is not there, an image asked for as a folder.
            for path in [
                ".hidden/collection", ".hidden%2Fsecret/info.json", "outside/collection", "inner%2Frome/info.json", "maps%2F..%2Ftop/info.json",
                "maps%2F%2Fberlin/info.json", "nothing/collection", "top/collection", "maps%2Fshelf.tiles%2Fpage/info.json",
                "maps%2Fshelf.tiles%2Finner%2Fpage/info.json", "maps%2Fshelf.tiles/collection", "maps%2Fshelf.tiles%2Finner/collection"
            ] {
                #expect(try await TileServerTests.get(client, "\(iiif)/\(path)").status / 100 == 4, "\(path)")
            }
            // The cache is flat: a sub-folder's image's store is named with `%2F`.
            let cache = try FileManager.default.contentsOfDirectory(atPath: "\(folder)/.cache")
            #expect(cache.contains("maps%2Fold%2Frome.tiles"), "\(cache)")
        }
    }

    @Test("a folder's collection in pages when its sub-folders and images pass the page size")
    func paged() async throws {
        let (folder, _) = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var server = try TileServer(root: folder, cache: "\(folder)/.cache", storeFormat: .raw)
        server.routes.collectionPageSize = 2
        try await TileServerTests.withServer(server) { base, client in
            let top = try await TileServerTests.get(client, "\(base)/iiif/3/maps/collection")
            let pages = try #require((try JSONSerialization.jsonObject(with: top.body) as? [String: Any])?["items"] as? [[String: Any]])
            #expect(pages.map { $0["id"] as? String } == ["\(base)/iiif/3/maps/collection?page=1", "\(base)/iiif/3/maps/collection?page=2"])
            #expect(pages.map { $0["label"] as? [String: [String]] } == [["none": ["items 1-2"]], ["none": ["items 3-3"]]])
            var listed: [String?] = []
            for page in pages {
                let reply = try await TileServerTests.get(client, try #require(page["id"] as? String))
                let items = (try JSONSerialization.jsonObject(with: reply.body) as? [String: Any])?["items"] as? [[String: Any]] ?? []
                listed += items.map { $0["id"] as? String }
            }
            #expect(
                listed == [
                    "\(base)/iiif/3/maps%2Fold/collection", "\(base)/iiif/3/maps%2Fberlin/manifest", "\(base)/iiif/3/maps%2Fshelf/manifest"
                ])
        }
    }

    @Test("following links: to folders inside the folder, never to hidden ones or into a store folder")
    func followedLinks() async throws {
        let (folder, _) = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try FileManager.default.createSymbolicLink(atPath: "\(folder)/secrets", withDestinationPath: "\(folder)/.hidden")
        try FileManager.default.createSymbolicLink(atPath: "\(folder)/shelf", withDestinationPath: "\(folder)/maps/shelf.tiles")
        try FileManager.default.createSymbolicLink(atPath: "\(folder)/page.jpg", withDestinationPath: "\(folder)/maps/shelf.tiles/page.jpg")
        let server = try TileServer(root: folder, cache: "\(folder)/.cache", followsSymlinks: true, storeFormat: .raw)
        try await TileServerTests.withServer(server) { base, client in
            let iiif = "\(base)/iiif/3"
            let top = try await TileServerTests.get(client, "\(iiif)/collection")
            let items = (try JSONSerialization.jsonObject(with: top.body) as? [String: Any])?["items"] as? [[String: Any]] ?? []
            // `inner` (a link to maps/old) is a folder; `outside`, `secrets` and `shelf` are not listed. (The
            // link `page.jpg` is, as every name of an image's is: a listing does not open what it lists.)
            #expect(
                items.map { $0["id"] as? String } == [
                    "\(iiif)/inner/collection", "\(iiif)/maps/collection", "\(iiif)/page/manifest", "\(iiif)/top/manifest"
                ], "\(items)")
            #expect(try await TileServerTests.get(client, "\(iiif)/inner%2Frome/info.json").status == 200)
            for path in ["secrets/collection", "secrets%2Fsecret/info.json", "shelf%2Fpage/info.json", "page/info.json", "outside/collection"] {
                #expect(try await TileServerTests.get(client, "\(iiif)/\(path)").status / 100 == 4, "\(path)")
            }
        }
    }
}
