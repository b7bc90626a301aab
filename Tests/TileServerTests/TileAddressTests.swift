import Testing
import TestSupport
import TileCore

@testable import TileServer

/// What ``TileAddress`` reads of an image request's path in its one pass over the bytes, against what
/// each path names by the grammar (written out by hand in the table).
@Suite("Tile addresses")
struct TileAddressTests {
    /// A path, and the identifier and request it names (nil: no image).
    struct Case: Sendable, CustomTestStringConvertible {
        let path: String
        let id: String?
        let tile: DeepZoomTileAddress?
        let iiif: (IIIFVersion, String)?
        var testDescription: String { path }

        static func tile(_ path: String, _ id: String, _ level: Int, _ column: Int, _ row: Int, _ format: ImageRequest.Format = .jpg) -> Case {
            Case(path: path, id: id, tile: DeepZoomTileAddress(level: level, column: column, row: row, format: format), iiif: nil)
        }
        static func iiif(_ path: String, _ id: String, _ version: IIIFVersion, _ parameters: String) -> Case {
            Case(path: path, id: id, tile: nil, iiif: (version, parameters))
        }
        static func nothing(_ path: String) -> Case { Case(path: path, id: nil, tile: nil, iiif: nil) }
    }

    static let cases: [Case] = [
        .tile("/dzi/photo_files/13/3_4.jpg", "photo", 13, 3, 4),
        .tile("//dzi//a%20b_files//2//0_1.png/", "a%20b", 2, 0, 1, .png),
        .tile("/dzi/x_files_files/0/0_0.jpg", "x_files", 0, 0, 0),
        .tile("/dzi/caf\u{E9}_files/1/0_0.jpg", "caf\u{E9}", 1, 0, 0),
        .iiif("/iiif/3/book~2/0,0,256,256/256,/0/default.jpg", "book~2", .v3, "0,0,256,256/256,/0/default.jpg"),
        .iiif("/iiif/2/p/full/max/90/gray.png", "p", .v2, "full/max/90/gray.png"),
        .iiif("/iiif//3//p//full/max/0/default.jpg", "p", .v3, "full/max/0/default.jpg"),
        .nothing("/iiif/3/p/full/max/0"),
        .nothing("/iiif/3/p/full/max/0/default.jpg/more"),
        .nothing("/iiif/4/p/full/max/0/default.jpg"),
        .nothing("/iiif/3/p/info.json"),
        .nothing("/dzi/photo_files/13/3_4.jpg/extra"),
        .nothing("/dzi/_files/1/0_0.jpg"),
        .nothing("/dzi/photo/13/3_4.jpg"),
        .nothing("/dzi/photo_files/13/3-4.jpg"),
        .nothing("/dzi/photo_files/x/3_4.jpg"),
        .nothing("/dzi/photo.dzi"),
        // A combining mark after a `/` makes one character with it: the router does not split there.
        .nothing("/dzi/a_files/\u{301}1/0_0.jpg"),
        .nothing("/images/photo"),
        .nothing("/"),
        .nothing("")
    ]

    @Test("each path names its image and request, or none", arguments: cases)
    func names(_ expected: Case) {
        let image = TileAddress(path: expected.path[...]).image
        #expect(image.map { String($0.id) } == expected.id)
        switch image?.kind {
        case .deepZoom(let tile, _, _)?:
            #expect(tile == expected.tile)
            #expect(expected.iiif == nil)
        case .iiif(let version, let parameters)?:
            #expect(version == expected.iiif?.0)
            #expect(String(parameters) == expected.iiif?.1)
            #expect(expected.tile == nil)
        case nil:
            #expect(expected.tile == nil && expected.iiif == nil)
        }
    }
}

extension TileAddressTests {
    /// What a path names by the router's reading, written plainly: its segments are `String.split`'s at
    /// `/` (characters, so a `/` that a combining mark follows is no separator), empty ones skipped, and
    /// the grammar is matched against that array with `String`'s own operations. Nil: no image; nor
    /// does a path whose segments split at every `/` byte are other ones (a combining mark after a `/`).
    static func reference(_ path: String) -> (route: ServerMetrics.Route, id: String?, tile: DeepZoomTileAddress?, iiif: (IIIFVersion, [String])?) {
        let s = path.split(separator: "/").map(String.init)
        let bytes = path.utf8.split(separator: UInt8(ascii: "/")).map { String(decoding: $0, as: UTF8.self) }
        guard let first = s.first else { return (.pages, nil, nil, nil) }
        switch first {
        case "iiif" where s.count > 1:
            if s.count <= 3 || s.last == "info.json" { return (.iiifInfo, nil, nil, nil) }
            let version: IIIFVersion? = s[1] == "3" ? .v3 : s[1] == "2" ? .v2 : nil
            guard let version, s.count == 7, s == bytes else { return (.iiifImage, nil, nil, nil) }
            return (.iiifImage, s[2], nil, (version, Array(s[3...])))
        case "dzi" where s.count > 1:
            if s.last!.hasSuffix(".dzi") && s.last! != ".dzi" { return (.dziDescriptor, nil, nil, nil) }
            guard s.count == 4, s == bytes, s[1].hasSuffix("_files"), s[1] != "_files", let tile = DeepZoomTileAddress(level: s[2], tile: s[3])
            else {
                return (.dziTile, nil, nil, nil)
            }
            return (.dziTile, String(s[1].dropLast(6)), tile, nil)
        case "images" where s.count > 1: return (.upload, nil, nil, nil)
        case "view" where s.count > 1: return (.pages, nil, nil, nil)
        case "health" where s.count == 1: return (.health, nil, nil, nil)
        case "ready" where s.count == 1: return (.ready, nil, nil, nil)
        case "metrics" where s.count == 1: return (.metrics, nil, nil, nil)
        default: return (.other, nil, nil, nil)
        }
    }

    @Test(
        "30,000 random paths (the grammar's pieces, mutated, with combining marks and stray bytes): the one pass reads what the router's segments say"
    )
    func randomPaths() {
        let pieces = [
            "iiif", "dzi", "3", "2", "4", "p", "a%20b", "x_files", "_files", "photo_files", "info.json", "full", "max", "0", "13", "90",
            "3_4.jpg", "0_0.png", "1_2.gif", "default.jpg", "gray.png", "photo.dzi", ".dzi", "images", "view", "health", "ready", "metrics",
            "caf\u{E9}", "\u{301}", "e\u{301}", "book~2", "_", ".", "-1", "99999999999999999999", "\u{212A}", "pct:10,10,50,50", "!200,200",
            "", " ", "%2F", "\u{0}", "jpg", "_files\u{301}"
        ]
        let templates = [
            ["dzi", "photo_files", "13", "3_4.jpg"], ["iiif", "3", "p", "full", "max", "0", "default.jpg"],
            ["iiif", "2", "book~2", "pct:10,10,50,50", "!200,200", "90", "gray.png"], ["dzi", "photo.dzi"], ["iiif", "3", "p", "info.json"]
        ]
        var random = SplitMix(seed: 0x7A11_ADD2)
        var images = 0
        for _ in 0..<30_000 {
            // A template with one to three pieces changed, inserted or removed, or pieces at random.
            var parts = Bool.random(using: &random) ? templates.randomElement(using: &random)! : []
            if parts.isEmpty {
                for _ in 0..<Int.random(in: 0...8, using: &random) { parts.append(pieces.randomElement(using: &random)!) }
            } else {
                for _ in 0..<Int.random(in: 0...3, using: &random) {
                    let at = Int.random(in: 0..<parts.count, using: &random)
                    switch Int.random(in: 0..<4, using: &random) {
                    case 0: parts[at] = pieces.randomElement(using: &random)!
                    case 1: parts.insert(pieces.randomElement(using: &random)!, at: at)
                    case 2 where parts.count > 1: parts.remove(at: at)
                    default: parts[at] += pieces.randomElement(using: &random)!
                    }
                }
            }
            var path = ""
            for part in parts {
                path += (Int.random(in: 0..<16, using: &random) == 0 ? ["//", "/\u{301}"] : ["/"]).randomElement(using: &random)! + part
            }
            if Int.random(in: 0..<8, using: &random) == 0 { path += "/" }
            let expected = Self.reference(path)
            let address = TileAddress(path: path[...])
            #expect(address.route == expected.route, "\(path.debugDescription)")
            let image = address.image
            #expect(image.map { String($0.id) } == expected.id, "\(path.debugDescription)")
            switch image?.kind {
            case .deepZoom(let tile, _, _)?:
                #expect(tile == expected.tile, "\(path.debugDescription)")
            case .iiif(let version, let parameters)?:
                #expect(version == expected.iiif?.0, "\(path.debugDescription)")
                #expect(parameters.split(separator: "/").map(String.init) == expected.iiif?.1, "\(path.debugDescription)")
            case nil:
                #expect(expected.id == nil, "\(path.debugDescription)")
            }
            if image != nil { images += 1 }
        }
        // The draw reaches the images' grammar, not only its refusals.
        #expect(images > 2_000, "\(images) of the paths named an image")
    }
}
