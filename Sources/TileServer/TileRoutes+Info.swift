import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import NIOFoundationCompat
import TileActors
import TileCore

// The image information routes: the base URI, info.json.
extension TileRoutes {
    /// An image's `info.json` (Image API 3.0 under `/iiif/3/`, 2.1 under `/iiif/2/`), its `id` under `base`;
    /// JSON-LD for a client that asks for it, cached and revalidated as the image's other documents are.
    func info(id encoded: String, version: IIIFVersion, base: String, request: Request, client: String? = nil) async -> Response {
        guard let id = Self.identifier(encoded) else { return Self.notAnIdentifier }
        let outline: ImageCatalog.Outline
        do throws(ImageCatalog.LookupError) { outline = try await catalog.outline(id, for: client) } catch { return Self.refusal(error, id: id) }
        let layout = outline.geometry.layout
        // A restricted image: the sizes its grant allows, and its authorization services.
        let grant = AccessContext.grant
        var limits = service.limits
        if case .degraded(let tier)? = grant { limits = Self.narrowed(limits, to: tier) }
        let (sizeAllowed, factorAllowed) = Self.allowed(grant ?? .full, layout: layout)
        var body: Data
        if version == .v3 {
            var information = layout.iiifInformation(id: "\(base)/\(encoded)", limits: limits, extras: Self.extras)
            information.sizes = information.sizes.filter(sizeAllowed)
            information.tiles = Self.narrowedTiles(information.tiles, factors: \.scaleFactors, to: factorAllowed)
            body = information.encoded()
        } else {
            var information = layout.iiifInformation2(id: "\(base)/\(encoded)", limits: limits, supports: Self.supports2)
            information.sizes = information.sizes.filter(sizeAllowed)
            information.tiles = Self.narrowedTiles(information.tiles, factors: \.scaleFactors, to: factorAllowed)
            body = information.encoded()
        }
        if grant != nil, let access { body = Self.adding(services: authServices(access, encodedID: encoded, request: request), to: body) }
        // JSON-LD only for a client that asks for it (Image API 3.0, 6.1; 2.1, 6.1); the same bytes either way.
        let linkedData = request.headers[values: .accept].contains { $0.contains("application/ld+json") }
        let mediaType = linkedData ? "application/ld+json;profile=\"\(version.context)\"" : "application/json"
        let headers: HTTPFields = [.contentType: mediaType, .link: version.profileLink, .vary: originVary]
        return document(
            ByteBuffer(data: body), headers: headers, outline: outline,
            variant: "info.json|\(mediaType)|\(base)" + (grant.map { "|\($0.name)" } ?? ""), request: request)
    }

    /// `tiles` (of a 3.0 or a 2.1 document) with only the scale factors `allowed`, those left without
    /// any dropped.
    static func narrowedTiles<Tiles>(_ tiles: [Tiles], factors: WritableKeyPath<Tiles, [Int]>, to allowed: (Int) -> Bool) -> [Tiles] {
        tiles.compactMap { tile in
            var tile = tile
            tile[keyPath: factors].removeAll { !allowed($0) }
            return tile[keyPath: factors].isEmpty ? nil : tile
        }
    }

    /// An image's base URI: a 303 to its info.json (Image API 3.0, 2.1: "recommended"), for an image
    /// that exists; 400, 403 or 404 as its info.json would answer otherwise. Starts no build.
    func baseURI(id encoded: String, version: IIIFVersion, request: Request) async -> Response {
        guard let id = Self.identifier(encoded) else { return Self.notAnIdentifier }
        if catalog.readyImage(id) == nil {
            do throws(ImageCatalog.LookupError) { _ = try await catalog.summary(id) } catch { return Self.refusal(error, id: id) }
        }
        return Self.response(.seeOther, headers: [.location: "\(base(request, version))/\(encoded)/info.json", .vary: originVary])
    }
}
