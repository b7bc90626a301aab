import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import NIOFoundationCompat
import TileCore

extension TileRoutes {
    /// `GET /iiif/3/collection` (Presentation 3.0) and `GET /iiif/2/collection` (2.1): the folder's
    /// images as a IIIF collection of their manifests, labelled by identifier, in the order of their
    /// names; no image is opened or built. Past ``collectionPageSize`` images it lists its pages
    /// instead, each a collection of its own (`?page=2`); ids are the same across restarts (they are
    /// the images' and the pages' numbers). Entity tags follow the identifiers listed; 304 when the
    /// client has them.
    func collection(version: IIIFVersion, page text: String?, base: String, request: Request) async -> Response {
        let identifiers = await catalog.identifiers()
        let size = max(1, collectionPageSize)
        let pages = max(1, (identifiers.count + size - 1) / size)
        let top = "\(base)/collection"
        let name = (catalog.root as NSString).lastPathComponent
        let collection: IIIFCollection
        func manifests(_ ids: ArraySlice<String>) -> [IIIFCollection.Member] {
            ids.map { IIIFCollection.Member(.manifest, id: "\(base)/\($0)/manifest", label: $0) }
        }
        if let text {
            guard let page = Self.pageNumber(text), page <= pages else {
                return Self.plain(.notFound, "no page \(text): the collection has \(pages)")
            }
            let shown = identifiers[((page - 1) * size)..<min(identifiers.count, page * size)]
            collection = IIIFCollection(
                id: "\(top)?page=\(page)", label: "\(name): images \(shown.startIndex + 1)-\(shown.endIndex) of \(identifiers.count)",
                members: manifests(shown))
        } else if pages == 1 {
            collection = IIIFCollection(id: top, label: name, members: manifests(identifiers[...]))
        } else {
            let members = (1...pages).map { page in
                let (first, last) = ((page - 1) * size + 1, min(identifiers.count, page * size))
                return IIIFCollection.Member(.collection, id: "\(top)?page=\(page)", label: "images \(first)-\(last)")
            }
            collection = IIIFCollection(id: top, label: name, members: members)
        }
        let presentation: IIIFManifest.Version = version == .v3 ? .v3 : .v2
        let body = collection.encoded(version: presentation)
        let linkedData = request.headers[values: .accept].contains { $0.contains("application/ld+json") }
        let mediaType = linkedData ? "application/ld+json;profile=\"\(presentation.context)\"" : "application/json"
        var tag = EntityTag("collection|\(mediaType)|\(base)|\(text ?? "")|\(size)")
        for id in identifiers { tag.combine("|\(id)".utf8) }
        let headers: HTTPFields = [
            .contentType: mediaType, .vary: originVary, .eTag: tag.text, .cacheControl: service.cachePolicy.documentCacheControl
        ]
        return Self.conditional(request, headers: headers, body: ByteBuffer(data: body))
    }
}
