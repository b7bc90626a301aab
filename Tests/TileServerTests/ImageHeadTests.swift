import HTTPTypes
import NIOCore
import Testing
import TileCore

@testable import TileServer

/// The head the connection handler writes, against the routes' own fields; entity tags written as bytes
/// against their text; the addresses of request paths against the grammar written out by hand.
@Suite("Image heads and addresses")
struct ImageHeadTests {
    @Test("an entity tag's bytes are its text, leading zero digits left out as in the text")
    func entityTagBytes() {
        var leadingZeros = 0
        for n in 0..<2000 {
            var tag = EntityTag()
            tag.combine("key \(n)".utf8)
            var buffer = ByteBuffer()
            tag.write(into: &buffer)
            #expect(String(buffer: buffer) == tag.text)
            // The text of a 64-bit hash, written plainly: the digits of its hex form without leading zeros.
            if tag.text.count < 18 { leadingZeros += 1 }
        }
        #expect(leadingZeros > 0, "no hash with a leading zero digit was tried")
    }

    @Test(
        "the handler's head bytes carry the routes' fields, the length and the server's name",
        arguments: [false, true], ["public, max-age=86400", "public, max-age=0"])
    func sameHead(notModified: Bool, cacheControl: String) throws {
        var tag = EntityTag()
        tag.combine("a".utf8)
        let heads = [
            ImageHead(mediaType: "image/jpeg", entityTag: tag, lastModified: "Wed, 25 Nov 2026 10:00:00 GMT", cacheControl: cacheControl),
            ImageHead(
                mediaType: "image/png", link: "<http://iiif.io/api/image/3/level2.json>;rel=\"profile\"", entityTag: tag, cacheControl: cacheControl),
            ImageHead(mediaType: "image/jpeg", cacheControl: cacheControl)
        ]
        for head in heads {
            for length in [0, 9, 1_048_576] {
                var bytes = ByteBuffer()
                head.write(notModified: notModified, contentLength: length, into: &bytes)
                let text = String(buffer: bytes)
                #expect(text.hasSuffix("\r\n") && !text.hasSuffix("\r\n\r\n"), "the date line and the blank line follow")
                var lines = text.split(separator: "\r\n").map(String.init)
                #expect(lines.removeFirst() == (notModified ? "HTTP/1.1 304 Not Modified" : "HTTP/1.1 200 OK"))
                var expected = head.fields.map { "\($0.name.canonicalName): \($0.value)" }
                expected += ["Content-Length: \(length)", "Server: tiler"]
                #expect(lines.map { $0.lowercased() } == expected.map { $0.lowercased() })
                #expect(head.entityTag != nil || lines.contains("Cache-Control: no-store"), "no validator, no keeping")
            }
        }
    }

    /// What each path names, written out by hand from the grammar (``TileAddress``'s documentation):
    /// the identifier as written, the tile or IIIF parameters, and the variant that makes the entity tag.
    static let cases: [(String, (id: String, variant: String, tile: DeepZoomTileAddress?)?)] = [
        ("/dzi/photo_files/11/5_3.jpg", ("photo", "dzi/11/5_3.jpg", DeepZoomTileAddress(level: 11, column: 5, row: 3))),
        ("/dzi/photo_files/0/0_0.png", ("photo", "dzi/0/0_0.png", DeepZoomTileAddress(level: 0, column: 0, row: 0, format: .png))),
        ("/dzi/a_b_files/3/1_2.jpg", ("a_b", "dzi/3/1_2.jpg", DeepZoomTileAddress(level: 3, column: 1, row: 2))),
        ("/dzi//a_files//3/1_2.jpg", ("a", "dzi/3/1_2.jpg", DeepZoomTileAddress(level: 3, column: 1, row: 2))),
        ("/dzi/ph%20oto_files/11/5_3.jpg", ("ph%20oto", "dzi/11/5_3.jpg", DeepZoomTileAddress(level: 11, column: 5, row: 3))),
        ("/dzi/фото_files/2/0_1.jpg", ("фото", "dzi/2/0_1.jpg", DeepZoomTileAddress(level: 2, column: 0, row: 1))),
        ("/dzi/photo_files/11/5_3.gif", nil), ("/dzi/photo_files/11/5_3", nil), ("/dzi/photo_files/11/-5_3.jpg", nil),
        ("/dzi/photo_files/11/5_3.jpg/x", nil), ("/dzi/photo/11/5_3.jpg", nil), ("/dzi/_files/11/5_3.jpg", nil),
        ("/dzi/files/11/5_3.jpg", nil), ("/dzi/photo_files/11", nil), ("/dzi/x_files/1/2/3_4.jpg", nil),
        ("/dzi/photo_files/99999999999/0_0.jpg", nil), ("/dzi/p_files/\u{301}1/0_0.jpg", nil), ("/dzi/photo.dzi", nil),
        ("/iiif/3/photo/full/max/0/default.jpg", ("photo", "full/max/0/default.jpg", nil)),
        ("/iiif/2/photo/full/full/0/default.jpg", ("photo", "iiif2/full/full/0/default.jpg", nil)),
        ("/iiif/3/a%2Fb/0,0,10,10/5,/90/gray.png", ("a%2Fb", "0,0,10,10/5,/90/gray.png", nil)),
        ("/iiif/4/photo/full/max/0/default.jpg", nil), ("/iiif/3/photo/info.json", nil), ("/iiif/3/photo", nil),
        ("/iiif/3/photo/full/max/0", nil), ("/images/photo", nil), ("/", nil)
    ]

    @Test("a path names the image and request the grammar says", arguments: cases.indices)
    func addresses(index: Int) throws {
        let (path, expected) = Self.cases[index]
        let address = TileAddress(path: path[...]).image
        guard let expected else {
            #expect(address == nil, "\(path)")
            return
        }
        let found = try #require(address, "\(path)")
        #expect(String(found.id) == expected.id && found.variant == expected.variant, "\(path)")
        var tag = EntityTag()
        found.addVariant(to: &tag)
        #expect(tag.text == EntityTag(expected.variant).text, "\(path): the variant's bytes")
        switch try found.target() {
        case .deepZoom(let tile): #expect(tile == expected.tile && found.link == nil, "\(path)")
        case .iiif(let request):
            #expect(expected.tile == nil && found.link != nil, "\(path)")
            let parameters = expected.variant.hasPrefix("iiif2/") ? String(expected.variant.dropFirst(6)) : expected.variant
            let reference = try path.hasPrefix("/iiif/2/") ? ImageRequest(version2Path: parameters) : ImageRequest(path: parameters)
            #expect(request == reference, "\(path)")
        }
    }
}
