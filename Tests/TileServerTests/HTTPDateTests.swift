import Foundation
import Testing
@testable import TileServer

/// HTTP dates written and read on bytes, against RFC 9110's own examples and Foundation's
/// `DateFormatter` (what the server used before) over many instants.
@Suite("HTTP dates")
struct HTTPDateTests {
    /// RFC 9110, 5.6.7: the same instant in the three forms.
    static let examples = ["Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"]
    static let instant = 784_111_777

    @Test("the specification's three forms name one instant; it is written as IMF-fixdate")
    func specificationExamples() {
        for example in Self.examples { #expect(HTTPDate.seconds(example) == Self.instant, "\(example)") }
        #expect(HTTPDate.seconds("  Sun, 06 Nov 1994 08:49:37 GMT ") == Self.instant)
        #expect(HTTPDate.string(seconds: Self.instant) == Self.examples[0])
        #expect(HTTPDate.string(nanosecondsSinceEpoch: Int64(Self.instant) * 1_000_000_000 + 999_999_999) == Self.examples[0])
    }

    @Test(
        "not dates: a day the month lacks, hours past 23, other zones, lowercase names, missing zeros, trailing text",
        arguments: [
            "", "Sun, 31 Feb 1994 08:49:37 GMT", "Sun, 29 Feb 1900 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nov 1994 08:60:37 GMT", "Sun, 06 Nov 1994 08:49:37 UTC", "sun, 06 nov 1994 08:49:37 GMT", "Sun, 6 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37 GMT x", "Sun, 06 Nov 94 08:49:37 GMT", "Sunday, 06-Nov-1994 08:49:37 GMT", "Sun Nov 6 08:49:37 1994",
            "Sun, 00 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49 GMT", "1994-11-06T08:49:37Z"
        ])
    func notDates(text: String) {
        #expect(HTTPDate.seconds(text) == nil)
    }

    @Test("a leap day is a date in a leap year; RFC 850's two-digit years more than 50 years ahead are of the century before")
    func calendar() {
        #expect(HTTPDate.seconds("Tue, 29 Feb 2000 00:00:00 GMT") == 951_782_400)
        #expect(HTTPDate.seconds("Thu, 01 Jan 1970 00:00:00 GMT") == 0)
        let in2026 = 1_795_000_000  // 2026-11-17
        #expect(HTTPDate.seconds("Wednesday, 01-Jan-70 00:00:00 GMT", now: in2026) == 3_155_760_000)  // 2070 is within 50 years
        #expect(HTTPDate.seconds("Sunday, 06-Nov-94 08:49:37 GMT", now: in2026) == Self.instant)  // 2094 is past 2076: 1994
        #expect(HTTPDate.seconds("Tuesday, 01-Jan-30 00:00:00 GMT", now: in2026) == 1_893_456_000)  // 2030
        // Fifty years ahead to the day is kept; a day later is a century back (instants, not years, compared).
        let newYear2026 = 1_767_225_600  // 2026-01-01
        #expect(HTTPDate.seconds("Friday, 01-Jan-76 00:00:00 GMT", now: newYear2026) == 3_345_062_400)  // 2076-01-01
        #expect(HTTPDate.seconds("Saturday, 31-Dec-76 00:00:00 GMT", now: newYear2026) == 220_838_400)  // 1976-12-31
        // Near a century's end, a year of the next century's digits is ahead, not 99 years back.
        let endOf2099 = 4_102_358_400  // 2099-12-31
        #expect(HTTPDate.seconds("Friday, 01-Jan-00 00:00:00 GMT", now: endOf2099) == 4_102_444_800)  // 2100-01-01
    }

    @Test("the same text as Foundation's DateFormatter, read back to the same second, over 2,000 instants from 1970 to 2100")
    func sameAsDateFormatter() {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let seconds = Int.random(in: 0...4_102_444_800, using: &generator)
            let text = HTTPDate.string(seconds: seconds)
            #expect(text == formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds))))
            #expect(HTTPDate.seconds(text) == seconds, "\(text)")
        }
    }
}

/// Identifiers' percent-decoding on bytes, against Foundation's `removingPercentEncoding`.
@Suite("Percent-decoding")
struct PercentDecodingTests {
    @Test(
        "the same answer as Foundation's removingPercentEncoding: plain, escaped, multi-byte, malformed, not UTF-8",
        arguments: [
            "photo", "", "a%20b", "%41%42c", "%e2%82%AC", "caf%C3%A9", "%", "%4", "%G1", "a%2", "%e9", "%C3", "%00x", "100%25",
            "..%2Fetc", "é%C3%A9"
        ])
    func sameAsFoundation(text: String) {
        #expect(TileAddress.percentDecoded(text) == text.removingPercentEncoding, "\(text)")
    }

    @Test("a file time to the second below, as Last-Modified writes it, for any Int64 (Int64.min trapped: a subtraction)")
    func fileTimes() {
        #expect(HTTPDate.seconds(nanosecondsSinceEpoch: 1_999_999_999) == 1)
        #expect(HTTPDate.seconds(nanosecondsSinceEpoch: -1) == -1)
        #expect(HTTPDate.seconds(nanosecondsSinceEpoch: -1_000_000_000) == -1)
        #expect(HTTPDate.seconds(nanosecondsSinceEpoch: .max) == 9_223_372_036)
        #expect(HTTPDate.seconds(nanosecondsSinceEpoch: .min) == -9_223_372_037)
        #expect(HTTPDate.string(nanosecondsSinceEpoch: 784_111_777_500_000_000) == "Sun, 06 Nov 1994 08:49:37 GMT")
        _ = HTTPDate.string(nanosecondsSinceEpoch: .min)
    }
}
