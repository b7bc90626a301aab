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
