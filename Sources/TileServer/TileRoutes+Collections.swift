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
        guard let (found, folders) = await catalog.contents(ofFolder: folder) else { return Self.plain(.notFound, "no folder named \(folder)") }
        let images = found.filter(isListed)
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
