import Foundation
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore
import TileActors
import TileCore

extension TileRoutes {
    /// Bytes of a download read at a time: what one connection holds of it at most.
    static let downloadChunk = 64 * 1024

    /// `GET /download/{id}` (and `HEAD`): the image's master file as it is in the folder, when
    /// ``downloads`` allows it (404 otherwise), as an attachment named as in the folder; its entity
    /// tag and `Last-Modified` from the file's version, 304 when the client has it; one byte range
    /// (``ByteRange``: `206`, or `416` past the end; `412` when `If-Match` or `If-Unmodified-Since` names another version) so that a broken download can be resumed. Read a chunk at a
    /// time on the thread pool (``downloadChunk``); a file cut or rewritten while it is sent ends the
    /// connection short of its length, never a body of other bytes or of two versions. Page identifiers and store folders have none.
    /// At most ``downloadLimit`` are sent at once (each holds a descriptor and its connection while its
    /// client reads), and ``downloadsPerClient`` to one client address (`client`: a client that reads
    /// slowly, or not at all until the idle timeout, cannot hold every slot): 503 with `Retry-After` beyond.
    func download(id encoded: String, request: Request, client: String?) async -> Response {
        guard downloads else { return Self.plain(.notFound, "this server does not offer its masters for download") }
        guard let id = Self.identifier(encoded) else { return Self.notAnIdentifier }
        // Held by the answer's body: given back when it is sent, fails, or is dropped unsent.
        let slot: DownloadSlots.Slot
        switch downloadSlots.take(limit: downloadLimit, perClient: downloadsPerClient, client: client ?? "") {
        case .granted(let granted): slot = granted
        case .full(let byClient):
            let why =
                byClient
                ? "\(downloadsPerClient) downloads to this client are being sent" : "\(downloadLimit) downloads are being sent"
            var busy = Self.plain(.serviceUnavailable, "\(why); try again shortly")
            busy.headers[.retryAfter] = "5"
            return busy
        }
        guard let (file, master, fingerprint) = await catalog.master(of: id) else {
            return Self.plain(.notFound, "no master file of \(id) to download")
        }
        let tag = EntityTag("download|\(fingerprint)").text
        var headers: HTTPFields = [
            .contentType: master.mediaType, .contentLength: String(master.byteCount),
            .contentDisposition: "attachment; filename=\"\(master.name)\"", .eTag: tag,
            .lastModified: HTTPDate.string(nanosecondsSinceEpoch: fingerprint.identity.lastChangeTime),
            .cacheControl: service.cachePolicy.documentCacheControl, .vary: originVary, .acceptRanges: "bytes"
        ]
        // RFC 9110, 13.2.2: If-Match, then If-Unmodified-Since (a client resuming a download of the
        // version it has), then If-None-Match and If-Modified-Since, then If-Range.
        if Self.failsPrecondition(request, entityTag: tag, lastModified: fingerprint.identity.lastChangeTime) {
            return Self.plain(.preconditionFailed, "the master file is no longer the version asked for")
        }
        if Self.isNotModified(request, headers: headers) { return Self.response(.notModified, headers: headers) }
        // A range is served to a GET only (RFC 9110, 14.2): a HEAD describes the whole file.
        var status = HTTPResponse.Status.ok
        var range = 0..<file.byteCount
        if request.method == .get {
            switch ByteRange(request.headers[.range], ifRange: request.headers[.ifRange], length: file.byteCount, entityTag: tag) {
            case .whole: break
            case .part(let part):
                (status, range) = (.partialContent, part)
                headers[.contentLength] = String(part.count)
                headers[.contentRange] = "bytes \(part.lowerBound)-\(part.upperBound - 1)/\(file.byteCount)"
                // The part of a file the client has (RFC 9110, 15.3.7): what describes the file is not
                // said again; ETag, Cache-Control and Vary are.
                if request.headers[.ifRange] != nil {
                    (headers[.contentType], headers[.contentDisposition], headers[.lastModified]) = (nil, nil, nil)
                }
            case .unsatisfiable:
                var refused = Self.plain(.rangeNotSatisfiable, "no byte of the file's \(file.byteCount) is in the range asked for")
                refused.headers[.contentRange] = "bytes */\(file.byteCount)"
                return refused
            }
        }
        if request.method == .head { return Response(status: .ok, headers: headers) }
        let pool = catalog.threadPool
        return Response(
            status: status, headers: headers,
            body: ResponseBody(contentLength: range.count) { [range] writer in
                withExtendedLifetime(slot) {}
                var offset = range.lowerBound
                while offset < range.upperBound {
                    let (at, count) = (offset, min(Self.downloadChunk, range.upperBound - offset))
                    let chunk = try await pool.read(file, at: at, count: count)
                    // The last bytes go only if the file did not change while it was read: else the
                    // connection ends short of its length, and the client knows it has no whole file.
                    if offset + count == range.upperBound, !(await pool.blocking { file.isUnchanged() }) {
                        throw TileError(.io, "\(master.name) changed while it was sent")
                    }
                    try await writer.write(chunk)
                    offset += count
                }
                try await writer.finish(nil)
            })
    }

    /// Whether `If-Match` (the first condition: no listed tag is `entityTag` by strong comparison, `*`
    /// matches) or, without it, `If-Unmodified-Since` (the file changed after that date; it must parse)
    /// says the request is not for this version: a 412 (RFC 9110, 13.1.1 and 13.1.4).
    static func failsPrecondition(_ request: Request, entityTag: String, lastModified nanoseconds: Int64) -> Bool {
        let ifMatch = request.headers[values: .ifMatch]
        if !ifMatch.isEmpty {
            return !listedTags(ifMatch).contains { $0 == "*" || $0 == entityTag }
        }
        guard let since = request.headers[.ifUnmodifiedSince].flatMap({ HTTPDate.seconds($0) }) else { return false }
        // The file's time to the second below, as `Last-Modified` says it (a rewrite within that second
        // is not told: a date checks no finer).
        return HTTPDate.seconds(nanosecondsSinceEpoch: nanoseconds) > since
    }

    /// A size as people read it: `850 KB`, `12.4 MB`, `1.2 GB` (powers of 1000, as file managers show them).
    static func megabytes(_ byteCount: Int) -> String {
        let size = Double(byteCount)
        if size < 1e6 { return "\(max(1, Int((size / 1e3).rounded()))) KB" }
        return size < 1e9 ? String(format: "%.1f MB", size / 1e6) : String(format: "%.1f GB", size / 1e9)
    }
}

/// The downloads being sent (``TileRoutes/download(id:request:client:)``), counted in all and by client
/// address: a slot is taken before one starts and given back when its ``Slot`` is released.
final class DownloadSlots: Sendable {
    private struct Taken {
        var count = 0
        var byClient: [String: Int] = [:]
    }
    private let taken = NIOLockedValueBox(Taken())

    /// What ``take(limit:perClient:client:)`` gives.
    enum Outcome {
        case granted(Slot)
        /// Every slot is taken (`false`), or every one `client` may have (`true`).
        case full(byClient: Bool)
    }

    /// A slot of `limit`, `client` having fewer than `perClient` of them.
    func take(limit: Int, perClient: Int, client: String) -> Outcome {
        let refused = taken.withLockedValue { taken -> Bool? in
            let mine = taken.byClient[client, default: 0]
            guard taken.count < limit else { return false }
            guard mine < perClient else { return true }
            (taken.count, taken.byClient[client]) = (taken.count + 1, mine + 1)
            return nil
        }
        return refused.map { .full(byClient: $0) } ?? .granted(Slot(self, client: client))
    }

    /// Slots taken now.
    var count: Int { taken.withLockedValue { $0.count } }

    /// One download's slot, given back when the value is released.
    final class Slot: Sendable {
        private let slots: DownloadSlots
        private let client: String
        init(_ slots: DownloadSlots, client: String) { (self.slots, self.client) = (slots, client) }
        deinit {
            slots.taken.withLockedValue { taken in
                let mine = taken.byClient[client, default: 1] - 1
                (taken.count, taken.byClient[client]) = (taken.count - 1, mine > 0 ? mine : nil)
            }
        }
    }
}
