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
///
/// Written and read on bytes, with the C library's `gmtime_r` and a plain calendar: no `DateFormatter`
/// (whose per-thread data Foundation keeps on every server thread that formats, and which LeakSanitizer
/// reported on threads that end), no locale, no time zone but UTC.
enum HTTPDate {
    private static let current = NIOLockedValueBox<(second: Int, text: String, line: ByteBuffer)>((-1, "", ByteBuffer()))
    static let weekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    static let longWeekdays = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
    static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    static func now() -> String { update().text }

    /// `Date: …` and the blank line that ends a head.
    static func line() -> ByteBuffer { update().line }

    /// The HTTP date of a file time (nanoseconds since the epoch), to the second below.
    static func string(nanosecondsSinceEpoch nanoseconds: Int64) -> String {
        string(seconds: seconds(nanosecondsSinceEpoch: nanoseconds))
    }

    /// A file time (nanoseconds since the epoch) to the second below, as ``string(nanosecondsSinceEpoch:)``
    /// writes it; any `Int64` (a time held at `Int64.min` too: no subtraction that could overflow).
    static func seconds(nanosecondsSinceEpoch nanoseconds: Int64) -> Int {
        let (seconds, rest) = nanoseconds.quotientAndRemainder(dividingBy: 1_000_000_000)
        return Int(rest < 0 ? seconds - 1 : seconds)
    }

    /// `Sun, 06 Nov 1994 08:49:37 GMT` for a time in seconds since 1970.
    static func string(seconds: Int) -> String {
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let year = String(parts.tm_year + 1900)
        return "\(weekdays[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) "
            + String(repeating: "0", count: max(0, 4 - year.count)) + year
            + " \(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }

    /// The date an HTTP date names (IMF-fixdate, RFC 850 or asctime form); nil for anything else.
    static func parse(_ text: String) -> Date? {
        seconds(text).map { Date(timeIntervalSince1970: TimeInterval($0)) }
    }

    /// The seconds since 1970 an HTTP date names: `Sun, 06 Nov 1994 08:49:37 GMT` (IMF-fixdate),
    /// `Sunday, 06-Nov-94 08:49:37 GMT` (RFC 850: a two-digit year more than 50 years ahead of `now` is of
    /// the century before) or `Sun Nov  6 08:49:37 1994` (asctime); nil for anything else (a day the
    /// month does not have included). Spaces around it are ignored.
    static func seconds(_ text: String, now: Int = time(nil)) -> Int? {
        var scanner = DateScanner(Array(text.utf8))
        scanner.skipSpaces()
        var fields: (year: Int, month: Int, day: Int, time: (Int, Int, Int))?
        let twoDigitYear = scanner.take(longWeekdays) != nil  // RFC 850
        if twoDigitYear {
            fields = scanner.rfc850()
        } else if scanner.take(weekdays) != nil {
            fields = scanner.peek(",") ? scanner.fixdate() : scanner.asctime()
        }
        scanner.skipSpaces()
        guard var fields, scanner.isAtEnd, (1...12).contains(fields.month) else { return nil }
        func instant() -> Int {
            daysSince1970(year: fields.year, month: fields.month, day: fields.day) * 86_400 + fields.time.0 * 3600 + fields.time.1 * 60
                + fields.time.2
        }
        if twoDigitYear {
            // RFC 9110 5.6.7: the latest year of those digits that is not more than 50 years after now.
            let digits = fields.year
            fields.year = (1970 + now / 31_556_952) / 100 * 100 + 100 + digits
            while instant() > now + 50 * 31_556_952 { fields.year -= 100 }
        }
        guard fields.day >= 1, fields.day <= daysIn(month: fields.month, of: fields.year), fields.time.0 < 24, fields.time.1 < 60,
            fields.time.2 <= 60
        else { return nil }
        return instant()
    }

    static func daysIn(month: Int, of year: Int) -> Int {
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        return [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
    }

    /// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (the civil-from-days inverse:
    /// years counted from March, so that the leap day ends a year).
    static func daysSince1970(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    private static func update() -> (second: Int, text: String, line: ByteBuffer) {
        let second = time(nil)
        if let current = current.withLockedValue({ $0.second == second ? $0 : nil }) { return current }
        let text = string(seconds: second)
        let made = (second, text, ByteBuffer(string: "Date: \(text)\r\n\r\n"))
        current.withLockedValue { $0 = made }
        return made
    }
}

/// ``HTTPDate/line()`` as one holder (a connection) keeps it: looked up again only when the second
/// changes.
struct DateLine {
    private var second = -1
    private var made = ByteBuffer()

    /// `Date: …` and the blank line that ends a head, for this second.
    mutating func line() -> ByteBuffer {
        let now = time(nil)
        if now != second { (second, made) = (now, HTTPDate.line()) }
        return made
    }
}

/// Reads the fields of an HTTP date, left to right.
private struct DateScanner {
    private let bytes: [UInt8]
    private var index = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var isAtEnd: Bool { index == bytes.count }

    mutating func skipSpaces() { while index < bytes.count, bytes[index] == 32 { index += 1 } }

    func peek(_ literal: String) -> Bool { bytes[index...].starts(with: literal.utf8) }

    /// Takes `literal` if it comes next.
    mutating func take(_ literal: String) -> Bool {
        guard peek(literal) else { return false }
        index += literal.utf8.count
        return true
    }

    /// Takes the first of `names` that comes next (exact case); its index.
    mutating func take(_ names: [String]) -> Int? {
        for (i, name) in names.enumerated() where take(name) { return i }
        return nil
    }

    /// Takes exactly `count` digits.
    mutating func number(_ count: Int) -> Int? {
        guard index + count <= bytes.count else { return nil }
        var value = 0
        for byte in bytes[index..<index + count] {
            guard (48...57).contains(byte) else { return nil }
            value = value * 10 + Int(byte - 48)
        }
        index += count
        return value
    }

    /// `HH:MM:SS`.
    mutating func time() -> (Int, Int, Int)? {
        guard let h = number(2), take(":"), let m = number(2), take(":"), let s = number(2) else { return nil }
        return (h, m, s)
    }

    /// After the weekday: `, 06 Nov 1994 08:49:37 GMT`.
    mutating func fixdate() -> (year: Int, month: Int, day: Int, time: (Int, Int, Int))? {
        guard take(", "), let day = number(2), take(" "), let month = take(HTTPDate.months), take(" "), let year = number(4),
            take(" "), let time = time(), take(" GMT")
        else { return nil }
        return (year, month + 1, day, time)
    }

    /// After the weekday: `, 06-Nov-94 08:49:37 GMT` (the year's two digits as the year).
    mutating func rfc850() -> (year: Int, month: Int, day: Int, time: (Int, Int, Int))? {
        guard take(", "), let day = number(2), take("-"), let month = take(HTTPDate.months), take("-"), let twoDigits = number(2),
            take(" "), let time = time(), take(" GMT")
        else { return nil }
        return (twoDigits, month + 1, day, time)
    }

    /// After the weekday: ` Nov  6 08:49:37 1994` (the day padded with a space).
    mutating func asctime() -> (year: Int, month: Int, day: Int, time: (Int, Int, Int))? {
        guard take(" "), let month = take(HTTPDate.months), take(" ") else { return nil }
        let day: Int?
        if take(" ") { day = number(1) } else { day = number(2) }
        guard let day, take(" "), let time = time(), take(" "), let year = number(4) else { return nil }
        return (year, month + 1, day, time)
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
