import Testing
@testable import TileServer

/// The access log's lines, against the Common Log Format as nginx and Apache write it.
@Suite("Access log")
struct AccessLogTests {
    @Test("dates in the format's own form: a well-known instant, the epoch, a leap day")
    func dates() {
        // 1,000,000,000 s after the epoch is 2001-09-09 01:46:40 UTC; 951,782,400 is 2000-02-29 00:00:00 UTC.
        #expect(String(decoding: AccessLog.DateText.format(1_000_000_000), as: UTF8.self) == "09/Sep/2001:01:46:40 +0000")
        #expect(String(decoding: AccessLog.DateText.format(0), as: UTF8.self) == "01/Jan/1970:00:00:00 +0000")
        #expect(String(decoding: AccessLog.DateText.format(951_782_400), as: UTF8.self) == "29/Feb/2000:00:00:00 +0000")
    }

    @Test("one line per request: client, date, request line, status, bytes ('-' for none); bytes that could forge a line escaped")
    func lines() {
        var text: [UInt8] = []
        let date = Array("10/Oct/2000:13:55:36 -0700".utf8)
        AccessLog.append(
            .init(seconds: 0, client: "127.0.0.1", method: "GET", target: "/apache_pb.gif", version: (1, 0), status: 200, bytes: 2326),
            date: date, to: &text)
        AccessLog.append(
            .init(seconds: 0, client: nil, method: "HEAD", target: "/a\"b\n127.0.0.1 c\\é", version: (1, 1), status: 404, bytes: 0),
            date: date, to: &text)
        // The first is Apache's documentation's example of the Common Log Format, but for its user field.
        #expect(
            String(decoding: text, as: UTF8.self) == """
                127.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326
                - - - [10/Oct/2000:13:55:36 -0700] "HEAD /a\\x22b\\x0A127.0.0.1\\x20c\\x5C\\xC3\\xA9 HTTP/1.1" 404 -

                """)
    }

    @Test("combined: the common line, then the referer and user agent quoted ('-' for none), their quotes and controls escaped, spaces kept")
    func combined() {
        var text: [UInt8] = []
        let date = Array("10/Oct/2000:13:55:36 -0700".utf8)
        AccessLog.append(
            .init(
                seconds: 0, client: "127.0.0.1", method: "GET", target: "/apache_pb.gif", version: (1, 0), status: 200, bytes: 2326,
                referer: "http://www.example.com/start.html", userAgent: "Mozilla/4.08 [en] (Win98; I ;Nav)"),
            date: date, format: .combined, to: &text)
        AccessLog.append(
            .init(
                seconds: 0, client: "::1", method: "GET", target: "/", version: (1, 1), status: 304, bytes: 0, referer: nil,
                userAgent: "a \"b\"\n"),
            date: date, format: .combined, to: &text)
        // The first is Apache's documentation's example of the Combined Log Format, but for its user field.
        #expect(
            String(decoding: text, as: UTF8.self) == """
                127.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326 "http://www.example.com/start.html" "Mozilla/4.08 [en] (Win98; I ;Nav)"
                ::1 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" 304 - "-" "a \\x22b\\x22\\x0A"

                """)
    }
}
