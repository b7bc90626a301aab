import AsyncHTTPClient
import Foundation
import Testing
import TestSupport
import TileCore
@testable import TileServer

/// IIIF Presentation manifests served beside the image services (issue 40, point 1), checked against
/// the requirements the specifications state, written out here: Presentation 3.0 sections 2-3 and 5
/// (a `Manifest` with `@context`, `id`, `type`, a `label` that is a language map and `items` of
/// `Canvas`es; a canvas's `width` and `height` together; `AnnotationPage`s of `Annotation`s whose
/// motivation is `painting` and whose `target` is the canvas; content resources with `id` and
/// `type`; services with `id`, `type` and `profile`) and 2.1 (`sc:Manifest`, `sc:Sequence`,
/// `sc:Canvas`, `oa:Annotation` with `sc:painting` `on` the canvas). Every URI the manifest gives for
/// a resource or a service is fetched from the server: the manifest at its `id`, each service's
/// info.json naming the same service, each image decoded by libjpeg at the stated size.
@Suite("IIIF Presentation manifests", .serialized)
struct PresentationTests {
    /// Whether `value` is a language map (3.0, 3.3.1): an object of language tags (or `none`) to
    /// non-empty arrays of strings.
    static func isLanguageMap(_ value: Any?) -> Bool {
        guard let map = value as? [String: Any], !map.isEmpty else { return false }
        return map.values.allSatisfy { ($0 as? [String])?.isEmpty == false }
    }

    static func isHTTP(_ value: Any?) -> Bool {
        guard let text = value as? String, let url = URL(string: text) else { return false }
        return url.scheme == "http" || url.scheme == "https"
    }

    @Test("Presentation 3.0: the required properties and types, language maps, one painted canvas; every id resolves on the server")
    func version3() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await TileServerTests.withServer(folder) { base, client in
            let url = "\(base)/iiif/3/photo/manifest"
            let reply = try await SourceVersionTests.get(client, url)
            #expect(reply.status == 200 && reply.headers["content-type"] == "application/json")
            let manifest = try #require(try JSONSerialization.jsonObject(with: reply.body) as? [String: Any])
            #expect(manifest["@context"] as? String == "http://iiif.io/api/presentation/3/context.json")
            #expect(manifest["id"] as? String == url && manifest["type"] as? String == "Manifest")
            #expect(Self.isLanguageMap(manifest["label"]), "label: \(String(describing: manifest["label"]))")
            let canvases = try #require(manifest["items"] as? [[String: Any]])
            #expect(canvases.count == 1)
            var ids: [String] = [url]
            var resources: [(id: String, width: Int, height: Int, service: String)] = []
            func resource(_ value: Any?, _ what: String) {
                guard let image = value as? [String: Any], Self.isHTTP(image["id"]), let id = image["id"] as? String else {
                    Issue.record("\(what) has no HTTP(S) id: \(String(describing: value))")
                    return
                }
                #expect(image["type"] as? String == "Image" && image["format"] as? String == "image/jpeg", "\(what)")
                let services = image["service"] as? [[String: Any]] ?? []
                #expect(services.count == 1, "\(what) has one service")
                for service in services {
                    #expect(Self.isHTTP(service["id"]) && service["type"] as? String == "ImageService3", "\(what)'s service")
                    #expect(service["profile"] as? String == "level2", "\(what)'s service profile")
                }
                resources.append((id, image["width"] as? Int ?? -1, image["height"] as? Int ?? -1, services.first?["id"] as? String ?? ""))
            }
            for thumbnail in manifest["thumbnail"] as? [Any] ?? [] { resource(thumbnail, "the manifest's thumbnail") }
            for canvas in canvases {
                let canvasID = try #require(canvas["id"] as? String)
                ids.append(canvasID)
                #expect(Self.isHTTP(canvasID) && canvas["type"] as? String == "Canvas")
                #expect(canvas["width"] as? Int == 1300 && canvas["height"] as? Int == 900)
                #expect(Self.isLanguageMap(canvas["label"]))
                for thumbnail in canvas["thumbnail"] as? [Any] ?? [] { resource(thumbnail, "a canvas's thumbnail") }
                let pages = try #require(canvas["items"] as? [[String: Any]])
                #expect(pages.count == 1)
                for page in pages {
                    ids.append(page["id"] as? String ?? "")
                    #expect(Self.isHTTP(page["id"]) && page["type"] as? String == "AnnotationPage")
                    let annotations = try #require(page["items"] as? [[String: Any]])
                    #expect(annotations.count == 1)
                    for annotation in annotations {
                        ids.append(annotation["id"] as? String ?? "")
                        #expect(Self.isHTTP(annotation["id"]) && annotation["type"] as? String == "Annotation")
                        #expect(annotation["motivation"] as? String == "painting" && annotation["target"] as? String == canvasID)
                        resource(annotation["body"], "the painting annotation's body")
                    }
                }
            }
            #expect(Set(ids).count == ids.count, "ids are unique: \(ids)")
            #expect(resources.count == 3, "the manifest's thumbnail, the canvas's, the body")
            // Every resource and its service, fetched: the image at the size it states; info.json naming
            // the service it was reached by, of the canvas's size.
            for resource in resources {
                let image = try await SourceVersionTests.get(client, resource.id)
                #expect(image.status == 200 && image.headers["content-type"] == "image/jpeg", "\(resource.id)")
                let decoded = try Reference.decode(image.body).image
                #expect(decoded.width == resource.width && decoded.height == resource.height, "\(resource.id)")
                let info = try await SourceVersionTests.get(client, "\(resource.service)/info.json")
                let document = try #require(try JSONSerialization.jsonObject(with: info.body) as? [String: Any])
                #expect(document["id"] as? String == resource.service && document["width"] as? Int == 1300 && document["height"] as? Int == 900)
            }
            // The thumbnail is small: at most 256 a side (163x113, a level of the pyramid).
            #expect(resources.first.map { ($0.width, $0.height) } ?? (0, 0) == (163, 113))

            // Cached as info.json is: an entity tag, 304 for it, JSON-LD with the Presentation profile when asked.
            let tag = try #require(reply.headers["etag"])
            #expect(reply.headers["cache-control"]?.contains("max-age") == true)
            #expect(try await TileServerTests.get(client, url, headers: [("If-None-Match", tag)]).status == 304)
            let linked = try await SourceVersionTests.get(client, url, headers: [("Accept", "application/ld+json")])
            #expect(linked.headers["content-type"] == "application/ld+json;profile=\"http://iiif.io/api/presentation/3/context.json\"")
            #expect(linked.body == reply.body)
        }
    }

    @Test("Presentation 2.1: sc:Manifest, a sequence of one sc:Canvas painted by an Image API 2 service that resolves")
    func version2() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await TileServerTests.withServer(folder) { base, client in
            let url = "\(base)/iiif/2/photo/manifest"
            let reply = try await SourceVersionTests.get(client, url)
            #expect(reply.status == 200)
            let manifest = try #require(try JSONSerialization.jsonObject(with: reply.body) as? [String: Any])
            #expect(manifest["@context"] as? String == "http://iiif.io/api/presentation/2/context.json")
            #expect(manifest["@id"] as? String == url && manifest["@type"] as? String == "sc:Manifest")
            #expect((manifest["label"] as? String)?.isEmpty == false)
            let sequences = try #require(manifest["sequences"] as? [[String: Any]])
            #expect(sequences.count == 1 && sequences.first?["@type"] as? String == "sc:Sequence")
            let canvases = try #require(sequences.first?["canvases"] as? [[String: Any]])
            let canvas = try #require(canvases.first)
            #expect(canvases.count == 1 && canvas["@type"] as? String == "sc:Canvas" && Self.isHTTP(canvas["@id"]))
            #expect(canvas["width"] as? Int == 1300 && canvas["height"] as? Int == 900 && (canvas["label"] as? String)?.isEmpty == false)
            let images = try #require(canvas["images"] as? [[String: Any]])
            let annotation = try #require(images.first)
            #expect(annotation["@type"] as? String == "oa:Annotation" && annotation["motivation"] as? String == "sc:painting")
            #expect(annotation["on"] as? String == canvas["@id"] as? String)
            let resource = try #require(annotation["resource"] as? [String: Any])
            #expect(resource["@type"] as? String == "dctypes:Image" && resource["format"] as? String == "image/jpeg")
            let service = try #require(resource["service"] as? [String: Any])
            #expect(service["@context"] as? String == "http://iiif.io/api/image/2/context.json")
            #expect(service["profile"] as? String == "http://iiif.io/api/image/2/level2.json")
            let serviceID = try #require(service["@id"] as? String)
            let info = try await SourceVersionTests.get(client, "\(serviceID)/info.json")
            let document = try #require(try JSONSerialization.jsonObject(with: info.body) as? [String: Any])
            #expect(document["@id"] as? String == serviceID && document["@context"] as? String == "http://iiif.io/api/image/2/context.json")
            let image = try await SourceVersionTests.get(client, try #require(resource["@id"] as? String))
            let decoded = try Reference.decode(image.body).image
            #expect(image.status == 200 && decoded.width == 1300 && decoded.height == 900)
        }
    }

    @Test("manifests of images that are not there: 404; of an identifier that cannot be one: 400")
    func refusals() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await TileServerTests.withServer(folder) { base, client in
            for (path, status) in [("iiif/3/nothing/manifest", 404), ("iiif/2/nothing/manifest", 404), ("iiif/3/..%2Fphoto/manifest", 400)] {
                let reply = try await TileServerTests.get(client, "\(base)/\(path)")
                #expect(reply.status == status, "\(path)")
            }
        }
    }

    /// The folder's images as a collection (3.0, 5.1 and 5.3: a `Collection` whose `items` reference
    /// `Manifest`s and `Collection`s by `id`, `type` and `label`). Past the page size it lists its pages,
    /// each a collection of the images in name order; every manifest it names is served at that id.
    @Test("collections: the folder's manifests in name order, in pages past the page size; 2.1 the same; no image built")
    func collections() async throws {
        let jpeg = try JPEGEncoder.encode(pixels: Synthetic.smooth(width: 64, height: 48), width: 64, height: 48)
        let names = (0..<5).map { String(format: "img%02d", $0) }
        let folder = try ServerLimitsTests.folder(Dictionary(uniqueKeysWithValues: names.map { ("\($0).jpg", jpeg) }))
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var server = try TileServer(root: folder, cache: "\(folder)/.cache", storeFormat: .raw)
        server.routes.collectionPageSize = 2
        try await TileServerTests.withServer(server) { base, client in
            func document(_ url: String) async throws -> [String: Any] {
                let reply = try await TileServerTests.get(client, url)
                #expect(reply.status == 200, "\(url)")
                return try #require(try JSONSerialization.jsonObject(with: reply.body) as? [String: Any], "\(url)")
            }
            let top = try await document("\(base)/iiif/3/collection")
            #expect(top["@context"] as? String == "http://iiif.io/api/presentation/3/context.json")
            #expect(top["id"] as? String == "\(base)/iiif/3/collection" && top["type"] as? String == "Collection")
            #expect(Self.isLanguageMap(top["label"]))
            let pages = try #require(top["items"] as? [[String: Any]])
            #expect(pages.map { $0["type"] as? String } == ["Collection", "Collection", "Collection"])
            #expect(pages.allSatisfy { Self.isLanguageMap($0["label"]) })
            var listed: [String] = []
            for page in pages {
                let id = try #require(page["id"] as? String)
                let collection = try await document(id)
                #expect(collection["id"] as? String == id && collection["type"] as? String == "Collection")
                for item in collection["items"] as? [[String: Any]] ?? [] {
                    #expect(item["type"] as? String == "Manifest" && Self.isLanguageMap(item["label"]))
                    listed.append(try #require(item["id"] as? String))
                }
            }
            #expect(listed == names.map { "\(base)/iiif/3/\($0)/manifest" })
            // Listing builds nothing (a manifest, as info.json, starts its image's build).
            let cache = (try? FileManager.default.contentsOfDirectory(atPath: "\(folder)/.cache")) ?? []
            #expect(cache.filter { $0.hasSuffix(".tiles") }.isEmpty, "\(cache)")
            for manifestID in listed {
                let manifest = try await document(manifestID)
                #expect(manifest["id"] as? String == manifestID && manifest["type"] as? String == "Manifest")
            }
            for page in ["4", "0", "x"] {
                #expect(try await TileServerTests.get(client, "\(base)/iiif/3/collection?page=\(page)").status == 404, "page \(page)")
            }
            let version2 = try await document("\(base)/iiif/2/collection?page=3")
            #expect(version2["@type"] as? String == "sc:Collection" && version2["@id"] as? String == "\(base)/iiif/2/collection?page=3")
            let manifests = try #require(version2["manifests"] as? [[String: Any]])
            #expect(manifests.map { $0["@id"] as? String } == ["\(base)/iiif/2/img04/manifest"])
            #expect(manifests.first?["@type"] as? String == "sc:Manifest")
        }
    }

    /// Three pages of different sizes and pictures, each a PPM written here, made a three-page TIFF by
    /// netpbm's `pnmtotiff` and libtiff's `tiffcp`: the folder's `book.tif`.
    static func book(in folder: String) throws -> [RGBAImage] {
        var pages: [RGBAImage] = []
        var tiffs: [String] = []
        for (n, (width, height)) in [(600, 400), (500, 700), (640, 480)].enumerated() {
            var pixels = Synthetic.smooth(width: width, height: height)
            for i in stride(from: n, to: pixels.count, by: 4) { pixels[i] = 255 - pixels[i] }  // each page its own
            let page = RGBAImage(width: width, height: height, pixels: pixels)
            var ppm = Data("P6\n\(width) \(height)\n255\n".utf8)
            for i in stride(from: 0, to: pixels.count, by: 4) { ppm += pixels[i..<(i + 3)] }
            let run = try Tools.run("pnmtotiff", ["-truecolor", "-lzw", try Self.write(ppm, "\(folder)/page\(n).ppm")])
            try #require(run.status == 0, "pnmtotiff: \(run.stderr)")
            tiffs.append(try Self.write(run.stdout, "\(folder)/page\(n).tiff.part"))
            pages.append(page)
        }
        let joined = try Tools.run("tiffcp", tiffs + ["\(folder)/book.tif"])
        try #require(joined.status == 0, "tiffcp: \(joined.stderr)")
        for n in 0..<3 {
            try FileManager.default.removeItem(atPath: "\(folder)/page\(n).ppm")
            try FileManager.default.removeItem(atPath: "\(folder)/page\(n).tiff.part")
        }
        return pages
    }

    static func write(_ data: Data, _ path: String) throws -> String {
        try data.write(to: URL(fileURLWithPath: path))
        return path
    }

    /// A multi-page TIFF master (issue 40, point 3): its manifest is a canvas a page, in order, each
    /// painted by the page's own service (`book`, `book~2`, `book~3`), each page its own pixels;
    /// page identifiers that name no page are 404, those not written canonically 400; the collection
    /// lists the book once. The book's manifest is read from its directories: it starts no build of
    /// page 1 (a viewer of page 2 asks for it), and its entity tag is the same once page 1 is built.
    @Test(
        "a three-page TIFF: three canvases, each page its identifier's image, pixel for pixel",
        .enabled(if: Tools.have("pnmtotiff", "tiffcp"), Comment(rawValue: Tools.missing("pnmtotiff", "tiffcp"))))
    func multiPage() async throws {
        let folder = try ServerLimitsTests.folder([:])
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let pages = try Self.book(in: folder)
        try await TileServerTests.withServer(folder) { base, client in
            let reply = try await SourceVersionTests.get(client, "\(base)/iiif/3/book/manifest")
            let manifest = try #require(try JSONSerialization.jsonObject(with: reply.body) as? [String: Any])
            let canvases = try #require(manifest["items"] as? [[String: Any]])
            #expect(canvases.count == 3)
            let untouched = try await TileServerTests.get(client, "\(base)/images/book")
            let state = (try? JSONSerialization.jsonObject(with: untouched.body) as? [String: Any])?["state"] as? String
            #expect(untouched.status == 200 && state == "not built", "page 1 after its book's manifest: \(state ?? "?")")
            for (n, canvas) in canvases.enumerated() where n < pages.count {
                #expect(canvas["width"] as? Int == pages[n].width && canvas["height"] as? Int == pages[n].height, "page \(n + 1)")
                let body = try #require(
                    ((canvas["items"] as? [[String: Any]])?.first?["items"] as? [[String: Any]])?.first?["body"] as? [String: Any])
                let service = try #require((body["service"] as? [[String: Any]])?.first?["id"] as? String)
                #expect(service == "\(base)/iiif/3/" + (n == 0 ? "book" : "book~\(n + 1)"))
                let whole = try await TileServerTests.settled(client, "\(service)/full/max/0/default.png")
                #expect(whole.status == 200 && (try? Reference.decodePNG(whole.body)) == pages[n], "page \(n + 1)'s pixels")
            }
            let again = try await SourceVersionTests.get(client, "\(base)/iiif/3/book/manifest")
            #expect(reply.headers["etag"] != nil && again.headers["etag"] == reply.headers["etag"] && again.body == reply.body)
            for (id, status) in [("book~4", 404), ("book~1", 400), ("book~02", 400), ("book~+2", 400), ("nothing~2", 404)] {
                let info = try await TileServerTests.get(client, "\(base)/iiif/3/\(id)/info.json")
                #expect(info.status == status, "\(id)")
            }
            let collection = try await TileServerTests.get(client, "\(base)/iiif/3/collection")
            let items = try #require(try JSONSerialization.jsonObject(with: collection.body) as? [String: Any])["items"] as? [[String: Any]]
            #expect(items?.map { $0["id"] as? String } == ["\(base)/iiif/3/book/manifest"])
        }
    }

    /// `jpeg` with an EXIF APP1 segment after its SOI holding IFD0's ASCII tags `tags` (tag number,
    /// text), laid out as EXIF 2.3 section 4.5 and TIFF 6.0 section 2 say (little-endian, entries in tag
    /// order, each value past four bytes at an offset from the TIFF header).
    static func withEXIF(_ jpeg: Data, _ tags: [(UInt16, String)]) -> Data {
        func le16(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF)] }
        func le32(_ v: Int) -> [UInt8] { le16(v & 0xFFFF) + le16(v >> 16) }
        let sorted = tags.sorted { $0.0 < $1.0 }
        var tiff: [UInt8] = [0x49, 0x49, 0x2A, 0x00] + le32(8) + le16(sorted.count)
        var values: [UInt8] = []
        let valuesStart = 8 + 2 + sorted.count * 12 + 4
        for (tag, text) in sorted {
            let bytes = Array(text.utf8) + [0]
            tiff += le16(Int(tag)) + le16(2) + le32(bytes.count)
            if bytes.count <= 4 {
                tiff += bytes + [UInt8](repeating: 0, count: 4 - bytes.count)
            } else {
                tiff += le32(valuesStart + values.count)
                values += bytes
            }
        }
        tiff += le32(0) + values
        let payload = Array("Exif".utf8) + [0, 0] + tiff
        return jpeg.prefix(2) + Data([0xFF, 0xE1] + [UInt8((payload.count + 2) >> 8), UInt8((payload.count + 2) & 0xFF)] + payload)
            + jpeg.dropFirst(2)
    }

    /// A JPEG's EXIF description, artist, date and copyright become the manifest's metadata pairs (3.0:
    /// language maps; 2.1: strings); a JPEG without them has none.
    @Test("EXIF description, creator, date and copyright as the manifest's metadata")
    func exifMetadata() async throws {
        let jpeg = try JPEGEncoder.encode(pixels: Synthetic.smooth(width: 64, height: 48), width: 64, height: 48)
        let tags: [(UInt16, String)] = [
            (0x010E, "A harbour at dawn"), (0x013B, "Ana Lima"), (0x0132, "2024:05:01 06:12:00"), (0x8298, "CC BY 4.0, Ana Lima")
        ]
        let folder = try ServerLimitsTests.folder(["described.jpg": Self.withEXIF(jpeg, tags), "plain.jpg": jpeg])
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await TileServerTests.withServer(folder) { base, client in
            let v3 = try await SourceVersionTests.get(client, "\(base)/iiif/3/described/manifest")
            let manifest = try #require(try JSONSerialization.jsonObject(with: v3.body) as? [String: Any])
            let pairs = try #require(manifest["metadata"] as? [[String: [String: [String]]]])
            let read = pairs.map { ($0["label"]?["en"]?.first ?? "", $0["value"]?["none"]?.first ?? "") }
            #expect(
                read.map { "\($0.0)=\($0.1)" } == [
                    "Description=A harbour at dawn", "Creator=Ana Lima", "Date=2024:05:01 06:12:00", "Copyright=CC BY 4.0, Ana Lima"
                ])
            let v2 = try await SourceVersionTests.get(client, "\(base)/iiif/2/described/manifest")
            let old = try #require(try JSONSerialization.jsonObject(with: v2.body) as? [String: Any])
            #expect((old["metadata"] as? [[String: String]])?.first == ["label": "Description", "value": "A harbour at dawn"])
            let plain = try await SourceVersionTests.get(client, "\(base)/iiif/3/plain/manifest")
            #expect(try #require(try JSONSerialization.jsonObject(with: plain.body) as? [String: Any])["metadata"] == nil)
        }
    }

    /// The rights and required statement a server is given (`--rights`, `--required-statement`) are
    /// every manifest's: 3.0 `rights` and `requiredStatement` (label and value language maps), 2.1
    /// `license` and `attribution`.
    @Test("rights and required statement from the server's settings, in 3.0 and 2.1 terms")
    func rights() async throws {
        let (folder, _) = try TileServerTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var server = try TileServer(root: folder, cache: "\(folder)/.cache", storeFormat: .raw)
        server.routes.rights = "http://creativecommons.org/licenses/by/4.0/"
        server.routes.requiredStatement = "Provided by the City Archive"
        try await TileServerTests.withServer(server) { base, client in
            let v3 = try await SourceVersionTests.get(client, "\(base)/iiif/3/photo/manifest")
            let manifest = try #require(try JSONSerialization.jsonObject(with: v3.body) as? [String: Any])
            #expect(manifest["rights"] as? String == "http://creativecommons.org/licenses/by/4.0/")
            let statement = try #require(manifest["requiredStatement"] as? [String: Any])
            #expect(Self.isLanguageMap(statement["label"]) && statement["value"] as? [String: [String]] == ["none": ["Provided by the City Archive"]])
            let v2 = try await SourceVersionTests.get(client, "\(base)/iiif/2/photo/manifest")
            let old = try #require(try JSONSerialization.jsonObject(with: v2.body) as? [String: Any])
            #expect(old["license"] as? String == "http://creativecommons.org/licenses/by/4.0/")
            #expect(old["attribution"] as? String == "Provided by the City Archive")
        }
        #expect(!IIIFManifest.isRightsURI("https://example.org/terms") && IIIFManifest.isRightsURI("http://rightsstatements.org/vocab/InC/1.0/"))
    }
}
