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

/// A strong entity tag, made as the text naming what an answer shows is read, part by part, without
/// the text itself being made: 64-bit FNV-1a of the text; ``text`` is `"`, the hash in lowercase
/// hexadecimal, and `"`.
struct EntityTag {
    private var hash: UInt64 = 0xcbf2_9ce4_8422_2325

    init() {}

    /// The tag of a text naming what an answer shows.
    init(_ key: String) {
        combine(key.utf8)
    }

    /// The tag of an answer of a source's `version`, `made` (`stored`, or the quality it was encoded
    /// at), up to the request's variant (which the caller combines). Answers of an image with a colour
    /// profile carry it (their bytes differ from those of the releases before profiles were kept:
    /// another tag).
    init(version: String, made: String, profile: Bool) {
        combine(version.utf8)
        combine("|".utf8)
        combine(made.utf8)
        if profile { combine("|icc".utf8) }
        combine("|".utf8)
    }

    mutating func combine(_ bytes: some Sequence<UInt8>) {
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
    }

    /// The tag as sent.
    var text: String {
        var buffer = ByteBuffer()
        write(into: &buffer)
        return String(buffer: buffer)
    }

    /// Writes ``text``'s bytes.
    func write(into buffer: inout ByteBuffer) {
        let digits = hash == 0 ? 1 : (64 - hash.leadingZeroBitCount + 3) / 4
        buffer.writeInteger(UInt8(ascii: "\""))
        for shift in stride(from: (digits - 1) * 4, through: 0, by: -4) {
            let nibble = UInt8((hash >> UInt64(shift)) & 0xF)
            buffer.writeInteger(nibble < 10 ? 48 + nibble : 87 + nibble)
        }
        buffer.writeInteger(UInt8(ascii: "\""))
    }
}
