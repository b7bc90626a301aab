import Dispatch
import Foundation
import Testing
@testable import TileNetwork

/// Signature Version 4 against the examples AWS publishes for S3 ("Signature Calculations for the
/// Authorization Header" and "Authenticating Requests: Using Query Parameters", Amazon S3 API
/// Reference): the documented example user and bucket, 24 May 2013 at midnight UTC, and the canonical
/// requests, strings to sign and signatures the documentation prints, copied here as it gives them.
@Suite("S3 request signatures (AWS's published examples)")
struct S3SignerTests {
    static let signer = S3Signer(
        credentials: S3Credentials(accessKeyID: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
        region: "us-east-1")
    static let date = Date(timeIntervalSince1970: 1_369_353_600)  // 2013-05-24T00:00:00Z
    static let host = "examplebucket.s3.amazonaws.com"

    /// The signature in an `Authorization` value.
    static func signature(_ headers: [(String, String)]) -> String? {
        headers.first { $0.0 == "Authorization" }?.1.components(separatedBy: "Signature=").last
    }

    @Test("GET Object (the first 10 bytes): canonical request, string to sign, signature and Authorization as documented")
    func getObject() {
        let request = Self.signer.canonicalRequest(
            method: "GET", path: "/test.txt", query: [],
            headers: [
                ("Host", Self.host), ("Range", "bytes=0-9"), ("x-amz-content-sha256", S3Signer.emptyPayloadHash),
                ("x-amz-date", "20130524T000000Z")
            ], payloadHash: S3Signer.emptyPayloadHash)
        #expect(
            request.text == """
                GET
                /test.txt

                host:examplebucket.s3.amazonaws.com
                range:bytes=0-9
                x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
                x-amz-date:20130524T000000Z

                host;range;x-amz-content-sha256;x-amz-date
                e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
                """)
        let toSign = Self.signer.stringToSign(canonicalRequest: request.text, date: Self.date)
        #expect(
            toSign == """
                AWS4-HMAC-SHA256
                20130524T000000Z
                20130524/us-east-1/s3/aws4_request
                7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972
                """)
        #expect(Self.signer.signature(stringToSign: toSign, date: Self.date) == "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
        let headers = Self.signer.authorizationHeaders(
            method: "GET", host: Self.host, path: "/test.txt", headers: [("Range", "bytes=0-9")], payloadHash: S3Signer.emptyPayloadHash,
            date: Self.date)
        #expect(
            headers.first { $0.0 == "Authorization" }?.1
                == "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
                + "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
                + "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
        #expect(headers.contains { $0 == ("x-amz-date", "20130524T000000Z") })
    }

    @Test("PUT Object (a key with $, a storage class, a signed body): the documented signature")
    func putObject() {
        let body = Data("Welcome to Amazon S3.".utf8)
        let hash = S3Signer.payloadHash(body)
        #expect(hash == "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072")
        #expect(S3Signer.canonicalPath("/test$file.text") == "/test%24file.text")
        let headers = Self.signer.authorizationHeaders(
            method: "PUT", host: Self.host, path: "/test$file.text",
            headers: [("Date", "Fri, 24 May 2013 00:00:00 GMT"), ("x-amz-storage-class", "REDUCED_REDUNDANCY")], payloadHash: hash,
            date: Self.date)
        let authorization = headers.first { $0.0 == "Authorization" }?.1 ?? ""
        #expect(authorization.contains("SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class,"), "\(authorization)")
        #expect(Self.signature(headers) == "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd")
    }

    @Test("GET Bucket Lifecycle (a parameter without a value) and List Objects (parameters sorted): the documented signatures")
    func bucketRequests() {
        let lifecycle = Self.signer.authorizationHeaders(
            method: "GET", host: Self.host, path: "/", query: [("lifecycle", nil)], payloadHash: S3Signer.emptyPayloadHash, date: Self.date)
        #expect(Self.signature(lifecycle) == "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543")
        // Given out of order: the canonical query sorts them.
        let list = Self.signer.authorizationHeaders(
            method: "GET", host: Self.host, path: "/", query: [("prefix", "J"), ("max-keys", "2")], payloadHash: S3Signer.emptyPayloadHash,
            date: Self.date)
        #expect(S3Signer.canonicalQuery([("prefix", "J"), ("max-keys", "2")]) == "max-keys=2&prefix=J")
        #expect(Self.signature(list) == "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7")
    }

    @Test("a presigned GET valid for a day: the documented URL")
    func presigned() {
        let query = Self.signer.presignedQuery(method: "GET", host: Self.host, path: "/test.txt", expires: 86_400, date: Self.date)
        #expect(
            query == "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
                + "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
                + "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404")
    }

    @Test("encoding: unreserved bytes kept, others percent-encoded in upper case, UTF-8 by byte, / kept in paths only")
    func encoding() {
        #expect(S3Signer.canonicalPath("/photos/2024 summer/é~a_b-c.d") == "/photos/2024%20summer/%C3%A9~a_b-c.d")
        #expect(S3Signer.canonicalQuery([("prefix", "a/b c"), ("continuation-token", "x+y=")]) == "continuation-token=x%2By%3D&prefix=a%2Fb%20c")
        #expect(S3Signer.canonicalPath("") == "/")
        // A session token is sent and signed.
        var temporary = Self.signer
        temporary.credentials.sessionToken = "token"
        let headers = temporary.authorizationHeaders(
            method: "GET", host: Self.host, path: "/a", payloadHash: S3Signer.emptyPayloadHash, date: Self.date)
        #expect(headers.contains { $0 == ("x-amz-security-token", "token") })
        #expect(headers.first { $0.0 == "Authorization" }?.1.contains("x-amz-date;x-amz-security-token,") == true)
    }
}

/// libcrypto's digests as the S3 code calls them, against their specifications' own examples.
@Suite("Digests (RFC 1321, FIPS 180-2, RFC 4231 examples)")
struct DigestTests {
    @Test("MD5 of RFC 1321's test suite; SHA-256 of FIPS 180-2's; HMAC-SHA-256 of RFC 4231's test cases 1 and 2")
    func examples() {
        let md5: [(String, String)] = [
            ("", "d41d8cd98f00b204e9800998ecf8427e"), ("a", "0cc175b9c0f1b6a831c399e269772661"), ("abc", "900150983cd24fb0d6963f7d28e17f72"),
            ("message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
            ("12345678901234567890123456789012345678901234567890123456789012345678901234567890", "57edf4a22be3c955ac49da2e2107b67a")
        ]
        for (text, digest) in md5 { #expect(Digest.hash(.md5, Array(text.utf8)).map(S3Signer.hex) == digest, "MD5(\"\(text)\")") }
        #expect(S3Signer.hex(Digest.sha256(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            S3Signer.hex(Digest.sha256(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        // A body of two parts (DispatchData, its regions apart) hashes as its bytes joined.
        var body = DispatchData.empty
        for part in ["ab", "c"] { Array(part.utf8).withUnsafeBytes { body.append($0) } }
        #expect(S3Signer.payloadHash(body) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            S3Signer.hex(Digest.hmacSHA256(key: [UInt8](repeating: 0x0b, count: 20), Array("Hi There".utf8)))
                == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
        #expect(
            S3Signer.hex(Digest.hmacSHA256(key: Array("Jefe".utf8), Array("what do ya want for nothing?".utf8)))
                == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }
}
