import AsyncHTTPClient
import Foundation
import NIOCore
import Testing
import TestSupport
import TestTraits
@testable import TileNetwork

/// The S3 client's retries against a small server of the tests' that refuses on purpose: a `503
/// SlowDown` is tried again (with backoff) until the object comes; a 403 is not tried again; the
/// store's error code and message come out of its XML.
@Suite("S3 client: retries and refusals (loopback)", .serialized, .ownThreads)
struct S3ClientRetryTests {
    static func client(_ server: TestHTTPServer) -> S3Client {
        var configuration = S3Configuration(
            endpoint: server.url(""), credentials: S3Credentials(accessKeyID: "id", secretAccessKey: "secret"))
        configuration.backoff = .milliseconds(5)
        return S3Client(configuration: configuration)
    }

    @Test("503 SlowDown twice, then the object: three requests, the bytes; 403: one request, a typed error naming the key")
    func retries() async throws {
        let data = Data((0..<5000).map { UInt8(truncatingIfNeeded: $0 * 7) })
        let server = try await TestHTTPServer(data: data)
        defer { Task { await server.stop() } }
        let client = Self.client(server)
        let body = try await client.get(bucket: "slow", key: "a/b.jpg")
        #expect(Data(body.readableBytesView) == data && server.requests("/slow/") == 3)
        do {
            _ = try await client.get(bucket: "denied", key: "x.jpg")
            Issue.record("a 403 was taken for an answer")
        } catch {
            #expect(error.status == 403 && error.code == "AccessDenied" && error.cause == "m & n" && error.key == "x.jpg", "\(error)")
            #expect(!error.isTransient && error.description.contains("s3://denied/x.jpg"), "\(error)")
        }
        #expect(server.requests("/denied/") == 1, "a refusal is not tried again")
        // No answer at all (a port nothing listens on): tried `attempts` times, then a typed error.
        var configuration = S3Configuration(
            endpoint: "http://127.0.0.1:\(Tools.freePort())", credentials: S3Credentials(accessKeyID: "id", secretAccessKey: "secret"))
        configuration.backoff = .milliseconds(1)
        do {
            _ = try await S3Client(configuration: configuration).head(bucket: "b", key: "k")
            Issue.record("no server, and no error")
        } catch {
            #expect(error.status == nil && error.isTransient && error.operation == "HeadObject", "\(error)")
        }
    }

    @Test("S3's XML: values by element, entities undone (named and numeric), elements in order")
    func xml() {
        let text = """
            <ListBucketResult><Contents><Key>a&amp;b&#13;&#x41;</Key><Size>3</Size></Contents>\
            <Contents><Key>&lt;c&gt;</Key><Size>4</Size></Contents><IsTruncated>false</IsTruncated></ListBucketResult>
            """
        #expect(S3XML.elements("Contents", in: text).count == 2)
        #expect(S3XML.values("Key", in: text) == ["a&b\rA", "<c>"])
        #expect(S3XML.values("Size", in: text) == ["3", "4"] && S3XML.values("Missing", in: text).isEmpty)
        #expect(S3XML.unescaped("a & b &bogus; &#xZZ;") == "a & b &bogus; &#xZZ;")
    }
}
