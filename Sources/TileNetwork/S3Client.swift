public import AsyncHTTPClient
public import Foundation
public import NIOCore
import NIOFoundationCompat
import NIOHTTP1

/// Where an S3-compatible object store is and who asks it: its endpoint, region, addressing and
/// credentials.
public struct S3Configuration: Sendable {
    /// `http(s)://host[:port]`, without a path: the store's S3 endpoint.
    public var endpoint: String
    public var region: String
    public var credentials: S3Credentials
    /// `true`: buckets in the path (`http://host/bucket/key`), as most stores of one's own take them;
    /// `false`: in the host name (`http://bucket.host/key`), as AWS prefers.
    public var pathStyle: Bool
    /// Attempts of a request that failed for the server's part (5xx, `503 SlowDown`) or the
    /// connection's, with exponential backoff and jitter; a 4xx is never tried again. Default 4.
    public var attempts = 4
    /// The first backoff; each next one doubles, with up to as much again at random. Default 100 ms.
    public var backoff: Duration = .milliseconds(100)
    /// How long the store may take none of a request's body, once it has taken some, before the try is
    /// given up (and tried again as a connection's failure is): a store that stops reading fails a
    /// part's upload then, not at the request's deadline. Default 30 s, the client's read timeout;
    /// `tiler serve` sets its bucket timeout (`--bucket-timeout`).
    public var stallTimeout: Duration = .seconds(30)

    public init(endpoint: String, region: String = "us-east-1", credentials: S3Credentials, pathStyle: Bool = true) {
        var endpoint = endpoint
        while endpoint.hasSuffix("/") { endpoint.removeLast() }
        (self.endpoint, self.region, self.credentials, self.pathStyle) = (endpoint, region, credentials, pathStyle)
    }
}

/// An object's listing or `HEAD`: its key, size, entity tag (quotes removed) and last modification.
public struct S3Object: Sendable, Hashable {
    public var key: String
    public var size: Int
    public var entityTag: String
    public var lastModified: String?
}

/// Why a request to the object store failed: the operation, bucket and key, and the HTTP status with
/// the store's error code and message (`404 NoSuchKey`), or the connection's failure.
public struct S3Error: Error, Sendable, Hashable, CustomStringConvertible {
    public var operation: String
    public var bucket: String
    public var key: String?
    /// The HTTP status; nil when no answer came (``cause`` says why).
    public var status: Int?
    /// The store's error code (`NoSuchKey`, `AccessDenied`, `SignatureDoesNotMatch`, `SlowDown`), when it gave one.
    public var code: String?
    public var cause: String?
    /// The task was cancelled: the request was not made, or not to its end.
    public var isCancellation = false
    /// No answer came, and trying again cannot help (an invalid URL or header): the request was never sent.
    var isLocal = false

    public var description: String {
        let what = "\(operation) s3://\(bucket)/\(key ?? "")"
        guard let status else { return "\(what): no answer (\(cause ?? "connection failed"))" }
        return "\(what): HTTP \(status)\(code.map { " \($0)" } ?? "")\(cause.map { ": \($0)" } ?? "")"
    }

    /// Whether `error` says the store cannot be used now rather than something of one object: an
    /// ``S3Error`` with no answer (the connection's), a 5xx, a 403 (credentials refused) or a missing
    /// bucket; not a missing key or a 412 (an object replaced meanwhile), nor any other error. What the
    /// shelves' `isUnavailable` answer.
    public static func isUnavailable(_ error: any Error) -> Bool {
        guard let error = error as? S3Error else { return false }
        guard let status = error.status else { return true }
        return status >= 500 || status == 403 || error.code == "NoSuchBucket"
    }

    /// Whether the request may succeed if tried again: no answer (the connection's failure), the server's
    /// failure (500, 502, 503, 504), too many requests (429), or a timeout the store reports (408, 400
    /// `RequestTimeout`), or an error S3 reports in a 200's body (`InternalError`, `SlowDown`); never a
    /// cancellation, a request that cannot be sent, or another 4xx or 501.
    public var isTransient: Bool {
        if isCancellation || isLocal { return false }
        guard let status else { return true }
        return [500, 502, 503, 504, 429, 408].contains(status)
            || ["RequestTimeout", "SlowDown", "InternalError", "ServiceUnavailable"].contains(code ?? "")
    }
}

/// A client of an S3-compatible object store, of the size this package needs: `HEAD`, `GET` (whole,
/// a byte range, or streamed), `PUT`, `DELETE`, `ListObjectsV2` with continuation, multipart uploads
/// (aborted on failure), bucket creation and presigned `GET` URLs, over AsyncHTTPClient, each request
/// signed (``S3Signer``) and tried again on transient failures (``S3Configuration/attempts``).
public struct S3Client: Sendable {
    public let configuration: S3Configuration
    let client: HTTPClient
    private let signer: S3Signer

    /// - Parameter client: HTTP/1.1 (a body's slices are paced by its writes: ``bodySlice``), without
    ///   redirects (a signature is for one host): ``sharedClient`` by default.
    public init(configuration: S3Configuration, client: HTTPClient = S3Client.sharedClient) {
        self.configuration = configuration
        self.client = client
        signer = S3Signer(credentials: configuration.credentials, region: configuration.region)
    }

    /// A request's parts: where it goes and how it is signed.
    struct Target {
        var url: String
        var host: String
        var path: String
        var query: [(String, String?)]
    }

    func target(bucket: String, key: String = "", query: [(String, String?)] = []) -> Target {
        var (scheme, authority) = Self.split(configuration.endpoint)
        // The Host header as AsyncHTTPClient would write it: no default port.
        if (scheme == "https" && authority.hasSuffix(":443")) || (scheme == "http" && authority.hasSuffix(":80")) {
            authority = String(authority[..<authority.lastIndex(of: ":")!])
        }
        // A bucket name with dots in the host name would not match an https certificate's one-level wildcard.
        let pathStyle = configuration.pathStyle || (scheme == "https" && bucket.contains("."))
        let (host, path) = pathStyle ? (authority, "/\(bucket)/\(key)") : ("\(bucket).\(authority)", "/\(key)")
        let encodedQuery = S3Signer.canonicalQuery(query)
        let url = "\(scheme)://\(host)\(S3Signer.canonicalPath(path))" + (encodedQuery.isEmpty ? "" : "?\(encodedQuery)")
        return Target(url: url, host: host, path: path, query: query)
    }

    static func split(_ endpoint: String) -> (scheme: String, authority: String) {
        guard let range = endpoint.range(of: "://") else { return ("https", endpoint) }
        return (String(endpoint[..<range.lowerBound]), String(endpoint[range.upperBound...]))
    }

    /// Sends a signed request, trying again on transient failures (``S3Error/isTransient``; not at all
    /// when `idempotent` is false and a request went out: a second `CreateMultipartUpload` would
    /// leave the first behind); the answer's status must be one of `expected`. A body is sent signed
    /// (its SHA-256 in the signature). A cancelled task stops at once, with ``S3Error/isCancellation``.
    func send(
        _ method: HTTPMethod, _ operation: String, bucket: String, key: String? = nil, query: [(String, String?)] = [],
        headers extra: [(String, String)] = [], body: ByteBuffer? = nil, expected: Set<Int> = [200], idempotent: Bool = true,
        timeout: TimeAmount = .minutes(5)
    ) async throws(S3Error) -> HTTPClientResponse {
        let target = target(bucket: bucket, key: key ?? "", query: query)
        let hash = body.map { S3Signer.payloadHash($0.readableBytesView) } ?? S3Signer.emptyPayloadHash
        var failure = S3Error(operation: operation, bucket: bucket, key: key)
        for attempt in 0..<(idempotent ? max(1, configuration.attempts) : 1) {
            if attempt > 0 {
                let base = configuration.backoff * (1 << min(attempt - 1, 8))
                try? await Task.sleep(for: min(base + base * Double.random(in: 0..<1), .seconds(20)))
            }
            if Task.isCancelled {
                failure.status = nil
                (failure.isCancellation, failure.cause) = (true, "cancelled")
                throw failure
            }
            var request = HTTPClientRequest(url: target.url)
            request.method = method
            // The host signed, as sent (AsyncHTTPClient keeps a Host header it is given).
            request.headers.add(name: "Host", value: target.host)
            for (name, value) in extra { request.headers.add(name: name, value: value) }
            let signed = signer.authorizationHeaders(
                method: method.rawValue, host: target.host, path: target.path, query: target.query, headers: extra, payloadHash: hash,
                date: Date())
            for (name, value) in signed { request.headers.add(name: name, value: value) }
            let response: HTTPClientResponse
            do { response = try await execute(request, body: body, timeout: timeout) } catch {
                (failure.status, failure.code, failure.cause) = (nil, nil, "\(error)")
                failure.isCancellation = Task.isCancelled || (error as? HTTPClientError) == .cancelled
                let local: [HTTPClientError] = [.invalidURL, .emptyHost, .emptyScheme, .bodyLengthMismatch]
                failure.isLocal = (error as? HTTPClientError).map { local.contains($0) || "\($0)".contains("invalidHeaderField") } ?? false
                guard failure.isTransient else { throw failure }
                continue
            }
            let status = Int(response.status.code)
            if expected.contains(status) { return response }
            failure.status = status
            let text = (try? await response.body.collect(upTo: 64 << 10)).map { String(buffer: $0) } ?? ""
            failure.code = S3XML.values("Code", in: text).first
            failure.cause = S3XML.values("Message", in: text).first
            guard failure.isTransient else { throw failure }
        }
        throw failure
    }

    /// `HEAD` of an object: nil when there is none (404).
    public func head(bucket: String, key: String) async throws(S3Error) -> S3Object? {
        let response = try await send(.HEAD, "HeadObject", bucket: bucket, key: key, expected: [200, 404])
        guard response.status.code == 200 else { return nil }
        return S3Object(
            key: key, size: Int(response.headers.first(name: "content-length") ?? "") ?? 0,
            entityTag: Self.unquoted(response.headers.first(name: "etag") ?? ""), lastModified: response.headers.first(name: "last-modified"))
    }

    /// An object's bytes, or those of `range` (an answer of 206), at most `limit`.
    /// - Parameter ifMatch: the entity tag the object must still have (``S3Object/entityTag``, as HEAD
    ///   or an earlier GET gave it): the reads of one version, never a mix of two. An object replaced
    ///   since fails with status 412 (`PreconditionFailed`).
    public func get(bucket: String, key: String, range: ClosedRange<Int>? = nil, ifMatch: String? = nil, limit: Int = 64 << 20)
        async throws(S3Error) -> ByteBuffer
    {
        let response = try await stream(bucket: bucket, key: key, range: range, ifMatch: ifMatch)
        do { return try await response.body.collect(upTo: limit) } catch {
            throw S3Error(operation: "GetObject", bucket: bucket, key: key, status: Int(response.status.code), cause: "\(error)")
        }
    }

    /// An object's answer, its body to be read as it arrives (`response.body`); `ifMatch` as ``get(bucket:key:range:ifMatch:limit:)``'s.
    public func stream(bucket: String, key: String, range: ClosedRange<Int>? = nil, ifMatch: String? = nil) async throws(S3Error)
        -> HTTPClientResponse
    {
        var headers = range.map { [("Range", "bytes=\($0.lowerBound)-\($0.upperBound)")] } ?? []
        // A tag as S3 lists it (unquoted) is quoted; a quoted or weak one (W/"...") is sent as it is.
        if let ifMatch { headers.append(("If-Match", ifMatch.hasPrefix("\"") || ifMatch.hasPrefix("W/") ? ifMatch : "\"\(ifMatch)\"")) }
        return try await send(.GET, "GetObject", bucket: bucket, key: key, headers: headers, expected: range == nil ? [200] : [206])
    }

    /// Stores `body` as the object; returns its entity tag.
    @discardableResult
    public func put(bucket: String, key: String, body: ByteBuffer, contentType: String = "application/octet-stream")
        async throws(S3Error) -> String
    {
        let response = try await send(.PUT, "PutObject", bucket: bucket, key: key, headers: [("Content-Type", contentType)], body: body)
        return Self.unquoted(response.headers.first(name: "etag") ?? "")
    }

    /// Deletes the object (no error when there is none: S3 answers 204 either way).
    public func delete(bucket: String, key: String) async throws(S3Error) {
        _ = try await send(.DELETE, "DeleteObject", bucket: bucket, key: key, expected: [200, 204, 404])
    }

    /// Creates the bucket, in the configured region (a `LocationConstraint` outside `us-east-1`); a
    /// bucket this user has already is not an error (`BucketAlreadyOwnedByYou`), someone else's is.
    public func createBucket(_ bucket: String) async throws(S3Error) {
        let region = configuration.region
        let body =
            region == "us-east-1"
            ? nil
            : ByteBuffer(
                string: "<CreateBucketConfiguration><LocationConstraint>\(S3XML.escaped(region))</LocationConstraint></CreateBucketConfiguration>")
        do throws(S3Error) { _ = try await send(.PUT, "CreateBucket", bucket: bucket, body: body) } catch
            where error.code == "BucketAlreadyOwnedByYou"
        {}
    }

    /// One page of `ListObjectsV2`: the objects whose keys start with `prefix`, in key order, and the
    /// token of the next page (nil on the last).
    public func list(bucket: String, prefix: String = "", continuation: String? = nil, maximum: Int = 1000) async throws(S3Error)
        -> (objects: [S3Object], next: String?)
    {
        var query: [(String, String?)] = [("list-type", "2"), ("prefix", prefix), ("max-keys", String(maximum))]
        if let continuation { query.append(("continuation-token", continuation)) }
        let response = try await send(.GET, "ListObjectsV2", bucket: bucket, query: query)
        let text: String
        do { text = String(buffer: try await response.body.collect(upTo: 16 << 20)) } catch {
            throw S3Error(operation: "ListObjectsV2", bucket: bucket, key: prefix, status: 200, cause: "\(error)")
        }
        let objects = Self.objects(listed: text)
        guard S3XML.values("IsTruncated", in: text).first == "true" else { return (objects, nil) }
        guard let next = S3XML.values("NextContinuationToken", in: text).first, !next.isEmpty else {
            throw S3Error(
                operation: "ListObjectsV2", bucket: bucket, key: prefix, status: 200, cause: "a truncated listing without a continuation token")
        }
        return (objects, next)
    }

    /// The objects (`Contents`) of a `ListObjectsV2` answer's text.
    static func objects(listed text: String) -> [S3Object] {
        S3XML.elements("Contents", in: text).map { item in
            S3Object(
                key: S3XML.values("Key", in: item).first ?? "", size: Int(S3XML.values("Size", in: item).first ?? "") ?? 0,
                entityTag: Self.unquoted(S3XML.values("ETag", in: item).first ?? ""), lastModified: S3XML.values("LastModified", in: item).first)
        }
    }

    /// Every object whose key starts with `prefix`, page after page.
    public func listAll(bucket: String, prefix: String = "") async throws(S3Error) -> [S3Object] {
        var objects: [S3Object] = []
        var next: String?
        var seen: Set<String> = []
        repeat {
            let page = try await list(bucket: bucket, prefix: prefix, continuation: next)
            objects += page.objects
            next = page.next
            // A token given twice would list forever: the store is wrong, and so would the list be.
            if let next, !seen.insert(next).inserted {
                throw S3Error(operation: "ListObjectsV2", bucket: bucket, key: prefix, status: 200, cause: "the same continuation token twice")
            }
        } while next != nil
        return objects
    }

    /// A presigned `GET` of the object, valid `expires` seconds (at most a week).
    public func presignedURL(bucket: String, key: String, expires: Int) -> String {
        let target = target(bucket: bucket, key: key)
        let query = signer.presignedQuery(method: "GET", host: target.host, path: target.path, expires: expires, date: Date())
        return target.url + "?" + query
    }

    static func unquoted(_ tag: String) -> String { tag.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) }
}

/// The few values S3's XML answers hold (`ListBucketResult`, `InitiateMultipartUploadResult`,
/// `Error`): flat elements without attributes, read by name, their entities undone.
enum S3XML {
    /// The text of every `<name>...</name>` in `text`, unescaped.
    static func values(_ name: String, in text: String) -> [String] { elements(name, in: text).map(unescaped) }

    /// The inner XML of every `<name>...</name>` in `text`, as written.
    static func elements(_ name: String, in text: String) -> [String] {
        var found: [String] = []
        var rest = text[...]
        while let open = rest.range(of: "<\(name)>"), let close = rest[open.upperBound...].range(of: "</\(name)>") {
            found.append(String(rest[open.upperBound..<close.lowerBound]))
            rest = rest[close.upperBound...]
        }
        return found
    }

    /// `text` with XML's five named entities and numeric character references (`&#13;`, `&#xD;`) undone.
    static func unescaped(_ text: String) -> String {
        guard text.contains("&") else { return text }
        var out = ""
        var rest = text[...]
        while let amp = rest.firstIndex(of: "&") {
            out += rest[..<amp]
            guard let semicolon = rest[amp...].firstIndex(of: ";"), rest.distance(from: amp, to: semicolon) <= 10 else {
                out.append("&")
                rest = rest[rest.index(after: amp)...]
                continue
            }
            let entity = rest[rest.index(after: amp)..<semicolon]
            let named = ["lt": "<", "gt": ">", "quot": "\"", "apos": "'", "amp": "&"]
            if let character = named[String(entity)] {
                out += character
            } else if entity.hasPrefix("#"), let code = entity.hasPrefix("#x") ? UInt32(entity.dropFirst(2), radix: 16) : UInt32(entity.dropFirst()),
                let scalar = Unicode.Scalar(code)
            {
                out.unicodeScalars.append(scalar)
            } else {
                out += rest[amp...semicolon]
            }
            rest = rest[rest.index(after: semicolon)...]
        }
        return out + rest
    }

    static func escaped(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
            .replacingOccurrences(of: "\"", with: "&quot;")
    }
}
