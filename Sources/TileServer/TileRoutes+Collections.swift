import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import NIOFoundationCompat
import TileCore

extension TileRoutes {
    /// `GET /iiif/3/collection` (Presentation 3.0) and `GET /iiif/2/collection` (2.1): the folder as a
    /// IIIF collection: its sub-folders first, each a collection of its own
    /// (`GET /iiif/3/{folder}/collection`, the folder's path with its `/` as `%2F`: `maps%2Fold`), then
    /// its images' manifests, each in the order of their names, labelled by name; no image is opened
    /// or built. Past ``collectionPageSize`` members it lists its pages instead, each a collection of
    /// its own (`?page=2`); ids are the same across restarts (they are the images' and folders' paths
    /// and the pages' numbers). Entity tags follow the members listed; 304 when the client has them.
    func collection(version: IIIFVersion, folder encoded: String? = nil, page text: String?, base: String, request: Request) async -> Response {
        var folder = ""
        if let encoded {
            guard let path = TileAddress.percentDecoded(encoded[...]), ImageCatalog.isPathIdentifier(path) else { return Self.notAnIdentifier }
            folder = path
        }
        guard isListed(folder: folder), let (found, shown) = await catalog.contents(ofFolder: folder) else {
            return Self.plain(.notFound, "no folder named \(folder)")
        }
        let (images, folders) = (found.filter { isListed($0) }, shown.filter { isListed(folder: $0) })
        // Sub-folders, then images; made members only where a page shows them.
        let entries = folders.map { ($0, true) } + images.map { ($0, false) }
        func members(_ shown: ArraySlice<(String, Bool)>) -> [IIIFCollection.Member] {
            shown.map { path, isFolder in
                let segment = ImageCatalog.urlSegment(path)
                return isFolder
                    ? IIIFCollection.Member(.collection, id: "\(base)/\(segment)/collection", label: Self.lastName(path))
                    : IIIFCollection.Member(.manifest, id: "\(base)/\(segment)/manifest", label: Self.lastName(path))
            }
        }
        let size = max(1, collectionPageSize)
        let pages = max(1, (entries.count + size - 1) / size)
        let top = folder.isEmpty ? "\(base)/collection" : "\(base)/\(ImageCatalog.urlSegment(folder))/collection"
        let name = folder.isEmpty ? (catalog.root as NSString).lastPathComponent : Self.lastName(folder)
        let collection: IIIFCollection
        if let text {
            guard let page = Self.pageNumber(text), page <= pages else {
                return Self.plain(.notFound, "no page \(text): the collection has \(pages)")
            }
            let shown = entries[((page - 1) * size)..<min(entries.count, page * size)]
            collection = IIIFCollection(
                id: "\(top)?page=\(page)", label: "\(name): items \(shown.startIndex + 1)-\(shown.endIndex) of \(entries.count)",
                members: members(shown))
        } else if pages == 1 {
            collection = IIIFCollection(id: top, label: name, members: members(entries[...]))
        } else {
            let parts = (1...pages).map { page in
                let (first, last) = ((page - 1) * size + 1, min(entries.count, page * size))
                return IIIFCollection.Member(.collection, id: "\(top)?page=\(page)", label: "items \(first)-\(last)")
            }
            collection = IIIFCollection(id: top, label: name, members: parts)
        }
        let presentation: IIIFManifest.Version = version == .v3 ? .v3 : .v2
        let body = collection.encoded(version: presentation)
        let linkedData = request.headers[values: .accept].contains { $0.contains("application/ld+json") }
        let mediaType = linkedData ? "application/ld+json;profile=\"\(presentation.context)\"" : "application/json"
        var tag = EntityTag("collection|\(mediaType)|\(base)|\(folder)|\(text ?? "")|\(size)")
        for (path, isFolder) in entries { tag.combine("|\(isFolder ? "/" : "")\(path)".utf8) }
        let headers: HTTPFields = [
            .contentType: mediaType, .vary: originVary, .eTag: tag.text, .cacheControl: service.cachePolicy.documentCacheControl
        ]
        return Self.conditional(request, headers: headers, body: ByteBuffer(data: body))
    }

    /// The last name of a path (`berlin` of `maps/old/berlin`).
    static func lastName(_ path: String) -> String { String(path.split(separator: "/").last ?? path[...]) }
}

// An image's manifest.
extension TileRoutes {
    /// The Presentation manifest of an image (3.0 under `/iiif/3/`, 2.1 under `/iiif/2/`): one canvas
    /// painted by the image's service of the same version, labelled with its identifier, or for a
    /// multi-page TIFF master one a page, in order, each painted by its page identifier's service
    /// (`book`, `book~2`, ...); cached and revalidated as its info.json is.
    func manifest(id encoded: String, version: IIIFVersion, base: String, request: Request, client: String? = nil) async -> Response {
        guard let id = Self.identifier(encoded) else { return Self.notAnIdentifier }
        // A multi-page TIFF master: a canvas a page, each its page identifier's service, all read from
        // its directories; its first page is not built for it (a viewer of `book~2` asks for `book`'s
        // manifest). Any other image: its outline (a build started, as its info.json would).
        let presentation = await catalog.presentation(of: id)
        let outline: ImageCatalog.Outline
        if let book = presentation.bookOutline {
            outline = book
        } else {
            do throws(ImageCatalog.LookupError) { outline = try await catalog.outline(id, for: client) } catch {
                return Self.refusal(error, id: id)
            }
        }
        let found = presentation.pages ?? [(id, outline.geometry)]
        let canvases = found.map { page in
            let number = ImageCatalog.page(of: page.id).map { $0.page + 1 } ?? 1
            return IIIFManifest.Page(
                label: found.count > 1 ? "page \(number)" : Self.lastName(id), service: "\(base)/\(ImageCatalog.urlSegment(page.id))",
                layout: page.geometry.layout)
        }
        // A restricted image's manifest for someone not allowed it in full: no metadata, no download.
        let isFull = AccessContext.grant.map { $0 == .full } ?? true
        var manifest = IIIFManifest(
            id: "\(base)/\(encoded)/manifest", label: Self.lastName(id), pages: canvases, metadata: isFull ? presentation.metadata : [])
        (manifest.rights, manifest.requiredStatement) = (rights, requiredStatement)
        if downloads, isFull, let master = presentation.master {
            let site = String(base.dropLast(IIIFVersion.v3.path.count))  // the server's root: base ends with iiif/3 or iiif/2
            manifest.rendering = IIIFManifest.Rendering(
                id: "\(site)download/\(encoded)", label: "Download the master (\(master.name), \(Self.megabytes(master.byteCount)))",
                format: master.mediaType)
        }
        let terms: IIIFManifest.Version = version == .v3 ? .v3 : .v2
        let body = manifest.encoded(version: terms)
        let linkedData = request.headers[values: .accept].contains { $0.contains("application/ld+json") }
        let mediaType = linkedData ? "application/ld+json;profile=\"\(terms.context)\"" : "application/json"
        let headers: HTTPFields = [.contentType: mediaType, .vary: originVary]
        // What the body says beyond the source's version (pages read, metadata, settings, this release's
        // shape) is in the tag too: a body that differs never shares a tag.
        let variant = "manifest|\(mediaType)|" + String(decoding: body, as: UTF8.self)
        return document(ByteBuffer(data: body), headers: headers, outline: outline, variant: variant, request: request)
    }
}
