import Foundation
import HTTPTypes
public import Hummingbird

extension TileRoutes {
    /// `GET /`: a page listing the images (name, size, build state, a thumbnail through IIIF),
    /// `GET /images/{id}`: an image's build state as JSON, and `GET /view/{id}`: the viewer.
    public func registerPages<Context: RequestContext>(on router: Router<Context>) {
        router.on("", method: .get) { _, _ in await listing() }
        router.on("", method: .head) { _, _ in await listing() }
        router.on("images/:id", method: .get) { _, context in await state(id: context.parameters.get("id") ?? "") }
        router.on("images/:id", method: .head) { _, context in await state(id: context.parameters.get("id") ?? "") }
        router.on("view/:id", method: .get) { _, context in await viewer(id: context.parameters.get("id") ?? "") }
    }

    func listing() async -> Response {
        var rows = ""
        for id in await catalog.identifiers() {
            guard let s = await catalog.summary(id) else { continue }
            let size = s.width.map { "\($0) x \(s.height ?? 0)" } ?? "?"
            let name = Self.html(id)
            let encoded = id.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? id
            rows += """
                <tr><td><img src="/iiif/3/\(encoded)/full/!160,160/0/default.jpg" alt="" loading="lazy"></td>\
                <td><a href="/view/\(encoded)">\(name)</a></td><td>\(size)</td><td>\(s.state.rawValue)</td></tr>

                """
        }
        let page = """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><title>tiler</title>
            <style>body{font:15px system-ui,sans-serif;margin:2em}td{padding:.3em 1em;vertical-align:middle}img{max-width:160px;max-height:160px}</style>
            </head><body><h1>Images</h1>
            <table><tr><th></th><th>name</th><th>size</th><th>state</th></tr>
            \(rows)</table></body></html>

            """
        var headers = HTTPFields()
        headers[.contentType] = "text/html; charset=utf-8"
        headers[.cacheControl] = "no-store"
        return Self.response(.ok, headers: headers, body: Data(page.utf8))
    }

    func state(id encoded: String) async -> Response {
        guard let id = encoded.removingPercentEncoding, ImageCatalog.isValidIdentifier(id) else {
            return Self.plain(.badRequest, "not an image identifier")
        }
        guard let s = await catalog.summary(id) else { return Self.plain(.notFound, "no image named \(id)") }
        var object: [String: Any] = [
            "id": id, "state": s.state.rawValue, "levelsComplete": s.levelsComplete, "levelCount": s.levelCount,
            "tileRowsComplete": s.tileRowsComplete,
        ]
        if let width = s.width, let height = s.height { (object["width"], object["height"]) = (width, height) }
        if let error = s.error { object["error"] = error }
        if let bytes = s.bytesReceived { object["bytesReceived"] = bytes }
        if let bytes = s.expectedBytes { object["expectedBytes"] = bytes }
        if let rows = s.rowsDecoded { object["rowsDecoded"] = rows }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        headers[.cacheControl] = "no-store"
        return Self.response(.ok, headers: headers, body: data)
    }

    func viewer(id encoded: String) async -> Response {
        guard let id = encoded.removingPercentEncoding, ImageCatalog.isValidIdentifier(id) else {
            return Self.plain(.badRequest, "not an image identifier")
        }
        guard await catalog.summary(id) != nil else { return Self.plain(.notFound, "no image named \(id)") }
        var headers = HTTPFields()
        headers[.contentType] = "text/html; charset=utf-8"
        return Self.response(.ok, headers: headers, body: Data(ViewerPage.html(id: id).utf8))
    }

    /// Text for HTML: `&`, `<`, `>` and `"` escaped.
    static func html(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }
}
