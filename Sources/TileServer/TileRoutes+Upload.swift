import Foundation
import HTTPTypes
public import Hummingbird
import NIOCore
import NIOFoundationCompat
import TileActors
import TileCore

/// Who may upload, and how much.
public struct UploadPolicy: Sendable, Hashable {
    /// The bearer token an upload must present (`Authorization: Bearer TOKEN`); nil for none, which
    /// `tiler serve` allows only on a loopback address.
    public var token: String?
    /// The largest body accepted, in bytes (default 1 GiB).
    public var maximumBytes: Int

    public init(token: String? = nil, maximumBytes: Int = 1 << 30) {
        self.token = token
        self.maximumBytes = maximumBytes
    }
}

extension TileRoutes {
    /// `PUT /images/{id}`: a JPEG as a streamed request body, built while it arrives (each part goes
    /// straight into an `ImageBuilder`, never the whole body in memory) into the store `{id}.tiles` in
    /// the folder; its tiles are served while it builds. 201 with the build state when complete; 403
    /// when uploads are off, 401 without the token, 409 for a name in use, 413 past the size limit,
    /// 400 for a body that is not a whole JPEG (nothing is kept).
    public func registerUploads<Context: RequestContext>(on router: Router<Context>) {
        router.on("images/:id", method: .put) { request, context in
            await upload(request, id: context.parameters.get("id") ?? "")
        }
    }

    private struct TooLarge: Error {}

    func upload(_ request: Request, id encoded: String) async -> Response {
        guard let policy = uploads else { return Self.plain(.forbidden, "uploads are off (tiler serve --allow-uploads)") }
        if let token = policy.token, request.headers[.authorization] != "Bearer \(token)" {
            var response = Self.plain(.unauthorized, "an upload needs the server's bearer token")
            response.headers[.wwwAuthenticate] = "Bearer"
            return response
        }
        if let length = request.headers[.contentLength].flatMap(Int.init), length > policy.maximumBytes {
            return Self.plain(.contentTooLarge, "the body (\(length) bytes) is over the limit of \(policy.maximumBytes)")
        }
        guard let id = encoded.removingPercentEncoding else { return Self.plain(.badRequest, "not an image identifier") }
        let builder: ImageBuilder
        do throws(ImageCatalog.UploadRefusal) {
            builder = try await catalog.beginUpload(id)
        } catch {
            switch error {
            case .invalidIdentifier: return Self.plain(.badRequest, "not an image identifier")
            case .exists: return Self.plain(.conflict, "an image named \(id) exists or is being uploaded")
            case .failed(let failure): return Self.failure(failure)
            }
        }
        var received = 0
        do {
            for try await buffer in request.body {
                received += buffer.readableBytes
                guard received <= policy.maximumBytes else { throw TooLarge() }
                try await builder.append(buffer.readableBytesView)
            }
            _ = try await builder.finish()
            await catalog.endUpload(id)
        } catch {
            await builder.cancel()
            await catalog.endUpload(id)
            let failure = error as? TileError ?? TileError(.truncated, "the body ended early: \(error)")
            if error is TooLarge {
                return Self.plain(.contentTooLarge, "the body is over the limit of \(policy.maximumBytes) bytes")
            }
            return Self.plain(.badRequest, "not a whole JPEG: \(failure.message)")
        }
        var response = await state(id: id)
        response.status = .created
        response.headers[.location] = "/iiif/3/\(encoded)/info.json"
        return response
    }
}
