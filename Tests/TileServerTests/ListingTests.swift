import Foundation
import Testing
import TestSupport
import TileCore
@testable import TileServer

/// The listing (`GET /`) in pages: a folder of thousands of images costs one page's work a request.
@Suite("Listing pages")
struct ListingTests {
    /// Table rows of images in a listing page (the header row has no image).
    static func rows(_ html: String) -> [String] {
        html.components(separatedBy: "<tr><td><img").dropFirst().map { row in
            let link = row.components(separatedBy: "<a href=\"view/").dropFirst().first ?? ""
            return String(link.prefix { $0 != "\"" })
        }
    }

    @Test("GET / shows a page of images in name order, with links to the pages beside it; past the last 404, a bad page 400")
    func pages() async throws {
        let jpeg = try JPEGEncoder.encode(pixels: Synthetic.smooth(width: 64, height: 48), width: 64, height: 48)
        let names = (0..<25).map { String(format: "img%02d", $0) }
        let folder = try ServerLimitsTests.folder(Dictionary(uniqueKeysWithValues: names.map { ("\($0).jpg", jpeg) }))
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var server = try TileServer(root: folder, cache: "\(folder)/.cache", storeFormat: .raw)
        server.routes.listingPageSize = 10
        try await TileServerTests.withServer(server) { base, client in
            let expected: [(String, ArraySlice<String>, String, [String], [String])] = [
                ("/", names[0..<10], "items 1-10 of 25", ["?page=2\" rel=\"next\""], ["rel=\"prev\""]),
                ("/?page=2", names[10..<20], "items 11-20 of 25", ["?page=1\" rel=\"prev\"", "?page=3\" rel=\"next\""], []),
                ("/?page=3", names[20..<25], "items 21-25 of 25", ["?page=2\" rel=\"prev\""], ["rel=\"next\""])
            ]
            for (path, shown, where_, links, absent) in expected {
                let reply = try await TileServerTests.get(client, base + path)
                let html = String(decoding: reply.body, as: UTF8.self)
                #expect(reply.status == 200, "\(path)")
                #expect(Self.rows(html) == Array(shown), "\(path)")
                #expect(html.contains(where_), "\(path)")
                for link in links { #expect(html.contains("<a href=\"\(link)"), "\(path): \(link)") }
                for link in absent { #expect(!html.contains(link), "\(path): \(link)") }
            }
            #expect(try await TileServerTests.get(client, "\(base)/?page=4").status == 404)
            for bad in ["0", "-1", "two", "99999999999999999999"] {
                #expect(try await TileServerTests.get(client, "\(base)/?page=\(bad)").status == 400, "page=\(bad)")
            }
        }
        // One page when they fit: every image, and the count.
        let whole = try TileServer(root: folder, cache: "\(folder)/.cache", storeFormat: .raw)
        try await TileServerTests.withServer(whole) { base, client in
            let html = String(decoding: try await TileServerTests.get(client, "\(base)/").body, as: UTF8.self)
            #expect(Self.rows(html) == names)
            #expect(html.contains("<p>25 items</p>") && !html.contains("rel=\"next\""))
        }
    }

    /// Folder rows of a listing page: the folders each links to (`?folder=...`).
    static func folderRows(_ html: String) -> [String] {
        html.components(separatedBy: "<tr><td></td><td><a href=\"?folder=").dropFirst().map { String($0.prefix { $0 != "\"" }) }
    }

    @Test("the listing is a picker of the folder's collection: sub-folders first (links down and back up), then images, to the viewer")
    func folders() async throws {
        let (folder, _) = try FolderCollectionTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await TileServerTests.withServer(folder) { base, client in
            func page(_ path: String) async throws -> String {
                let reply = try await TileServerTests.get(client, base + path)
                #expect(reply.status == 200, "\(path)")
                return String(decoding: reply.body, as: UTF8.self)
            }
            let top = try await page("/")
            #expect(Self.folderRows(top) == ["maps"] && Self.rows(top) == ["top"], "\(top)")
            let maps = try await page("/?folder=maps")
            #expect(Self.folderRows(maps) == ["maps%2Fold"] && Self.rows(maps) == ["maps%2Fberlin", "maps%2Fshelf"], "\(maps)")
            #expect(maps.contains("<h1><a href=\"./\">Images</a> / maps</h1>"), "\(maps)")
            let old = try await page("/?folder=maps%2Fold")
            #expect(Self.rows(old) == ["maps%2Fold%2Frome"] && old.contains("<a href=\"?folder=maps\">maps</a> / old</h1>"), "\(old)")
            // Every link leads somewhere: the viewer and the thumbnail of a sub-folder's image.
            #expect(try await TileServerTests.get(client, "\(base)/view/maps%2Fold%2Frome").status == 200)
            #expect(old.contains("<img src=\"iiif/3/maps%2Fold%2Frome/full/!160,160/0/default.jpg\""))
            for bad in [".hidden", "outside", "nothing", "maps%2F..", "top"] {
                #expect(try await TileServerTests.get(client, "\(base)/?folder=\(bad)").status == 404, "\(bad)")
            }
        }
    }
}
