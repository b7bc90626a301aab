import Foundation
import HTTPTypes
public import Hummingbird
import NIOCore
import NIOFoundationCompat

extension TileRoutes {
    /// `GET /`: a page listing the folder (a picker of its collection): its sub-folders (`GET
    /// /?folder=maps`, with links back up), then its images (name, size, build state, a thumbnail
    /// through IIIF, a link to the viewer), in pages of ``listingPageSize`` (`GET /?page=2`);
    /// `GET /images/{id}`: an image's build state as JSON; `GET /view/{id}`: the viewer.
    public func registerPages<Context: RequestContext>(on router: Router<Context>) {
        router.get("") { request, _ in
            guard let page = Self.pageNumber(request.uri.queryParameters.get("page")) else {
                return Self.plain(.badRequest, "page is a number from 1")
            }
            return await listing(folder: request.uri.queryParameters.get("folder") ?? "", page: page)
        }
        router.get("images/:id") { _, context in await state(id: context.parameters.get("id") ?? "") }
        router.get("view/:id") { _, context in await viewer(id: context.parameters.get("id") ?? "") }
    }

    /// The page a listing's `page` parameter names: 1 without one, nil for anything but a number from 1.
    static func pageNumber(_ text: String?) -> Int? {
        guard let text else { return 1 }
        guard text.count <= 9, let page = Int(text), page >= 1 else { return nil }
        return page
    }

    /// Page `page` (from 1) of the listing of `folder` ("" the folder served): its sub-folders, then
    /// its images in the order of their names, ``listingPageSize`` entries a page, each image
    /// summarized (a look at its file's header), with links to the pages beside it and to the folders
    /// above. 404 past the last page or for a folder that is not served.
    func listing(folder: String, page: Int) async -> Response {
        let nonce = ViewerPage.nonce()
        guard isListed(folder: folder), let (found, subfolders) = await catalog.contents(ofFolder: folder) else {
            return Self.plain(.notFound, "no folder named \(folder)")
        }
        let (images, folders) = (found.filter { isListed($0) }, subfolders.filter { isListed(folder: $0) })
        let entries = folders.map { (id: $0, isFolder: true) } + images.map { (id: $0, isFolder: false) }
        let size = max(1, listingPageSize)
        let pages = max(1, (entries.count + size - 1) / size)
        guard page <= pages else { return Self.plain(.notFound, "no page \(page): the listing has \(pages)") }
        let shown = entries[((page - 1) * size)..<min(entries.count, page * size)]
        var rows = ""
        for entry in shown {
            let name = Self.html(Self.lastName(entry.id))
            let encoded = Self.queryValue(entry.id)
            if entry.isFolder {
                rows += "<tr><td></td><td><a href=\"?folder=\(encoded)\">\(name)/</a></td><td>folder</td><td></td></tr>\n"
                continue
            }
            guard let s = try? await catalog.summary(entry.id) else { continue }
            let size = s.width.map { "\($0) x \(s.height ?? 0)" } ?? "?"
            let segment = ImageCatalog.urlSegment(entry.id)
            rows += """
                <tr><td><img src="iiif/3/\(segment)/full/!160,160/0/default.jpg" alt="" loading="lazy"></td>\
                <td><a href="view/\(segment)">\(name)</a></td><td>\(size)</td><td>\(s.state.rawValue)</td></tr>

                """
        }
        // Where the folder is: links to each folder above it.
        var trail = folder.isEmpty ? "Images" : "<a href=\"./\">Images</a>"
        let parts = folder.split(separator: "/")
        for (n, part) in parts.enumerated() {
            let path = parts[...n].joined(separator: "/")
            trail +=
                n == parts.count - 1
                ? " / \(Self.html(String(part)))" : " / <a href=\"?folder=\(Self.queryValue(path))\">\(Self.html(String(part)))</a>"
        }
        let html = """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><title>tiler</title><link rel="icon" href="data:,">
            <style nonce="\(nonce)">body{font:15px system-ui,sans-serif;margin:2em}td{padding:.3em 1em;vertical-align:middle}img{max-width:160px;max-height:160px}</style>
            </head><body><h1>\(trail)</h1>
            \(Self.pageLinks(page: page, pages: pages, first: shown.startIndex + 1, last: shown.endIndex, total: entries.count, folder: folder))
            <table><tr><th></th><th>name</th><th>size</th><th>state</th></tr>
            \(rows)</table></body></html>

            """
        return Self.response(.ok, headers: ViewerPage.headers(nonce: nonce), body: ByteBuffer(string: html))
    }

    /// `text` as a query's value: everything but letters, digits, `-`, `_`, `.` and `~` percent-encoded.
    static func queryValue(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: CharacterSet(charactersIn: "-_.~").union(.alphanumerics)) ?? text
    }

    /// Where a listing's page is among the others: "12 images" on a single page, else "images 101-200
    /// of 2000" with links to the previous and next pages.
    static func pageLinks(page: Int, pages: Int, first: Int, last: Int, total: Int, folder: String = "") -> String {
        guard pages > 1 else { return "<p>\(total) item\(total == 1 ? "" : "s")</p>" }
        let here = folder.isEmpty ? "?" : "?folder=\(queryValue(folder))&amp;"
        var links = "<p>items \(first)-\(last) of \(total)"
        if page > 1 { links += " <a href=\"\(here)page=\(page - 1)\" rel=\"prev\">previous</a>" }
        if page < pages { links += " <a href=\"\(here)page=\(page + 1)\" rel=\"next\">next</a>" }
        return links + "</p>"
    }

    func state(id encoded: String) async -> Response {
        guard let id = Self.identifier(encoded) else { return Self.notAnIdentifier }
        do throws(ImageCatalog.LookupError) { return Self.json(try await catalog.summary(id)) } catch { return Self.refusal(error, id: id) }
    }

    func viewer(id encoded: String) async -> Response {
        guard let id = Self.identifier(encoded) else { return Self.notAnIdentifier }
        do throws(ImageCatalog.LookupError) { _ = try await catalog.summary(id) } catch { return Self.refusal(error, id: id) }
        let nonce = ViewerPage.nonce()
        return Self.response(.ok, headers: ViewerPage.headers(nonce: nonce), body: ByteBuffer(string: ViewerPage.html(id: id, nonce: nonce)))
    }

    /// Text for HTML: `&`, `<`, `>` and `"` escaped.
    static func html(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }
}
