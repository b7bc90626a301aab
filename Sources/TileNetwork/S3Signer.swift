public import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The keys of an S3-compatible object store's user: an access key, its secret, and for temporary
/// credentials a session token.
public struct S3Credentials: Sendable, Hashable {
    public var accessKeyID: String
    public var secretAccessKey: String
    /// A temporary credential's token, sent as `x-amz-security-token` (and signed); nil for long-term keys.
    public var sessionToken: String?

    public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
        (self.accessKeyID, self.secretAccessKey, self.sessionToken) = (accessKeyID, secretAccessKey, sessionToken)
    }
}

/// AWS Signature Version 4 as S3 and the stores that speak its API (Ceph RGW, OpenStack Swift's
/// `s3api`, MinIO, R2) check it: requests signed in their `Authorization` header, and presigned URLs
/// that carry their signature in the query.
///
/// A request is described by its method, host, path and query as they are before encoding: the
/// signer encodes them as S3 does (``canonicalPath(_:)``, ``canonicalQuery(_:)``), and the request must
/// be sent with exactly those bytes. Dates are formatted by hand in UTC (no `DateFormatter`).
///
/// The steps are those of AWS's documentation: a canonical request, the string to sign (its SHA-256
/// with the date and scope), a signing key derived from the secret by four HMAC-SHA256 steps (date,
/// region, service, `aws4_request`), and the signature, the HMAC of the string to sign in hexadecimal.
public struct S3Signer: Sendable {
    public var credentials: S3Credentials
    /// The region signed for (`us-east-1` where a store has no regions).
    public var region: String
    /// The service signed for: `s3`.
    public var service = "s3"

    /// The SHA-256 of an empty body, for requests without one.
    public static let emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    /// What stands for the body's hash when the body is not signed (presigned URLs; streamed uploads over TLS).
    public static let unsignedPayload = "UNSIGNED-PAYLOAD"
    static let algorithm = "AWS4-HMAC-SHA256"

    public init(credentials: S3Credentials, region: String) {
        self.credentials = credentials
        self.region = region
    }

    /// The headers a request adds to be signed: `x-amz-date`, `x-amz-content-sha256` (`payloadHash`:
    /// the body's SHA-256 in hexadecimal, ``emptyPayloadHash`` or ``unsignedPayload``),
    /// `x-amz-security-token` for temporary credentials, and `Authorization`. Every header of
    /// `headers` and `host` is signed; the request must send them as given.
    public func authorizationHeaders(
        method: String, host: String, path: String, query: [(String, String?)] = [], headers: [(String, String)] = [],
        payloadHash: String, date: Date
    ) -> [(String, String)] {
        let stamp = Self.timestamp(date)
        var added = [("x-amz-date", stamp), ("x-amz-content-sha256", payloadHash)]
        if let token = credentials.sessionToken { added.append(("x-amz-security-token", token)) }
        let request = canonicalRequest(
            method: method, path: path, query: query, headers: [("host", host)] + headers + added, payloadHash: payloadHash)
        let signature = signature(stringToSign: stringToSign(canonicalRequest: request.text, date: date), date: date)
        let authorization =
            "\(Self.algorithm) Credential=\(credentials.accessKeyID)/\(scope(date)),SignedHeaders=\(request.signedHeaders),Signature=\(signature)"
        return added + [("Authorization", authorization)]
    }

    /// A presigned URL's query (without `?`): `query`'s parameters and the signature's (`X-Amz-Algorithm`,
    /// `X-Amz-Credential`, `X-Amz-Date`, `X-Amz-Expires`, `X-Amz-SignedHeaders` of `host`, for temporary
    /// credentials `X-Amz-Security-Token`), then `X-Amz-Signature`; valid `expires` seconds from `date`
    /// (1 to 604,800, a week, as S3 allows). The body is not signed.
    public func presignedQuery(method: String, host: String, path: String, query: [(String, String?)] = [], expires: Int, date: Date)
        -> String
    {
        var parameters = query
        parameters += [
            ("X-Amz-Algorithm", Self.algorithm), ("X-Amz-Credential", "\(credentials.accessKeyID)/\(scope(date))"),
            ("X-Amz-Date", Self.timestamp(date)), ("X-Amz-Expires", String(min(max(expires, 1), 604_800))),
            ("X-Amz-SignedHeaders", "host")
        ]
        if let token = credentials.sessionToken { parameters.append(("X-Amz-Security-Token", token)) }
        let request = canonicalRequest(method: method, path: path, query: parameters, headers: [("host", host)], payloadHash: Self.unsignedPayload)
        let signature = signature(stringToSign: stringToSign(canonicalRequest: request.text, date: date), date: date)
        return Self.canonicalQuery(parameters) + "&X-Amz-Signature=" + signature
    }

    // MARK: The steps

    /// The canonical request: method, path, query, headers (names in lower case, values trimmed with
    /// inner runs of spaces and tabs made one space, sorted; a name given twice has its values joined by commas),
    /// the signed headers' names, and the payload's hash, a line each; and those names, joined by `;`.
    func canonicalRequest(method: String, path: String, query: [(String, String?)], headers: [(String, String)], payloadHash: String)
        -> (text: String, signedHeaders: String)
    {
        var values: [String: [String]] = [:]
        for (name, value) in headers {
            let trimmed = value.split(whereSeparator: { $0 == " " || $0 == "\t" }).joined(separator: " ")
            values[name.lowercased(), default: []].append(trimmed)
        }
        let names = values.keys.sorted()
        let lines = names.map { "\($0):\(values[$0]!.joined(separator: ","))\n" }.joined()
        let signed = names.joined(separator: ";")
        return ([method, Self.canonicalPath(path), Self.canonicalQuery(query), lines, signed, payloadHash].joined(separator: "\n"), signed)
    }

    /// The string to sign: the algorithm, the timestamp, the scope and the canonical request's SHA-256.
    func stringToSign(canonicalRequest: String, date: Date) -> String {
        [Self.algorithm, Self.timestamp(date), scope(date), Self.hex(Digest.sha256(Array(canonicalRequest.utf8)))].joined(separator: "\n")
    }

    /// The signature: HMAC-SHA256 of the string to sign under the key derived for the date, region and
    /// service, in lower-case hexadecimal.
    func signature(stringToSign: String, date: Date) -> String {
        var key = Array("AWS4\(credentials.secretAccessKey)".utf8)
        for part in [Self.day(date), region, service, "aws4_request"] {
            key = Digest.hmacSHA256(key: key, Array(part.utf8))
        }
        return Self.hex(Digest.hmacSHA256(key: key, Array(stringToSign.utf8)))
    }

    /// `yyyymmdd/region/service/aws4_request`.
    func scope(_ date: Date) -> String { "\(Self.day(date))/\(region)/\(service)/aws4_request" }

    // MARK: Encoding

    /// `path` as S3 signs and receives it: each byte but letters, digits, `-`, `.`, `_`, `~` and `/`
    /// percent-encoded in upper case (`/test$file.text` is `/test%24file.text`); empty is `/`.
    public static func canonicalPath(_ path: String) -> String {
        path.isEmpty ? "/" : uriEncode(path, encodingSlash: false)
    }

    /// A query as S3 signs and receives it: names and values encoded as ``canonicalPath(_:)`` does, `/`
    /// too, sorted by name then value, `name=value` joined by `&` (a parameter without a value is `name=`).
    public static func canonicalQuery(_ query: [(String, String?)]) -> String {
        query.map { (uriEncode($0.0, encodingSlash: true), uriEncode($0.1 ?? "", encodingSlash: true)) }
            .sorted { $0.0 != $1.0 ? $0.0 < $1.0 : $0.1 < $1.1 }
            .map { "\($0.0)=\($0.1)" }.joined(separator: "&")
    }

    static func uriEncode(_ text: String, encodingSlash: Bool) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: "/") where !encodingSlash: out.append("/")
            default:
                let digits = Array("0123456789ABCDEF")
                out += "%\(digits[Int(byte >> 4)])\(digits[Int(byte & 15)])"
            }
        }
        return out
    }

    // MARK: Dates and hexadecimal

    /// `yyyymmddThhmmssZ` in UTC.
    static func timestamp(_ date: Date) -> String {
        let (day, time) = utc(date)
        return "\(day)T\(time)Z"
    }

    /// `yyyymmdd` in UTC.
    static func day(_ date: Date) -> String { utc(date).day }

    private static func utc(_ date: Date) -> (day: String, time: String) {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return (
            "\(parts.tm_year + 1900)\(two(parts.tm_mon + 1))\(two(parts.tm_mday))", "\(two(parts.tm_hour))\(two(parts.tm_min))\(two(parts.tm_sec))"
        )
    }

    static func hex(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef")
        var out = ""
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 15)])
        }
        return out
    }

    /// The SHA-256 of `body` in lower-case hexadecimal: a request's `payloadHash`.
    public static func payloadHash(_ body: some DataProtocol) -> String { hex(Digest.sha256(body)) }
}
