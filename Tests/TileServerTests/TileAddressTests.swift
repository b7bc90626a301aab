import Testing
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
