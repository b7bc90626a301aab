import TileCore

/// What a request's path names, read once from its bytes: the server's one reader of its path grammar.
/// The connection handler, the routes, the metrics' labels and the entity tags all take it from here.
///
/// - `/iiif/{3|2}/{id}`, `/iiif/{3|2}/{id}/info.json`, `/iiif/{3|2}/{id}/{region}/{size}/{rotation}/{quality}.{format}`
/// - `/dzi/{id}.dzi`, `/dzi/{id}_files/{level}/{column}_{row}.{jpg|png}`
/// - `/health`, `/ready`, `/metrics`, `/`, `/view/{id}`, `/images/{id}`
///
/// Segments are the bytes between `/`s, empty ones skipped, as the router splits a path. An
/// identifier is kept as written (percent-encoded); an IIIF request's parameters are parsed when asked
/// for (``ImageAddress/target()``), once.
struct TileAddress: Sendable {
    /// The kind of request, as the metrics count it.
    let route: ServerMetrics.Route
    /// The image and what is asked of it, for a DeepZoom tile or an IIIF image request; nil otherwise.
    let image: ImageAddress?

    /// The address of a request target's path (without its query), read in one pass over its bytes.
    init(path: Substring) {
        var segments = Segments()
        var isASCII = true
        let utf8 = path.utf8
        var start = utf8.startIndex
        var index = start
        while index != utf8.endIndex {
            let byte = utf8[index]
            if byte == UInt8(ascii: "/") {
                if start != index { segments.append(path[start..<index]) }
                start = utf8.index(after: index)
            } else if byte >= 0x80 {
                isASCII = false
            }
            utf8.formIndex(after: &index)
        }
        if start != utf8.endIndex { segments.append(path[start...]) }
        // Past ASCII, a `/` may be part of a character (a combining mark after it), which the router does
        // not split at: such a path names no image here (the router's segments are not these).
        var isPlain = isASCII
        if !isASCII {
            let routers = path.split(separator: "/")
            isPlain = routers.elementsEqual(Self.segments(of: path))
            if !isPlain {
                // The route (the metrics' label) is the one the router's segments take.
                segments = Segments()
                for segment in routers { segments.append(segment) }
            }
        }
        (route, image) = Self.parse(segments, path: path, isPlain: isPlain)
    }

    /// `path`'s segments, split at every `/` byte, empty ones skipped: the reference
    /// ``init(path:)``'s one pass keeps the parts of.
    static func segments(of path: Substring) -> [Substring] {
        var segments: [Substring] = []
        let utf8 = path.utf8
        var start = utf8.startIndex
        for index in utf8.indices where utf8[index] == UInt8(ascii: "/") {
            if start != index { segments.append(path[start..<index]) }
            start = utf8.index(after: index)
        }
        if start != utf8.endIndex { segments.append(path[start...]) }
        return segments
    }

    /// What the grammar looks at of a path's segments, kept without an array: how many there are, the
    /// first four and the last.
    struct Segments {
        private(set) var count = 0
        private var leading: (Substring, Substring, Substring, Substring) = ("", "", "", "")
        /// The last segment ("" when there is none).
        private(set) var last: Substring = ""

        mutating func append(_ segment: Substring) {
            switch count {
            case 0: leading.0 = segment
            case 1: leading.1 = segment
            case 2: leading.2 = segment
            case 3: leading.3 = segment
            default: break
            }
            last = segment
            count += 1
        }

        /// Segment `index`, one of the first four.
        subscript(index: Int) -> Substring {
            switch index {
            case 0: leading.0
            case 1: leading.1
            case 2: leading.2
            default: leading.3
            }
        }
    }

    /// A request target's path, without its query: what the routes and the cache key answers by.
    static func path(of target: String) -> Substring {
        guard let query = target.utf8.firstIndex(of: UInt8(ascii: "?")) else { return target[...] }
        return target[..<query]
    }

    /// ``path(of:)`` as a string: the target itself when it has no query (nothing copied).
    static func pathString(of target: String) -> String {
        target.utf8.contains(UInt8(ascii: "?")) ? String(path(of: target)) : target
    }

    private static func parse(_ s: Segments, path: Substring, isPlain: Bool) -> (ServerMetrics.Route, ImageAddress?) {
        guard s.count > 0 else { return (.pages, nil) }
        let first = s[0]
        switch first {
        case "iiif" where s.count > 1:
            let version: IIIFVersion? = s[1] == "3" ? .v3 : s[1] == "2" ? .v2 : nil
            if s.count <= 3 || s.last == "info.json" { return (.iiifInfo, nil) }
            guard let version, s.count == 7, isPlain else { return (.iiifImage, nil) }
            return (.iiifImage, ImageAddress(id: s[2], kind: .iiif(version, parameters: path[s[3].startIndex...])))
        case "dzi" where s.count > 1:
            if s.last.utf8.count > 4, s.last.utf8.reversed().starts(with: "izd.".utf8) { return (.dziDescriptor, nil) }
            guard s.count == 4, isPlain, s[1].utf8.count > 6, s[1].utf8.reversed().starts(with: "selif_".utf8),
                let address = DeepZoomTileAddress(level: s[2], tile: s[3])
            else { return (.dziTile, nil) }
            let files = s[1]
            return (.dziTile, ImageAddress(id: files[..<files.utf8.index(files.endIndex, offsetBy: -6)], kind: .deepZoom(address, s[2], s[3])))
        case "images" where s.count > 1: return (.upload, nil)
        case "view" where s.count > 1: return (.pages, nil)
        case "health" where s.count == 1: return (.health, nil)
        case "ready" where s.count == 1: return (.ready, nil)
        case "metrics" where s.count == 1: return (.metrics, nil)
        default: return (.other, nil)
        }
    }
}

/// The image a DeepZoom tile or IIIF image request names, and what it asks of it (``TileAddress``).
struct ImageAddress: Sendable {
    enum Kind: Sendable {
        /// A DeepZoom tile, with its two segments as written.
        case deepZoom(DeepZoomTileAddress, Substring, Substring)
        /// An IIIF image request: `{region}/{size}/{rotation}/{quality}.{format}` as written.
        case iiif(IIIFVersion, parameters: Substring)
    }

    /// The identifier as written (percent-encoded).
    let id: Substring
    let kind: Kind

    /// What is asked of the image.
    /// - Throws: an IIIF request's parse errors (``TileCore/TileError/Code/invalidArgument``, `.unsupported`).
    func target() throws(TileError) -> TileService.Target {
        switch kind {
        case .deepZoom(let address, _, _): return .deepZoom(address)
        case .iiif(let version, let parameters): return .iiif(try version.request(String(parameters)))
        }
    }

    /// The IIIF profile `Link` an answer carries; nil for a DeepZoom tile.
    var link: String? {
        guard case .iiif(let version, _) = kind else { return nil }
        return version.profileLink
    }

    /// The request after the identifier, as it makes the entity tag: `dzi/{level}/{tile}`,
    /// `{parameters}` (IIIF 3.0) or `iiif2/{parameters}`.
    var variant: String {
        var text = ""
        addVariant { text += String(decoding: $0, as: UTF8.self) }
        return text
    }

    /// Adds ``variant``'s bytes to `tag` without making the text.
    func addVariant(to tag: inout EntityTag) {
        addVariant { tag.combine($0) }
    }

    private func addVariant(_ add: (Substring.UTF8View) -> Void) {
        switch kind {
        case .deepZoom(_, let level, let tile):
            add("dzi/".utf8[...])
            add(level.utf8)
            add("/".utf8[...])
            add(tile.utf8)
        case .iiif(let version, let parameters):
            if version == .v2 { add("iiif2/".utf8[...]) }
            add(parameters.utf8)
        }
    }
}

extension TileAddress {
    /// `text` with its `%XX` escapes decoded (RFC 3986 2.1), on its bytes; nil when an escape is
    /// malformed or the decoded bytes are not UTF-8, as Foundation's `removingPercentEncoding` answers
    /// (which goes through CFString, whose per-thread data Foundation keeps on the server's threads).
    static func percentDecoded(_ text: some StringProtocol) -> String? {
        func value(_ digit: UInt8) -> UInt8? {
            switch digit {
            case 48...57: digit - 48
            case 65...70: digit - 55
            case 97...102: digit - 87
            default: nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(value), let low = iterator.next().flatMap(value) else { return nil }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }
}

/// The versions of the IIIF Image API served, each under its own path (`/iiif/3/...`, `/iiif/2/...`).
enum IIIFVersion: CaseIterable, Sendable {
    case v3, v2

    var path: String { self == .v3 ? "iiif/3" : "iiif/2" }
    var profileLink: String { "<http://iiif.io/api/image/\(self == .v3 ? 3 : 2)/level2.json>;rel=\"profile\"" }
    var context: String { self == .v3 ? IIIFImageInformation.context : IIIFImageInformation2.context }

    func request(_ path: String) throws(TileError) -> ImageRequest {
        self == .v3 ? try ImageRequest(path: path) : try ImageRequest(version2Path: path)
    }
}
