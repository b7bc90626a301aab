import Foundation
import Testing
import TestTraits
import TileCore

/// `PyramidLayout` against DeepZoom's and IIIF's definitions written out plainly here.
@Suite("Pyramid layout", .ownThreads)
struct PyramidLayoutTests {
    @Test(
        "every DeepZoom tile is the tile its IIIF request names, for every level and tile; none past the grid",
        arguments: [(1500, 1100), (1, 1), (256, 256), (257, 3), (1300, 900)])
    func deepZoomAndIIIF(width: Int, height: Int) throws {
        let layout = try PyramidLayout(width: width, height: height)
        // DeepZoom's levels from its definition: level n is the image halved (rounding up) top - n times,
        // where level top is full size and level 0 is 1x1; 256-pixel tiles, overlap 0.
        var top = 0
        while (width - 1) >> top > 0 || (height - 1) >> top > 0 { top += 1 }
        #expect(layout.deepZoomTopLevel == top && layout.levelCount == top + 1)
        for n in 0...top {
            let k = top - n
            let (lw, lh) = ((width + (1 << k) - 1) >> k, (height + (1 << k) - 1) >> k)
            #expect(layout.size(ofLevel: k) == (lw, lh))
            let (columns, rows) = ((lw + 255) / 256, (lh + 255) / 256)
            for row in 0...rows {
                for column in 0...columns {
                    let address = DeepZoomTileAddress(level: n, column: column, row: row)
                    let found = layout.tile(address)
                    guard column < columns, row < rows else {
                        #expect(found == nil, "level \(n) tile \(column),\(row) is past the grid")
                        continue
                    }
                    // The IIIF request a viewer writes for this tile, from the IIIF specification's tile formula.
                    let (x, y) = (column * 256 << k, row * 256 << k)
                    let path =
                        "\(x),\(y),\(min(256 << k, width - x)),\(min(256 << k, height - y))/\(min(256, lw - column * 256)),\(min(256, lh - row * 256))/0/default.jpg"
                    let tile = try #require(found)
                    #expect(layout.iiifRequest(of: tile).path == path)
                    let resolved = try ImageRequest(path: path).resolve(width: width, height: height)
                    #expect(layout.tile(exactly: resolved) == tile, "\(path)")
                    #expect(layout.deepZoomAddress(of: tile) == address)
                    #expect(DeepZoomTileAddress(path: "\(n)/\(column)_\(row).jpg") == address)
                }
            }
        }
        #expect(layout.tile(DeepZoomTileAddress(level: -1, column: 0, row: 0)) == nil)
        #expect(layout.tile(DeepZoomTileAddress(level: top + 1, column: 0, row: 0)) == nil)
        #expect(layout.tile(DeepZoomTileAddress(level: Int.max, column: Int.max, row: Int.min)) == nil)
    }

    @Test(
        "DeepZoom paths parse only as DeepZoom writes them",
        arguments: [
            ("11/5_3.jpg", true), ("0/0_0.png", true), ("11/5_3.gif", false), ("-1/0_0.jpg", false), ("1/+1_0.jpg", false),
            ("1/0_0_0.jpg", false), ("1/0_0", false), ("9223372036854775807/0_0.jpg", false), ("1/36028797018963968_0.jpg", false),
            ("1/ 1_0.jpg", false), ("1/0_0.jpg/x", false), ("", false), ("1/_0.jpg", false)
        ])
    func deepZoomPaths(path: String, parses: Bool) {
        let address = DeepZoomTileAddress(path: path)
        #expect((address != nil) == parses, "\(path)")
        if let address { #expect(address.path == path) }
    }

    @Test("a region or size off a tile's is no tile; turned, mirrored or gray neither")
    func notTiles() throws {
        let layout = try PyramidLayout(width: 1300, height: 900)
        for path in [
            "0,0,256,256/128,128/0/default.jpg", "1,0,256,256/256,256/0/default.jpg", "0,0,256,256/256,256/90/default.jpg",
            "0,0,256,256/256,256/!0/default.jpg", "0,0,256,256/256,256/0/gray.jpg", "full/max/0/default.jpg"
        ] {
            #expect(layout.tile(exactly: try ImageRequest(path: path).resolve(width: 1300, height: 900)) == nil, "\(path)")
        }
        // The whole image at the first level that fits one tile (163x113) is that level's only tile.
        #expect(
            layout.tile(exactly: try ImageRequest(path: "full/163,113/0/default.jpg").resolve(width: 1300, height: 900))
                == PyramidLayout.Tile(level: 3, column: 0, row: 0))
    }

    @Test("info.json and .dzi carry the IIIF and DeepZoom fields as the specifications name them")
    func documents() throws {
        let layout = try PyramidLayout(width: 1300, height: 900)
        let info = layout.iiifInformation(id: "https://example.org/iiif/3/a", limits: .default)
        let json = try JSONSerialization.jsonObject(with: info.encoded()) as! [String: Any]
        #expect(json["@context"] as? String == "http://iiif.io/api/image/3/context.json")
        #expect(json["id"] as? String == "https://example.org/iiif/3/a" && json["type"] as? String == "ImageService3")
        #expect(json["protocol"] as? String == "http://iiif.io/api/image" && json["profile"] as? String == "level2")
        #expect(json["width"] as? Int == 1300 && json["height"] as? Int == 900 && json["maxArea"] as? Int == 1 << 24)
        let tiles = json["tiles"] as! [[String: Any]]
        #expect(tiles.count == 1 && tiles[0]["width"] as? Int == 256 && tiles[0]["scaleFactors"] as? [Int] == [1, 2, 4, 8])
        let sizes = (json["sizes"] as! [[String: Int]]).map { [$0["width"]!, $0["height"]!] }
        #expect(sizes == [[1, 1], [2, 1], [3, 2], [6, 4], [11, 8], [21, 15], [41, 29], [82, 57], [163, 113]])
        let dzi = layout.deepZoomDescriptor()
        #expect(dzi.xml.contains("<Image xmlns=\"http://schemas.microsoft.com/deepzoom/2008\" Format=\"jpg\" Overlap=\"0\" TileSize=\"256\">"))
        #expect(dzi.xml.contains("<Size Height=\"900\" Width=\"1300\"/>"))
        let decoded = try JSONDecoder().decode(DeepZoomDescriptor.self, from: try JSONEncoder().encode(dzi))
        #expect(decoded == dzi)
        let object = try JSONSerialization.jsonObject(with: try JSONEncoder().encode(dzi)) as! [String: [String: Any]]
        #expect(object["Image"]?["TileSize"] as? String == "256" && (object["Image"]?["Size"] as? [String: String])?["Width"] == "1300")
    }
}
