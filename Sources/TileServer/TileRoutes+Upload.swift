import Foundation
import HTTPTypes
public import Hummingbird
import NIOCore
import NIOFoundationCompat
import TileActors
import TileCore

/// Who may upload, and how much.
public struct UploadPolicy: Sendable, Hashable {
    /// The bearer token an upload must present (`Authorization: Bearer TOKEN`, the scheme in any case).
    public var token: String
    /// The largest body accepted, in bytes (default 1 GiB).
    public var maximumBytes: Int

    public init(token: String, maximumBytes: Int = 1 << 30) {
        self.token = token
        self.maximumBytes = maximumBytes
    }

    /// Whether an `Authorization` value presents the token (``TileRoutes/presents(_:token:)``).
    func authorizes(_ authorization: String?) -> Bool { TileRoutes.presents(authorization, token: token) }
}

/// A request context that knows its connection's channel (``TileServer``'s router uses one): an
/// upload sends `100 Continue` through it once its checks pass.
public protocol ChannelRequestContext: RequestContext {
    var channel: any Channel { get }
}

/// The request context of ``TileServer``'s router: Hummingbird's basic one and the channel.
public struct TileRequestContext: ChannelRequestContext, RequestContext {
    public var coreContext: CoreRequestContextStorage
    public let channel: any Channel

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }
}

/// Sent down a connection's pipeline to have ``TileConnectionHandler`` write `100 Continue`.
struct SendContinue: Sendable {}

extension TileRoutes {
    /// `PUT /images/{id}`: a JPEG as a streamed request body, built while it arrives (each part goes
    /// straight into an `ImageBuilder`, never the whole body in memory) and published as the store
    /// `{id}.tiles` in the folder; its tiles are served while it builds. The store's size, known from
    /// the JPEG's header, is counted against the disk budget before any of it is written. 201 with
    /// the build state when complete; 403 when uploads are off, 401 without the token, 409 for a name
    /// in use, 413 past the size limit, 503 with `Retry-After` past the uploads at once, 507 past the
    /// disk budget or on a full disk (`/ready` then says so for a while), 500 for a store that could
    /// not be written otherwise, 400 for a body that is not a whole JPEG (nothing is kept). `Expect: 100-continue`
    /// is answered once these checks pass.
    public func registerUploads<Context: ChannelRequestContext>(on router: Router<Context>) {
        router.put("images/:id") { request, context in
            await upload(request, id: context.parameters.get("id") ?? "") {
                context.channel.triggerUserOutboundEvent(SendContinue(), promise: nil)
            }
        }
    }

    private struct TooLarge: Error {}

    func upload(_ request: Request, id encoded: String, sendContinue: () -> Void) async -> Response {
        guard let policy = uploads else { return Self.plain(.forbidden, "uploads are off (tiler serve --allow-uploads)") }
        guard policy.authorizes(request.headers[.authorization]) else { return Self.unauthorized("an upload needs the server's bearer token") }
        // NIO's decoder takes lengths up to 2^64-1: one past `Int.max` is over any limit, `Int.max` (none) too.
        let length = request.headers[.contentLength].flatMap { UInt64($0) }
        if let length, Int(exactly: length).map({ $0 > policy.maximumBytes }) ?? true {
            return Self.plain(.contentTooLarge, "the body (\(length) bytes) is over the limit of \(policy.maximumBytes)")
        }
        let announced = length.map { Int($0) }
        guard let id = Self.identifier(encoded) else { return Self.notAnIdentifier }
        let builder: ImageBuilder
        do throws(ImageCatalog.UploadRefusal) { builder = try await catalog.beginUpload(id) } catch { return Self.refusal(error, id: id) }
        if request.headers[.expect]?.lowercased() == "100-continue" { sendContinue() }
        do {
            try await receive(request.body, into: builder, id: id, limit: policy.maximumBytes, announced: announced)
            _ = try await builder.finish()
            try await catalog.publishUpload(id)
        } catch {
            await builder.cancel()
            await catalog.endUpload(id, failure: error as? TileError)
            switch error {
            case is TooLarge: return Self.plain(.contentTooLarge, "the body is over the limit of \(policy.maximumBytes) bytes")
            case let refusal as ImageCatalog.UploadRefusal: return Self.refusal(refusal, id: id)
            case let failure as TileError where ImageCatalog.isDiskFull(failure):
                return Self.plain(Self.insufficientStorage, "the upload could not be stored: the disk is full")
            case let failure as TileError where failure.code == .overBudget:
                return Self.plain(Self.insufficientStorage, "the upload could not be stored: \(failure.message)")
            case let failure as TileError where failure.code == .io:
                return Self.plain(.internalServerError, "the upload could not be stored: \(failure.message)")
            default:
                let failure = error as? TileError ?? TileError(.truncated, "the body ended early: \(error)")
                return Self.plain(.badRequest, "not a whole image: \(failure.message)")
            }
        }
        var response = await state(id: id)
        response.status = .created
        response.headers[.location] = "/iiif/3/\(encoded)/info.json"
        return response
    }

    /// Feeds the body to the builder: the first bytes are held until the header says how large the
    /// store will be and the budget has room for it, so nothing is written past the budget.
    private func receive(_ body: RequestBody, into builder: ImageBuilder, id: String, limit: Int, announced: Int?) async throws {
        var (received, held, reserved) = (0, [UInt8](), false)
        for try await buffer in body {
            received += buffer.readableBytes
            guard received <= limit else { throw TooLarge() }
            if reserved {
                try await builder.append(buffer.readableBytesView)
                continue
            }
            held += buffer.readableBytesView
            guard let size = try Self.storeByteCount(header: held, format: catalog.storeFormat, sourceBytes: announced ?? limit) else { continue }
            try await catalog.reserveUpload(id, byteCount: size)
            reserved = true
            try await builder.append(held)
            held = []
        }
        if !held.isEmpty { try await builder.append(held) }  // no whole header: the builder says why
    }

    /// The bytes of the store a JPEG (or a PNG or JPEG 2000: its raw levels) makes at most (and a progressive one's coefficients while it is
    /// built), once `header` holds its frame header; nil before. Raw levels: their exact size. A TIFF:
    /// its full-resolution tiles hold about the JPEG's own bytes and the others fewer, so twice the
    /// JPEG's (`sourceBytes`), and never more than raw levels. Headers over 17 MiB are refused.
    /// Products saturate at half of `Int.max` (an upload limit of `Int.max`, as "none", announces that many
    /// bytes: six times it trapped).
    static func storeByteCount(header: [UInt8], format: StoreFormat, sourceBytes: Int) throws(TileError) -> Int? {
        func times(_ factor: Int, _ bytes: Int) -> Int {
            let (product, overflows) = bytes.multipliedReportingOverflow(by: factor)
            return overflows ? .max / 2 : min(product, .max / 2)
        }
        // A TIFF's directory is often at its end, so its size is unknown until the whole body is in (it
        // is spooled to disk meanwhile): estimated from the body's size, as stored 8-bit RGB is at
        // least 3 bytes a pixel (compressed masters may reach more pixels: the budget is then short).
        if header.withUnsafeBytes({ ImageFormat(sniffing: $0) }) == .tiff {
            return times(6, sourceBytes) + (1 << 20)
        }
        let info: ImageInfo
        do { info = try ImageInfo.read(data: header) } catch {
            guard error.code == .truncated, header.count < 17 << 20 else { throw error }
            return nil
        }
        let geometry = try TileGeometry(storedWidth: info.width, storedHeight: info.height, orientation: info.orientation)
        var levels = geometry.levels.indices.reduce(0) { $0 + ((try? geometry.fileByteCount(level: $1)) ?? 0) }
        // Alpha: WebP tiles (or a raw store): raw levels bound them.
        if case .tiff = format, !info.hasAlpha {
            // A JPEG 2000 may be compressed further than the TIFF's JPEG tiles (about half a byte a pixel, lower levels included).
            let tiles = info.format == .jpeg2000 ? max(times(2, sourceBytes), info.width * info.height / 2) : times(2, sourceBytes)
            levels = min(levels, tiles + (1 << 20))
        }
        return levels + (info.coding == .progressive ? info.width * info.height * 3 : 0)
    }

    static func refusal(_ refusal: ImageCatalog.UploadRefusal, id: String) -> Response {
        switch refusal {
        case .invalidIdentifier: return notAnIdentifier
        case .exists: return plain(.conflict, "an image named \(id) exists or is being uploaded")
        case .busy: return failure(TileError(.notReady, "too many uploads are in progress; try again shortly"))
        case .overBudget(let bytes):
            return plain(
                insufficientStorage,
                "the image needs \(bytes) bytes of store, over the server's disk budget")
        case .failed(let failure): return Self.failure(failure)
        }
    }
}
