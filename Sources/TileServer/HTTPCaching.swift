import Foundation
import NIOCore
import NIOConcurrencyHelpers

/// How long caches (browsers, Varnish, a CDN) may keep the server's answers before they ask again;
/// when they ask (`If-None-Match`, `If-Modified-Since`), an unchanged answer is a 304.
///
/// Images (tiles, regions) of complete pyramids change only when their source does, so they are kept
/// long; `info.json` and `.dzi` name URLs and limits that a deployment may change, so they are kept
/// briefly. Images of pyramids still being built are never kept (`no-store`).
public struct CachePolicy: Sendable, Hashable {
    /// Seconds an image of a complete pyramid may be kept (default one day).
    public var imageMaxAge: Int
    /// Seconds `info.json` and `.dzi` may be kept (default five minutes).
    public var documentMaxAge: Int

    public init(imageMaxAge: Int = 86_400, documentMaxAge: Int = 300) {
        (self.imageMaxAge, self.documentMaxAge) = (max(0, imageMaxAge), max(0, documentMaxAge))
    }

    var imageCacheControl: String { "public, max-age=\(imageMaxAge)" }
    var documentCacheControl: String { "public, max-age=\(documentMaxAge)" }
}

/// HTTP dates (IMF-fixdate, RFC 9110 5.6.7): the `Date` field made once a second for the whole
/// process, `Last-Modified` values, and `If-Modified-Since` read in any of the three forms HTTP allows.
enum HTTPDate {
    private static let current = NIOLockedValueBox<(second: Int, text: String, line: ByteBuffer)>((-1, "", ByteBuffer()))
    private static let formatters = NIOLockedValueBox<[DateFormatter]>(
        ["EEE, dd MMM yyyy HH:mm:ss 'GMT'", "EEEE, dd-MMM-yy HH:mm:ss 'GMT'", "EEE MMM d HH:mm:ss yyyy"].map { format in
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = format
            return formatter
        })

    static func now() -> String { update().text }

    /// `Date: …` and the blank line that ends a head.
    static func line() -> ByteBuffer { update().line }

    /// The HTTP date of a file time (nanoseconds since the epoch), to the second below.
    static func string(nanosecondsSinceEpoch nanoseconds: Int64) -> String {
        let seconds = nanoseconds >= 0 ? nanoseconds / 1_000_000_000 : (nanoseconds - 999_999_999) / 1_000_000_000
        return formatters.withLockedValue { $0[0].string(from: Date(timeIntervalSince1970: TimeInterval(seconds))) }
    }

    /// The date an HTTP date names (IMF-fixdate, RFC 850 or asctime form); nil for anything else.
    static func parse(_ text: String) -> Date? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        return formatters.withLockedValue { formatters in formatters.lazy.compactMap { $0.date(from: trimmed) }.first }
    }

    private static func update() -> (second: Int, text: String, line: ByteBuffer) {
        let date = Date()
        let second = Int(date.timeIntervalSince1970)
        if let current = current.withLockedValue({ $0.second == second ? $0 : nil }) { return current }
        let text = formatters.withLockedValue { $0[0].string(from: date) }
        let made = (second, text, ByteBuffer(string: "Date: \(text)\r\n\r\n"))
        current.withLockedValue { $0 = made }
        return made
    }
}
