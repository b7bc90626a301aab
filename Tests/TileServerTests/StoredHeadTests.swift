import NIOCore
import Testing

@testable import TileServer

/// The pieces the connection handler writes a stored tile's head from, against the head written field by
/// field from the routes' own fields, and entity tags written as bytes against their text.
@Suite("Stored tiles' heads")
struct StoredHeadTests {
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

    @Test("the pieces make the same head as the routes' fields", arguments: ["public, max-age=86400", "public, max-age=0"])
    func sameHead(cacheControl: String) {
        let head = TileService.StoredHead(cacheControl: cacheControl)
        for (key, length) in [("a", 0), ("b", 9), ("c", 12_345), ("d", 1_048_576)] {
            var tag = EntityTag()
            tag.combine(key.utf8)
            let lastModified = "Wed, 25 Nov 2026 10:00:00 GMT"
            var pieces = ByteBuffer()
            head.write(tag: tag, lastModified: lastModified, contentLength: length, into: &pieces)
            var fields = ByteBuffer()
            TileService.writeHead(
                fields: TileRoutes.imageFields(
                    mediaType: "image/jpeg", entityTag: tag.text, lastModified: lastModified, cacheControl: cacheControl, link: nil),
                contentLength: length, into: &fields)
            #expect(String(buffer: pieces) == String(buffer: fields))
            #expect(String(buffer: pieces).contains("\r\nContent-Length: \(length)\r\n"))
        }
    }

    @Test(
        "a DeepZoom path read as bytes names what the routes' parser names",
        arguments: [
            "/dzi/photo_files/11/5_3.jpg", "/dzi/photo_files/0/0_0.png", "/dzi/a_b_files/3/1_2.jpg", "/dzi/photo_files/11/5_3.gif",
            "/dzi/photo_files/11/5_3", "/dzi/photo_files/11/-5_3.jpg", "/dzi/photo_files/11/5_3.jpg/", "/dzi/photo_files//5_3.jpg",
            "/dzi/photo/11/5_3.jpg", "/dzi/_files/11/5_3.jpg", "/dzi/files/11/5_3.jpg", "/dzi/photo_files/11", "/dzi/x_files/1/2/3_4.jpg",
            "/iiif/3/photo/full/max/0/default.jpg", "/dzi/ph%20oto_files/11/5_3.jpg", "/dzi/фото_files/2/0_1.jpg",
            "/dzi/photo_files/99999999999/0_0.jpg", "/dzi/p\u{301}_files/1/0_0.jpg"
        ])
    func deepZoomBytes(path: String) {
        var bytes = path
        let fast = bytes.withUTF8 {
            TileService.deepZoomTile($0).map { (String(decoding: $0.id, as: UTF8.self), $0.address, String(decoding: $0.variant, as: UTF8.self)) }
        }
        let routes = TileService.imageRequest(path: path)
        if path.utf8.contains(where: { $0 >= 0x80 }) {
            #expect(fast == nil, "\(path): not ASCII, left to the routes")
            return
        }
        guard case .deepZoom(let address)? = routes?.target, let routes, !routes.id.isEmpty else {
            #expect(fast == nil, "\(path)")
            return
        }
        #expect(fast?.0 == String(routes.id) && fast?.1 == address && "dzi/" + (fast?.2 ?? "") == routes.variant, "\(path)")
    }
}
