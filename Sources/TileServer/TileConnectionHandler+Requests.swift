import NIOCore
import NIOHTTP1

// Which requests the connection handler answers itself, and the event loop's memo of its cached answers.
extension TileConnectionHandler {
    /// Whether `head` is a request this handler may answer, whatever its path: `GET` or `HEAD` over
    /// HTTP/1.1, kept alive, no `Upgrade`, for a `Host` the server answers for. Its path must then name a
    /// DeepZoom tile or an IIIF image no access rule restricts (``isRestricted(_:)``), or `/health`.
    func isPlain(_ head: HTTPRequestHead) -> Bool {
        guard (head.method == .GET || head.method == .HEAD) && head.version == .http1_1 && head.isKeepAlive else { return false }
        // One pass over the fields, nothing made: one `Host`, no `Upgrade`.
        var host: String?
        for (name, value) in head.headers {
            if Self.isName(name, "host") {
                guard host == nil else { return false }
                host = value
            } else if Self.isName(name, "upgrade") {
                return false
            }
        }
        return host.map(allows(host:)) ?? false
    }

    /// Whether the field name `name` is `lowercased` (a lowercase ASCII name), in any case.
    private static func isName(_ name: String, _ lowercased: StaticString) -> Bool {
        guard name.utf8.count == lowercased.utf8CodeUnitCount else { return false }
        return lowercased.withUTF8Buffer { expected in
            zip(name.utf8, expected).allSatisfy { byte, lower in byte == lower || (byte ^ 0x20 == lower && lower >= 0x61 && lower <= 0x7A) }
        }
    }

    /// Whether a rule of ``access`` matches the image `address` names (an identifier it cannot read: no
    /// image, the routes say so).
    func isRestricted(_ address: TileAddress) -> Bool {
        guard let access, let image = address.image else { return false }
        if let last = lastLookedUp, image.id.utf8.elementsEqual(last.id.utf8) { return last.isRestricted }
        let isRestricted = TileAddress.percentDecoded(image.id).map { access.rule(for: $0) != nil } ?? true
        lastLookedUp = (String(image.id), isRestricted)
        return isRestricted
    }

    /// Whether the guard allows the request's one `Host` (the routes answer the others: 400, 421).
    private func allows(host: String) -> Bool {
        if host == allowedHost { return true }
        guard rules.allows(authority: host) else { return false }
        allowedHost = host
        return true
    }

    /// The event loop's entry for the request target `target` (``AnswerMemo``): the cached answer the
    /// cache would give, found without reading the path or taking a lock. Only images no access rule
    /// restricts are kept there (``memorize(_:for:removals:)`` is called for those alone).
    func memorized(_ target: String) -> (image: EncodedImage, route: ServerMetrics.Route)? {
        guard let memo else { return nil }
        let (cache, catalog) = (service.cache, service.catalog)
        guard
            let (image, route, touches) = memo.value.entry(
                for: target, removals: cache.removals, changes: catalog.readyChanges, now: .now,
                recheckInterval: catalog.sourceRecheckInterval)
        else { return nil }
        // Marked used in the cache now and then, as a look-up there would (its recency decides what it drops).
        if touches { _ = cache.image(for: TileAddress.pathString(of: target)) }
        return (image, route)
    }

    /// Keeps `image`, the cache's answer to the held request (`target`, at ``heldAddress``) in the event
    /// loop's memo; `removals` is the cache's count read before the look-up that found it.
    func memorize(_ image: EncodedImage, for target: String, removals: Int) {
        guard let memo, let ready = lastReady else { return }
        memo.value.keep(image, for: target, route: heldAddress.route, checked: ready.checked, removals: removals, changes: ready.changes)
    }
}
