import AsyncHTTPClient
import Foundation
import HTTPTypes
public import Hummingbird
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import TileCore

/// Who may administer the server, and which caches in front of it hear of a purge.
public struct AdminPolicy: Sendable, Hashable {
    /// The bearer token admin requests present (compared in constant time, never logged).
    public var token: String
    /// Caches to tell when an image is purged (`http://127.0.0.1:6081`): each gets
    /// `BAN /` with `X-Image-Id: ID`, which `deploy/varnish/tiler.vcl` turns into a ban of the image's
    /// every answer.
    public var purgeURLs: [String]

    public init(token: String, purgeURLs: [String] = []) {
        (self.token, self.purgeURLs) = (token, purgeURLs)
    }
}

extension TileRoutes {
    /// The admin API, off (404) unless ``admin`` is set; every request needs its token (401):
    /// - `GET /admin/images`: every image with its state, size on disk and fingerprint (JSON);
    /// - `POST /admin/images/{id}/build`: builds one now (202); `POST /admin/build`: every image not
    ///   built, one after another (202, the count);
    /// - `DELETE /admin/images/{id}`: purges one: its build stopped, its cache store deleted, its
    ///   encoded images dropped, and the caches of ``AdminPolicy/purgeURLs`` told (200, or 404);
    /// - `POST /admin/images/{id}/rebuild`: purges, then builds (202).
    public func registerAdmin<Context: RequestContext>(on router: Router<Context>) {
        let admin = router.group("admin").add(middleware: AdminGuard<Context>(policy: self.admin))
        admin.get("images") { request, _ in
            Self.json(await catalog.adminEntries())
        }
        admin.post("build") { request, _ in
            let ids = await catalog.identifiers()
            catalog.tasks.spawn { [catalog] in
                for id in ids {
                    guard (try? await catalog.image(id)) != nil else { continue }
                    _ = await catalog.waitUntil(id, deadline: .now + .seconds(3600)) { $0.isComplete }
                }
            }
            return Self.plain(.accepted, "building \(ids.count) images, one after another")
        }
        // Identifiers as in every other route: percent-decoded (`maps%2Fold%2Frome`).
        admin.post("images/:id/build") { request, context in
            guard let id = Self.identifier(context.parameters.get("id") ?? "") else { return Self.notAnIdentifier }
            return await build(id)
        }
        admin.post("images/:id/rebuild") { request, context in
            guard let id = Self.identifier(context.parameters.get("id") ?? "") else { return Self.notAnIdentifier }
            guard await purge(id) else { return Self.plain(.notFound, "no image named \(id)") }
            return await build(id)
        }
        admin.delete("images/:id") { request, context in
            guard let id = Self.identifier(context.parameters.get("id") ?? "") else { return Self.notAnIdentifier }
            return await purge(id) ? Self.plain(.ok, "purged \(id)") : Self.plain(.notFound, "no image named \(id)")
        }
    }

    private func build(_ id: String) async -> Response {
        do throws(ImageCatalog.LookupError) {
            _ = try await catalog.image(id)
            return Self.plain(.accepted, "building \(id)")
        } catch {
            return Self.refusal(error, id: id)
        }
    }

    /// Purges `id` here and in the configured caches.
    private func purge(_ id: String) async -> Bool {
        guard await catalog.purge(id) else { return false }
        service.cache.removeAll(of: id)
        for url in admin?.purgeURLs ?? [] {
            var ban = HTTPClientRequest(url: url.hasSuffix("/") ? url : url + "/")
            ban.method = .RAW(value: "BAN")
            // As the image's URLs have it (the deploy VCL bans by the path segment).
            ban.headers.add(name: "X-Image-Id", value: ImageCatalog.urlSegment(id))
            _ = try? await HTTPClient.shared.execute(ban, timeout: .seconds(5))
        }
        return true
    }
}

/// The admin API's guard: 404 while the API is off, 401 without its token.
struct AdminGuard<Context: RequestContext>: RouterMiddleware {
    let policy: AdminPolicy?

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let policy else { return TileRoutes.plain(.notFound, "the admin API is off (tiler serve --admin-token)") }
        guard TileRoutes.presents(request.headers[.authorization], token: policy.token) else {
            return TileRoutes.unauthorized("the admin API needs its bearer token")
        }
        return try await next(request, context)
    }
}
