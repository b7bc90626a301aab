import AsyncHTTPClient
import Foundation
public import NIOCore
import NIOHTTP1

// Multipart uploads.
extension S3Client {
    /// Stores the object from `parts` (each at least 5 MiB but the last, as S3 requires; at most 10,000)
    /// in a multipart upload: created, each part sent as it comes, completed; aborted when anything
    /// fails (a part, the sequence, the task's cancellation), so that no parts are left stored. No parts
    /// at all store an empty object. Returns the entity tag.
    @discardableResult
    public func upload<Parts: AsyncSequence>(bucket: String, key: String, parts: Parts, contentType: String = "application/octet-stream")
        async throws -> String where Parts.Element == ByteBuffer
    {
        // Not tried again once sent: a second upload would leave the first's parts stored.
        let created = try await send(
            .POST, "CreateMultipartUpload", bucket: bucket, key: key, query: [("uploads", nil)], headers: [("Content-Type", contentType)],
            idempotent: false)
        let text = String(buffer: try await created.body.collect(upTo: 1 << 20))
        guard let id = S3XML.values("UploadId", in: text).first else {
            throw S3Error(operation: "CreateMultipartUpload", bucket: bucket, key: key, status: 200, cause: "no UploadId in the answer")
        }
        do {
            var tags: [String] = []
            for try await part in parts {
                try Task.checkCancellation()
                guard tags.count < 10_000 else {
                    throw S3Error(operation: "UploadPart", bucket: bucket, key: key, cause: "more than 10,000 parts (S3's limit)")
                }
                let response = try await send(
                    .PUT, "UploadPart", bucket: bucket, key: key, query: [("partNumber", String(tags.count + 1)), ("uploadId", id)], body: part)
                tags.append(response.headers.first(name: "etag") ?? "")
            }
            // No parts: S3 completes no upload of none; the object is empty.
            if tags.isEmpty {
                await abort(bucket: bucket, key: key, upload: id)
                return try await put(bucket: bucket, key: key, body: ByteBuffer(), contentType: contentType)
            }
            var document = "<CompleteMultipartUpload>"
            for (n, tag) in tags.enumerated() { document += "<Part><PartNumber>\(n + 1)</PartNumber><ETag>\(S3XML.escaped(tag))</ETag></Part>" }
            document += "</CompleteMultipartUpload>"
            return try await complete(bucket: bucket, key: key, upload: id, document: document, expected: Self.multipartTag(of: tags))
        } catch {
            await abort(bucket: bucket, key: key, upload: id)
            throw error
        }
    }

    /// Completes a multipart upload with its parts' `document`; returns the object's entity tag.
    /// `expected`: the entity tag the completed object will have, when its parts' tags say it
    /// (``multipartTag(of:)``). An error S3 gives in a 200's body (`InternalError`, `SlowDown`) is
    /// tried again as a transient status is.
    func complete(bucket: String, key: String, upload id: String, document: String, expected: String?) async throws(S3Error) -> String {
        let attempts = max(1, configuration.attempts)
        for attempt in 0..<attempts {
            if attempt > 0 {
                try? await Task.sleep(for: configuration.backoff * (1 << min(attempt - 1, 8)))
                if Task.isCancelled {
                    throw S3Error(operation: "CompleteMultipartUpload", bucket: bucket, key: key, cause: "cancelled", isCancellation: true)
                }
            }
            do {
                return try await completeOnce(bucket: bucket, key: key, upload: id, document: document, expected: expected)
            } catch {
                if error.status == 200, error.isTransient, attempt + 1 < attempts { continue }
                throw error
            }
        }
        throw S3Error(operation: "CompleteMultipartUpload", bucket: bucket, key: key, cause: "no attempt made")
    }

    private func completeOnce(bucket: String, key: String, upload id: String, document: String, expected: String?) async throws(S3Error)
        -> String
    {
        let completed: HTTPClientResponse
        do {
            completed = try await send(
                .POST, "CompleteMultipartUpload", bucket: bucket, key: key, query: [("uploadId", id)], body: ByteBuffer(string: document))
        } catch {
            // Tried again after a first attempt whose answer was lost, that one completed the object:
            // the object there now is this upload's, its tag says (not an older object of the key's).
            guard error.code == "NoSuchUpload", let expected, let object = try await head(bucket: bucket, key: key),
                object.entityTag == expected
            else { throw error }
            return object.entityTag
        }
        // S3 may answer 200 with an error in the body.
        let answer: String
        do { answer = String(buffer: try await completed.body.collect(upTo: 1 << 20)) } catch {
            throw S3Error(operation: "CompleteMultipartUpload", bucket: bucket, key: key, status: 200, cause: "\(error)")
        }
        if let code = S3XML.values("Code", in: answer).first {
            throw S3Error(
                operation: "CompleteMultipartUpload", bucket: bucket, key: key, status: 200, code: code,
                cause: S3XML.values("Message", in: answer).first)
        }
        return Self.unquoted(S3XML.values("ETag", in: answer).first ?? "")
    }

    /// Aborts a multipart upload, its stored parts deleted (a clean-up: ``cleanUp(_:)``).
    func abort(bucket: String, key: String, upload id: String) async {
        let client = self
        await cleanUp {
            _ = try? await client.send(
                .DELETE, "AbortMultipartUpload", bucket: bucket, key: key, query: [("uploadId", id)], expected: [200, 204, 404])
        }
    }

    /// How long a clean-up after a failure may take (``cleanUp(_:)``): 10 s.
    static let cleanUpLimit: Duration = .seconds(10)

    /// Runs `body`, a clean-up after a failure (a multipart upload's abort, an unpublished TIFF's
    /// removal), even when the task that asks is cancelled (the reason for it, often): in a task of its
    /// own that does not inherit the cancellation, given up on (cancelled) after ``cleanUpLimit``. A
    /// store that does not answer holds a cancelled caller (a server shutting down) no longer than
    /// that; what it leaves in the bucket is named by no manifest.
    func cleanUp(_ body: @escaping @Sendable () async -> Void) async {
        await Task {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await body() }
                group.addTask { try? await Task.sleep(for: Self.cleanUpLimit) }
                await group.next()
                group.cancelAll()
            }
        }.value
    }

    /// The entity tag S3 gives an object completed from parts with entity tags `tags`: the MD5 of
    /// their MD5s, then `-` and their count. Nil when a tag is not an MD5 (an encrypted store's), or
    /// when this libcrypto makes no MD5.
    static func multipartTag(of tags: [String]) -> String? {
        var digests: [UInt8] = []
        for tag in tags {
            let hex = Array(unquoted(tag).utf8)
            guard hex.count == 32 else { return nil }
            for i in stride(from: 0, to: 32, by: 2) {
                guard let byte = UInt8(String(decoding: hex[i..<i + 2], as: UTF8.self), radix: 16) else { return nil }
                digests.append(byte)
            }
        }
        guard let md5 = Digest.hash(.md5, digests) else { return nil }  // no MD5 here (a FIPS-only libcrypto): not known
        let digest = S3Signer.hex(md5)
        return "\(digest)-\(tags.count)"
    }
}
