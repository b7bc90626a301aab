import Foundation
import HTTPTypes
import TileCore

/// The viewer page (`GET /view/{id}`): a deep-zoom viewer of our own, in one HTML file with no
/// library, over the IIIF tiles of ``TileRoutes`` (``ViewerPageTemplate``, which static IIIF exports
/// also write as their `index.html`).
///
/// It fills the window with the image fitted; pans (drag, arrow keys) and zooms (wheel, pinch,
/// double-click, `+`/`-`) about the pointer; picks the level from the zoom and `devicePixelRatio`;
/// loads the visible tiles centre first, at most six at a time, dropping requests for tiles that left
/// the view; and draws the coarsest level under the finer ones as a placeholder. The view (centre in
/// image pixels, zoom in screen pixels per image pixel) lives in the URL fragment
/// (`#x=…&y=…&z=…`), so a view is a link. While the image is being built it shows the progress
/// (`/images/{id}`, polled every second; before the header has arrived, `info.json`'s 503 message, asked
/// again) and asks for the tiles of the rows written so far, plus one other tile at a time: the server
/// holds a request for a tile not written yet (up to 20 s), and six of those would take every connection
/// a browser opens to a host, keeping back the tiles that are ready and the progress itself.
enum ViewerPage {
    static func html(id: String, nonce: String) -> String {
        let name = TileRoutes.html(id)
        let encoded = id.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? id
        return ViewerPageTemplate.html(title: name, id: encoded, base: "../iiif/3/" + encoded, format: .jpg, live: true, nonce: nonce)
    }

    /// The page's headers: HTML, and a policy that lets only its own script and style (by `nonce`) run
    /// and only this server's images, JSON and frames (a restricted image's token service) load; no
    /// forms or base URL, and no one frames it.
    static func headers(nonce: String) -> HTTPFields {
        let policy =
            "default-src 'none'; script-src 'nonce-\(nonce)'; style-src 'nonce-\(nonce)'; img-src 'self' data: blob:; "
            + "connect-src 'self'; frame-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        return [.contentType: "text/html; charset=utf-8", .contentSecurityPolicy: policy, .cacheControl: "no-store"]
    }

    /// A new nonce for a page's policy (128 random bits, hexadecimal).
    static func nonce() -> String { (0..<2).map { _ in String(UInt64.random(in: 0...UInt64.max), radix: 16) }.joined() }
}
