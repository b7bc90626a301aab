extension ImageRequest {
    /// The request as a path, `{region}/{size}/{rotation}/{quality}.{format}`, in the syntax
    /// ``init(path:)`` parses (as written, not the canonical form of ``Resolved/canonicalPath``).
    public var path: String {
        let regionText: String
        switch region {
        case .full: regionText = "full"
        case .square: regionText = "square"
        case .pixels(let x, let y, let w, let h): regionText = "\(x),\(y),\(w),\(h)"
        case .percent(let x, let y, let w, let h): regionText = "pct:" + [x, y, w, h].map(Self.number).joined(separator: ",")
        }
        let sizeText: String
        switch size {
        case .max: sizeText = "max"
        case .width(let w): sizeText = "\(w),"
        case .height(let h): sizeText = ",\(h)"
        case .percent(let p): sizeText = "pct:" + Self.number(p)
        case .exactly(let w, let h): sizeText = "\(w),\(h)"
        case .fitting(let w, let h): sizeText = "!\(w),\(h)"
        }
        let rotationText = (mirrored ? "!" : "") + Self.number(rotation)
        return "\(regionText)/\(upscales ? "^" : "")\(sizeText)/\(rotationText)/\(quality.rawValue).\(format.rawValue)"
    }
}

extension ImageRequest {
    /// Parses an IIIF Image API 2.1 request, `{region}/{size}/{rotation}/{quality}.{format}`
    /// (percent-decoded, no leading slash), as the 3.0 request that asks the same: 2.1's size `full`
    /// is 3.0's `max`; 2.1 has no `^`, and a server without `sizeAboveFull` (this one) refuses sizes
    /// larger than the region, as 3.0 does without `^`.
    /// - Throws: ``TileError/Code/invalidArgument`` for bad syntax (naming the parameter and the value).
    public init(version2Path path: String) throws(TileError) {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 4 else {
            throw TileError(
                .invalidArgument, "an image request has 4 segments, {region}/{size}/{rotation}/{quality}.{format}: \(Self.quoted(path))")
        }
        guard !parts[1].hasPrefix("^") else {
            throw Self.invalid("size", parts[1], "Image API 2.1 has no ^ (sizes above the full size are not offered)")
        }
        try self.init(region: parts[0], size: parts[1] == "full" ? "max" : parts[1], rotation: parts[2], qualityAndFormat: parts[3])
    }
}
