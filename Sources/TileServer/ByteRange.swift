/// What a request's `Range` (and `If-Range`) header asks of a representation of `length` bytes
/// (RFC 9110, 14.2 and 13.1.5): what lets a client resume a large download where it broke off.
///
/// One range is served as a `206` with `Content-Range`; a range starting past the end is a `416`. The
/// rest is answered with the whole representation, as the RFC allows: no `Range`, a unit other than
/// `bytes`, a header that does not parse, several ranges (a `multipart/byteranges` answer is not made),
/// or an `If-Range` validator that is not the representation's current one.
enum ByteRange: Equatable {
    /// The whole representation, a `200`.
    case whole
    /// These bytes, a `206`: never empty, within the representation.
    case part(Range<Int>)
    /// No byte of the representation is in the range asked for: a `416`.
    case unsatisfiable

    /// The range `range` (a `Range` header's value) asks for of `length` bytes. `ifRange`, the request's
    /// `If-Range`, must be the representation's strong `entityTag` for the range to be served at all. A
    /// date never matches: `Last-Modified` counts whole seconds, and a file rewritten within the second
    /// it was sent would have the same one (RFC 9110, 13.1.5: a date must be a strong validator); the
    /// entity tag, always sent, tells the versions apart.
    init(_ range: String?, ifRange: String? = nil, length: Int, entityTag: String?) {
        self = .whole
        guard let range, length >= 0 else { return }
        if let ifRange = ifRange.map({ String($0.trimmingSpaces) }), !ifRange.isEmpty {
            // A weak tag, or another, never matches.
            guard ifRange == entityTag else { return }
        }
        guard let specifier = Self.specifier(range) else { return }
        self = Self.resolve(specifier, length: length)
    }

    /// A range as written: `first-last`, `first-`, or `-suffix`. Numbers too large for an `Int` are
    /// `Int.max` (a position past any representation; `first` and `last` were compared as written).
    private enum Specifier {
        case from(Int, through: Int?)
        case suffix(Int)
    }

    /// The one range of `bytes=...`, or nil when the header is not one byte range.
    private static func specifier(_ header: String) -> Specifier? {
        guard let equals = header.firstIndex(of: "=") else { return nil }
        guard header[..<equals].trimmingSpaces.lowercased() == "bytes" else { return nil }
        // Empty list elements are allowed (RFC 9110, 5.6.1) and skipped.
        let ranges = header[header.index(after: equals)...].split(separator: ",").map(\.trimmingSpaces).filter { !$0.isEmpty }
        guard ranges.count == 1, let dash = ranges[0].firstIndex(of: "-") else { return nil }
        let (before, after) = (ranges[0][..<dash], ranges[0][ranges[0].index(after: dash)...])
        if before.isEmpty {
            guard let suffix = number(after) else { return nil }
            return .suffix(suffix)
        }
        guard let first = number(before) else { return nil }
        if after.isEmpty { return .from(first, through: nil) }
        guard let last = number(after), !isLess(after, than: before) else { return nil }
        return .from(first, through: last)
    }

    private static func resolve(_ specifier: Specifier, length: Int) -> ByteRange {
        switch specifier {
        case .from(let first, let last):
            guard first < length else { return .unsatisfiable }
            return .part(first..<(last.map { min($0, length - 1) } ?? (length - 1)) + 1)
        case .suffix(let count):
            guard count > 0 else { return .unsatisfiable }
            // An empty file: the range is satisfiable, and nothing of it can be a 206 (RFC 9110, 14.1.1).
            return length == 0 ? .whole : .part(max(0, length - count)..<length)
        }
    }

    /// Whether the decimal number `a` is less than `b` (both digits only), however many digits.
    private static func isLess(_ a: Substring, than b: Substring) -> Bool {
        let (a, b) = (a.drop { $0 == "0" }, b.drop { $0 == "0" })
        return a.count != b.count ? a.count < b.count : a < b
    }

    /// Decimal digits only (no sign, no spaces inside), saturating at `Int.max`.
    private static func number(_ text: Substring) -> Int? {
        guard !text.isEmpty else { return nil }
        var value = 0
        for byte in text.utf8 {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            let (times, overflow) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflowed) = times.addingReportingOverflow(Int(byte - UInt8(ascii: "0")))
            value = overflow || overflowed ? Int.max : sum
        }
        return value
    }
}

extension StringProtocol {
    /// Without the spaces and tabs at either end (HTTP's optional white space).
    fileprivate var trimmingSpaces: Substring {
        let isSpace = { (c: Character) in c == " " || c == "\t" }
        guard let start = firstIndex(where: { !isSpace($0) }), let end = lastIndex(where: { !isSpace($0) }) else { return "" }
        return Substring(self[start...end])
    }
}
