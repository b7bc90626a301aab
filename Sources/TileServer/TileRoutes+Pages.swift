import Foundation
import HTTPTypes
public import Hummingbird
import NIOCore
import NIOFoundationCompat

extension TileRoutes {
    /// `GET /`: a page listing the images (name, size, build state, a thumbnail through IIIF),
    /// `GET /images/{id}`: an image's build state as JSON, and `GET /view/{id}`: the viewer.
    public func registerPages<Context: RequestContext>(on router: Router<Context>) {
        router.get("") { _, _ in await listing() }
        router.get("images/:id") { _, context in await state(id: context.parameters.get("id") ?? "") }
        router.get("view/:id") { _, context in await viewer(id: context.parameters.get("id") ?? "") }
    }

    func listing() async -> Response {
        let nonce = ViewerPage.nonce()
        var rows = ""
        for id in await catalog.identifiers() {
            guard let s = await catalog.summary(id) else { continue }
            let size = s.width.map { "\($0) x \(s.height ?? 0)" } ?? "?"
            let name = Self.html(id)
            let encoded = id.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? id
            rows += """
                <tr><td><img src="iiif/3/\(encoded)/full/!160,160/0/default.jpg" alt="" loading="lazy"></td>\
                <td><a href="view/\(encoded)">\(name)</a></td><td>\(size)</td><td>\(s.state.rawValue)</td></tr>

                """
        }
        let page = """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><title>tiler</title>
            <style nonce="\(nonce)">body{font:15px system-ui,sans-serif;margin:2em}td{padding:.3em 1em;vertical-align:middle}img{max-width:160px;max-height:160px}</style>
            </head><body><h1>Images</h1>
            <table><tr><th></th><th>name</th><th>size</th><th>state</th></tr>
            \(rows)</table></body></html>

            """
        return Self.response(.ok, headers: ViewerPage.headers(nonce: nonce), body: ByteBuffer(string: page))
    }

    func state(id encoded: String) async -> Response {
        guard let id = encoded.removingPercentEncoding, ImageCatalog.isValidIdentifier(id) else {
            return Self.plain(.badRequest, "not an image identifier")
        }
        guard let summary = await catalog.summary(id) else { return Self.plain(.notFound, "no image named \(id)") }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = (try? encoder.encode(summary)) ?? Data()
        return Self.response(.ok, headers: [.contentType: "application/json", .cacheControl: "no-store"], body: ByteBuffer(data: data))
    }

    func viewer(id encoded: String) async -> Response {
        guard let id = encoded.removingPercentEncoding, ImageCatalog.isValidIdentifier(id) else {
            return Self.plain(.badRequest, "not an image identifier")
        }
        guard await catalog.summary(id) != nil else { return Self.plain(.notFound, "no image named \(id)") }
        let nonce = ViewerPage.nonce()
        return Self.response(.ok, headers: ViewerPage.headers(nonce: nonce), body: ByteBuffer(string: ViewerPage.html(id: id, nonce: nonce)))
    }

    /// Text for HTML: `&`, `<`, `>` and `"` escaped.
    static func html(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }
}
