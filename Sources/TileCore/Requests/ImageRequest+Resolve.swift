import Foundation

extension ImageRequest {
    /// Limits on the size of what a request returns: `maxWidth`, `maxHeight` and `maxArea` of the
    /// image information document. Requests past them are refused before any work.
    public struct Limits: Sendable, Hashable {
        public var maxWidth: Int?
        /// When `nil` and ``maxWidth`` is set, ``maxWidth`` (as the specification says).
        public var maxHeight: Int?
        public var maxArea: Int?

        public init(maxWidth: Int? = nil, maxHeight: Int? = nil, maxArea: Int? = nil) {
            self.maxWidth = maxWidth
            self.maxHeight = maxHeight
            self.maxArea = maxArea
        }

        /// 8192 pixels a side and 16.8 megapixels (64 MiB of RGBA): `max` of a 324-megapixel image is a
        /// 4096x4096 picture.
        public static let `default` = Limits(maxWidth: 8192, maxHeight: 8192, maxArea: 1 << 24)

        var effectiveMaxHeight: Int? { maxHeight ?? maxWidth }

        /// Whether an image of `width` x `height` pixels is within these limits.
        public func allows(_ width: Int, _ height: Int) -> Bool {
            if let maxWidth, width > maxWidth { return false }
            if let maxHeight = effectiveMaxHeight, height > maxHeight { return false }
            if let maxArea {
                let (area, overflows) = width.multipliedReportingOverflow(by: height)
                if overflows || area > maxArea { return false }
            }
            return true
        }

        /// The largest size with the aspect ratio of `width` x `height` within the limits, never
        /// larger than `width` x `height` unless `upscales`.
        func largest(_ width: Int, _ height: Int, upscales: Bool) -> (Int, Int) {
            var scale = upscales ? Double.infinity : 1
            if let maxWidth { scale = min(scale, Double(maxWidth) / Double(width)) }
            if let maxHeight = effectiveMaxHeight { scale = min(scale, Double(maxHeight) / Double(height)) }
            if let maxArea { scale = min(scale, (Double(maxArea) / (Double(width) * Double(height))).squareRoot()) }
            if !scale.isFinite { scale = 1 }
            // The tiny epsilon keeps 1000/18000 * 18000 from flooring to 999.
            var w = max(1, ImageRequest.integer(Double(width) * scale + 1e-9, .down))
            var h = max(1, ImageRequest.integer(Double(height) * scale + 1e-9, .down))
            while !allows(w, h) && (w > 1 || h > 1) {  // floating point at the edge
                w = max(1, w - 1)
                h = max(1, ImageRequest.integer(Double(w) * Double(height) / Double(width), .down))
            }
            return (w, h)
        }
    }

    /// A request applied to an image of a given size.
    public struct Resolved: Sendable, Hashable {
        /// The region in full-image pixels (display orientation), cropped to the image.
        public var x: Int
        public var y: Int
        public var width: Int
        public var height: Int
        /// The size the region is scaled to, before rotation.
        public var scaledWidth: Int
        public var scaledHeight: Int
        /// Clockwise quarter turns, 0...3, applied after mirroring.
        public var quarterTurns: Int
        public var mirrored: Bool
        public var quality: Quality
        public var format: Format
        /// `{region}/{size}/{rotation}/{quality}.{format}` in the specification's canonical form.
        public var canonicalPath: String

        /// The size of the image returned: the scaled size, turned.
        public var outputWidth: Int { quarterTurns % 2 == 0 ? scaledWidth : scaledHeight }
        public var outputHeight: Int { quarterTurns % 2 == 0 ? scaledHeight : scaledWidth }
    }

    /// Applies the request to an image of `width` x `height` pixels (display orientation).
    /// - Throws: ``TileError/Code/invalidArgument`` for a region outside the image, a size larger than
    ///   the region without `^`, an empty result, or a rotation outside 0...360; ``TileError/Code/tooLarge``
    ///   past `limits`;
    ///   ``TileError/Code/unsupported`` for a rotation other than a multiple of 90 degrees,
    ///   or a format other than `jpg`, `png`, `webp` and `avif`.
    public func resolve(width: Int, height: Int, limits: Limits = .default) throws(TileError) -> Resolved {
        guard width > 0, height > 0 else { throw TileError(.invalidArgument, "the image is empty (\(width)x\(height))") }
        let (x, y, w, h) = try resolveRegion(width, height)
        let (sw, sh, isMax) = try resolveSize(w, h, limits)
        guard (0...360).contains(rotation) else {  // a request's text is checked when parsed; a caller's here
            throw TileError(.invalidArgument, "rotation \(Self.number(rotation)): degrees must be within 0...360")
        }
        guard rotation.truncatingRemainder(dividingBy: 90) == 0 else {
            throw TileError(.unsupported, "rotation \(Self.number(rotation)): only multiples of 90 degrees are offered")
        }
        guard format.isOffered else {
            throw TileError(.unsupported, "format \(format.rawValue) is not offered (jpg, png, webp, avif)")
        }
        let turns = Int(rotation / 90) % 4
        let regionText = x == 0 && y == 0 && w == width && h == height ? "full" : "\(x),\(y),\(w),\(h)"
        let sizeText = isMax ? (sw > w || sh > h ? "^max" : "max") : (sw > w || sh > h ? "^" : "") + "\(sw),\(sh)"
        let rotationText = (mirrored ? "!" : "") + Self.number(rotation)
        return Resolved(
            x: x, y: y, width: w, height: h, scaledWidth: sw, scaledHeight: sh, quarterTurns: turns, mirrored: mirrored,
            quality: quality, format: format,
            canonicalPath: "\(regionText)/\(sizeText)/\(rotationText)/\(quality.rawValue).\(format.rawValue)")
    }

    /// `value` rounded to the nearest integer, clamped to +-2^53 (no image or limit comes near it) and
    /// NaN read as 0: a percentage from a request (`pct:1e30`) or from a caller never traps.
    static func integer(_ value: Double, _ rule: FloatingPointRoundingRule = .toNearestOrAwayFromZero) -> Int {
        guard !value.isNaN else { return 0 }
        return Int(Swift.max(-0x1p53, Swift.min(0x1p53, value.rounded(rule))))
    }

    private func resolveRegion(_ width: Int, _ height: Int) throws(TileError) -> (Int, Int, Int, Int) {
        let x: Int, y: Int, w: Int, h: Int
        switch region {
        case .full:
            return (0, 0, width, height)
        case .square:
            let side = min(width, height)
            return ((width - side) / 2, (height - side) / 2, side, side)
        case .pixels(let px, let py, let pw, let ph):
            (x, y, w, h) = (px, py, pw, ph)
        case .percent(let px, let py, let pw, let ph):
            guard [px, py, pw, ph].allSatisfy({ $0.isFinite && $0 >= 0 }) else {
                throw TileError(.invalidArgument, "region \(describe(region)): percentages must be finite and not negative")
            }
            func scaled(_ p: Double, _ total: Int) -> Int { Self.integer(p * Double(total) / 100) }
            (x, y, w, h) = (scaled(px, width), scaled(py, height), scaled(pw, width), scaled(ph, height))
        }
        guard w > 0, h > 0 else {
            throw TileError(.invalidArgument, "region \(describe(region)) is empty in a \(width)x\(height) image")
        }
        guard x < width, y < height else {
            throw TileError(.invalidArgument, "region \(describe(region)) is outside the \(width)x\(height) image")
        }
        return (x, y, min(w, width - x), min(h, height - y))  // cropped at the image's edge
    }

    /// The largest side a size parameter can write (nine digits): a size worked out past it (a
    /// percentage, an aspect ratio) is refused whatever the limits, and `max` stays within it, so that
    /// every request resolved has a canonical form that is itself a request.
    public static let largestSide = 999_999_999

    private func resolveSize(_ w: Int, _ h: Int, _ limits: Limits) throws(TileError) -> (Int, Int, Bool) {
        let size = try resolveScaledSize(w, h, limits)
        guard size.0 <= Self.largestSide, size.1 <= Self.largestSide else {
            throw TileError(
                .tooLarge, "size \(describe(self.size)) gives \(size.0)x\(size.1), past the largest a request can name (\(Self.largestSide) a side)")
        }
        return size
    }

    private func resolveScaledSize(_ w: Int, _ h: Int, _ limits: Limits) throws(TileError) -> (Int, Int, Bool) {
        let sw: Int, sh: Int
        func aspect(_ value: Int, _ numerator: Int, _ denominator: Int) -> Int {
            max(1, Self.integer(Double(value) * Double(numerator) / Double(denominator)))
        }
        switch size {
        case .max:
            // As large as the limits allow, and never past what a request can name.
            var bounded = limits
            (bounded.maxWidth, bounded.maxHeight) = (
                min(limits.maxWidth ?? Self.largestSide, Self.largestSide), min(limits.effectiveMaxHeight ?? Self.largestSide, Self.largestSide)
            )
            let (mw, mh) = bounded.largest(w, h, upscales: upscales)
            return (mw, mh, true)
        case .width(let width):
            (sw, sh) = (width, aspect(width, h, w))
        case .height(let height):
            (sw, sh) = (aspect(height, w, h), height)
        case .percent(let n):
            guard n.isFinite, n >= 0 else {
                throw TileError(.invalidArgument, "size \(describe(size)): the percentage must be finite and not negative")
            }
            sw = Self.integer(Double(w) * n / 100)
            sh = Self.integer(Double(h) * n / 100)
        case .exactly(let width, let height):
            (sw, sh) = (width, height)
        case .fitting(let width, let height):
            var scale = min(Double(width) / Double(w), Double(height) / Double(h))
            if !upscales { scale = min(scale, 1) }
            sw = min(width, max(1, Self.integer(Double(w) * scale)))
            sh = min(height, max(1, Self.integer(Double(h) * scale)))
        }
        let text = describe(size)
        guard sw >= 1, sh >= 1 else { throw TileError(.invalidArgument, "size \(text) of a \(w)x\(h) region is empty") }
        guard upscales || (sw <= w && sh <= h) else {
            throw TileError(
                .invalidArgument, "size \(text) is larger than the \(w)x\(h) region (\(sw)x\(sh)); ^ allows upscaling")
        }
        guard limits.allows(sw, sh) else {
            throw TileError(.tooLarge, "size \(text) gives \(sw)x\(sh), past the limits (\(describe(limits)))")
        }
        return (sw, sh, false)
    }

    private func describe(_ region: Region) -> String {
        switch region {
        case .full: "full"
        case .square: "square"
        case .pixels(let x, let y, let w, let h): "\(x),\(y),\(w),\(h)"
        case .percent(let x, let y, let w, let h): "pct:\([x, y, w, h].map(Self.number).joined(separator: ","))"
        }
    }

    private func describe(_ size: Size) -> String {
        let prefix = upscales ? "^" : ""
        switch size {
        case .max: return prefix + "max"
        case .width(let w): return prefix + "\(w),"
        case .height(let h): return prefix + ",\(h)"
        case .percent(let n): return prefix + "pct:" + Self.number(n)
        case .exactly(let w, let h): return prefix + "\(w),\(h)"
        case .fitting(let w, let h): return prefix + "!\(w),\(h)"
        }
    }

    private func describe(_ limits: Limits) -> String {
        [
            limits.maxWidth.map { "maxWidth \($0)" }, limits.effectiveMaxHeight.map { "maxHeight \($0)" },
            limits.maxArea.map { "maxArea \($0)" }
        ].compactMap { $0 }.joined(separator: ", ")
    }

    /// A number as the canonical form writes it: an integer when it is one, else the shortest decimal
    /// with a leading 0 and no trailing zeros.
    static func number(_ value: Double) -> String {
        if value == value.rounded(), abs(value) < 1e15 { return String(Int(value)) }
        var text = String(value)  // Swift's shortest round-trip form, e.g. 22.5, 0.9
        if text.contains("e") { text = String(format: "%.10f", value) }
        while text.contains("."), text.hasSuffix("0") { text.removeLast() }
        if text.hasSuffix(".") { text.removeLast() }
        return text
    }
}
