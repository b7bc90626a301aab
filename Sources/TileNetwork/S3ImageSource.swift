import AsyncHTTPClient
public import Foundation
import NIOCore
import NIOHTTP1
public import TileActors
public import TileCore

/// An object in an S3-compatible store named by its URL, `s3://BUCKET/KEY` (a prefix when the key is
/// empty or ends in `/`).
public struct S3Location: Sendable, Hashable, CustomStringConvertible {
    public var bucket: String
    public var key: String

    public init(bucket: String, key: String) {
        (self.bucket, self.key) = (bucket, key)
    }

    /// `url` read as `s3://BUCKET/KEY`; nil unless it starts with `s3://` and names a bucket as S3
    /// allows them (3 to 63 lower-case letters, digits, dots and hyphens, a letter or digit first and last).
    public init?(_ url: String) {
        guard url.hasPrefix("s3://") else { return nil }
        let rest = url.dropFirst(5)
        let bucket = String(rest.prefix { $0 != "/" })
        guard Self.isBucketName(bucket) else { return nil }
        (self.bucket, key) = (bucket, String(rest.dropFirst(bucket.count + 1)))
    }

    public var description: String { "s3://\(bucket)/\(key)" }

    /// Whether `name` is a bucket name S3 accepts.
    static func isBucketName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        let isEdge: (UInt8) -> Bool = { (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) }
        guard (3...63).contains(bytes.count), isEdge(bytes[0]), isEdge(bytes[bytes.count - 1]) else { return false }
        return bytes.allSatisfy { isEdge($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") }
    }
}

extension S3Configuration {
    /// The store the environment names, as the AWS tools read it, `TILER_S3_*` first:
    /// - endpoint: `TILER_S3_ENDPOINT`, `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`; none: AWS's
    ///   (`https://s3.REGION.amazonaws.com`);
    /// - region: `TILER_S3_REGION`, `AWS_REGION`, `AWS_DEFAULT_REGION`; none: `us-east-1`;
    /// - credentials: `TILER_S3_ACCESS_KEY_ID` and `TILER_S3_SECRET_ACCESS_KEY`, or
    ///   `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN`;
    /// - addressing: `TILER_S3_PATH_STYLE` (`true` or `false`); none: path style for a named endpoint,
    ///   the bucket in the host name for AWS's.
    /// - Throws: ``TileError/Code/invalidArgument`` naming what is missing or malformed.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws(TileError)
        -> S3Configuration
    {
        func first(_ names: String...) -> String? { names.lazy.compactMap { environment[$0] }.first { !$0.isEmpty } }
        let region = first("TILER_S3_REGION", "AWS_REGION", "AWS_DEFAULT_REGION") ?? "us-east-1"
        let named = first("TILER_S3_ENDPOINT", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
        let endpoint = named ?? "https://s3.\(region).amazonaws.com"
        guard endpoint.hasPrefix("http://") || endpoint.hasPrefix("https://"), URL(string: endpoint)?.host != nil else {
            throw TileError(.invalidArgument, "the S3 endpoint \(endpoint) is not an http or https URL (TILER_S3_ENDPOINT or AWS_ENDPOINT_URL)")
        }
        let tiler = (first("TILER_S3_ACCESS_KEY_ID"), first("TILER_S3_SECRET_ACCESS_KEY"))
        if (tiler.0 == nil) != (tiler.1 == nil) {
            throw TileError(.invalidArgument, "TILER_S3_ACCESS_KEY_ID and TILER_S3_SECRET_ACCESS_KEY go together: one is set without the other")
        }
        let credentials: S3Credentials
        if let id = tiler.0, let secret = tiler.1 {
            credentials = S3Credentials(accessKeyID: id, secretAccessKey: secret)
        } else if let id = first("AWS_ACCESS_KEY_ID"), let secret = first("AWS_SECRET_ACCESS_KEY") {
            credentials = S3Credentials(accessKeyID: id, secretAccessKey: secret, sessionToken: first("AWS_SESSION_TOKEN"))
        } else {
            throw TileError(
                .invalidArgument,
                "no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or TILER_S3_ACCESS_KEY_ID and TILER_S3_SECRET_ACCESS_KEY)")
        }
        var pathStyle = named != nil
        if let style = environment["TILER_S3_PATH_STYLE"] {
            guard let value = Bool(style.lowercased()) else {
                throw TileError(.invalidArgument, "TILER_S3_PATH_STYLE is \(style): true (buckets in the path) or false (in the host name)")
            }
            pathStyle = value
        }
        return S3Configuration(endpoint: endpoint, region: region, credentials: credentials, pathStyle: pathStyle)
    }
}

extension S3Error: TileErrorConvertible {
    /// A missing object or bucket, a refusal, a wrong region (301) or a request the store finds
    /// malformed (400, a timeout apart) is ``TileError/Code/invalidArgument``: the name, the credentials
    /// or the configuration is wrong; anything else ``TileError/Code/io``; a cancellation
    /// ``TileError/Code/cancelled``.
    public var tileError: TileError {
        if isCancellation { return TileError(.cancelled, description) }
        let isUsers = [301, 403, 404].contains(status ?? 0) || (status == 400 && !isTransient)
        return TileError(isUsers ? .invalidArgument : .io, description)
    }
}

/// An image held as an object in an S3-compatible store: its body streamed into a builder as it
/// downloads (with backpressure, never held whole), so that JPEG and PNG masters are decoded and tiled
/// during the download, as ``HTTPImageSource``'s are. The `GET` is signed (``S3Client``) and tried again
/// on transient failures before its body starts; a body cut short fails with
/// ``NetworkError/Code/truncated``; a missing object with ``S3Error`` (404 `NoSuchKey`).
public struct S3ImageSource: ImageSource {
    public let client: S3Client
    public let location: S3Location
    public var name: String { location.description }
    /// `true`: a progressive JPEG downloaded gets whole-image previews by default.
    public var streamsOverNetwork: Bool { true }
    /// Called as each part of the body arrives, with the bytes received so far and the object's size.
    public var onBodyPart: (@Sendable (_ bytesReceived: Int, _ expectedBytes: Int?) -> Void)?
    /// The entity tag the object must have (its version looked up before): one replaced since fails
    /// with 412 `PreconditionFailed`, never read as the version looked up. Nil: whatever is there.
    public var ifMatch: String?

    public init(client: S3Client, location: S3Location) {
        (self.client, self.location) = (client, location)
    }

    public func feed(into builder: ImageBuilder) async throws {
        try await stream(announce: { await builder.setExpectedBytes($0) }) { part in
            try await builder.append(part)
            return await builder.hasReachedEndOfImage
        }
    }

    /// Streams the object into an export, as ``feed(into:)-(ImageBuilder)`` does into a build.
    public func feed(into exporter: ImageExporter) async throws {
        try await stream(announce: { _ in }) { part in
            try await exporter.append(part)
            return await exporter.hasReachedEndOfImage
        }
    }

    private func stream(announce: (Int?) async -> Void, _ consume: (ByteBufferView) async throws -> Bool) async throws {
        let response = try await client.stream(bucket: location.bucket, key: location.key, ifMatch: ifMatch)
        try await HTTPImageSource.feed(response, name: name, onBodyPart: onBodyPart, announce: announce, consume)
    }
}
