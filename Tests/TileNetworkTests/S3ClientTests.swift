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

/// Request bodies against stores that read slowly, or stop reading: a part goes to the connection a
/// slice at a time, so that AsyncHTTPClient's read timeout (started once a body's last bytes are queued)
/// does not run while most of the part is still to be sent; and a store that takes nothing for the
/// stall timeout fails the try, not the request's five-minute deadline.
@Suite("S3 client: slow and silent stores (loopback)", .serialized, .ownThreads)
struct S3ClientBodyTests {
    static let credentials = S3Credentials(accessKeyID: "id", secretAccessKey: "secret")

    /// A `PUT` of `count` bytes: its outcome, or nil when it has not ended within 120 s (it is then cancelled).
    static func put(_ count: Int, with client: S3Client) async -> Result<String, S3Error>? {
        let body = ByteBuffer(repeating: 7, count: count)
        return await withTaskGroup(of: Result<String, S3Error>?.self) { group in
            group.addTask {
                do throws(S3Error) { return .success(try await client.put(bucket: "b", key: "k", body: body)) } catch { return .failure(error) }
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(120))
                return nil
            }
            defer { group.cancelAll() }
            return await group.next() ?? nil
        }
    }

    @Test("32 MiB to a store that reads 4 MiB a second, with a 3 s read timeout: stored whole, in one try")
    func slowStore() async throws {
        let store = try SlowReader(bytesPerSecond: 4 << 20)
        var configuration = S3Configuration(endpoint: "http://127.0.0.1:\(store.port)", credentials: Self.credentials)
        configuration.attempts = 1
        // Sending the body takes 8 s: a read timer started when it was queued whole fires long before its
        // end. Sent a slice at a time, what is under way when the timer starts is the socket's (about
        // 4 MB here: a second at this rate).
        let http = HTTPImageSource.makeClient(readTimeout: .seconds(3))
        let client = S3Client(configuration: configuration, client: http)
        let outcome: Result<String, S3Error>
        do { outcome = .success(try await client.put(bucket: "b", key: "k", body: ByteBuffer(repeating: 7, count: 32 << 20))) } catch {
            outcome = .failure(error)
        }
        try await http.shutdown()
        #expect(try outcome.get() == "slow")
        #expect(store.bodyLengths == [32 << 20])
    }

    @Test(
        "a store that refuses before the body's end: its 403 and error code, in one try (not taken for a stall), with a length or chunked",
        arguments: [false, true])
    func refusedEarly(chunked: Bool) async throws {
        let store = try SlowReader(bytesPerSecond: 4 << 20, refusing: true, chunked: chunked)
        var configuration = S3Configuration(endpoint: "http://127.0.0.1:\(store.port)", credentials: Self.credentials)
        // A stall timeout of an hour: the refusal's end must be seen (its length, or its last chunk),
        // not waited out; the whole bounded here.
        (configuration.attempts, configuration.backoff, configuration.stallTimeout) = (4, .milliseconds(1), .seconds(3600))
        let client = S3Client(configuration: configuration)
        let outcome = await Self.put(S3Client.storePartSize, with: client)
        switch outcome {
        case nil: Issue.record("the refused put had not ended in 120 s")
        case .success(let tag): Issue.record("a refused body was taken: \(tag)")
        case .failure(let error):
            #expect(error.status == 403 && error.code == "AccessDenied" && error.cause == "refused early", "\(error)")
        }
        // One try: the answer came before the body's end, and the body was not sent on (nor read whole).
        #expect(store.bodyLengths.count <= 1 && (store.bodyLengths.first ?? 0) < S3Client.storePartSize, "\(store.bodyLengths)")
    }

    @Test("a part to a store that stops reading: each try given up after the stall timeout, then a transient typed error")
    func silentStore() async throws {
        let silent = try SilentListener()  // takes the connection and the first bytes the kernel holds, never more
        var configuration = S3Configuration(endpoint: "http://127.0.0.1:\(silent.port)", credentials: Self.credentials)
        (configuration.attempts, configuration.backoff, configuration.stallTimeout) = (2, .milliseconds(1), .seconds(1))
        let client = S3Client(configuration: configuration)
        // Without the watch each try waited for the client's read timeout (30 s): the whole bounded here.
        let outcome = await Self.put(S3Client.storePartSize, with: client)
        switch outcome {
        case nil: Issue.record("the put to a store that reads nothing had not ended in 120 s")
        case .success(let tag): Issue.record("a store that reads nothing took the part: \(tag)")
        case .failure(let error):
            #expect(error.status == nil && error.isTransient && error.cause?.contains("took no bytes") == true, "\(error)")
        }
        withExtendedLifetime(silent) {}
    }
}
