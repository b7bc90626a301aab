import CLibCrypto
package import Foundation

/// The message digests S3 needs, computed by the system's libcrypto (OpenSSL's EVP interface): SHA-256
/// and HMAC-SHA-256 for request signatures (Signature Version 4), MD5 for the entity tags of objects
/// uploaded in parts.
package enum Digest {
    /// A digest algorithm of libcrypto's.
    enum Algorithm {
        case sha256
        case md5

        fileprivate var method: OpaquePointer? {
            switch self {
            case .sha256: EVP_sha256()
            case .md5: EVP_md5()
            }
        }
    }

    /// The digest of `bytes`, fed to libcrypto a region at a time (no copy of a discontiguous body).
    /// - Returns: nil when libcrypto cannot make it: an algorithm its configured providers lack (MD5
    ///   where only FIPS's provider is loaded), or no memory. No input makes it fail.
    static func hash(_ algorithm: Algorithm, _ bytes: some DataProtocol) -> [UInt8]? {
        guard let context = EVP_MD_CTX_new() else { return nil }
        defer { EVP_MD_CTX_free(context) }
        var ok = EVP_DigestInit_ex(context, algorithm.method, nil) == 1
        for region in bytes.regions where ok {
            ok = region.withUnsafeBytes { EVP_DigestUpdate(context, $0.baseAddress, $0.count) } == 1
        }
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        if ok { ok = digest.withUnsafeMutableBufferPointer { EVP_DigestFinal_ex(context, $0.baseAddress, &length) } == 1 }
        return ok ? Array(digest.prefix(Int(length))) : nil
    }

    /// The SHA-256 of `bytes`: every libcrypto configuration has it (FIPS's provider too).
    static func sha256(_ bytes: some DataProtocol) -> [UInt8] {
        guard let digest = hash(.sha256, bytes) else { fatalError("libcrypto made no SHA-256 (out of memory)") }
        return digest
    }

    /// HMAC-SHA-256 of `message` under `key`.
    package static func hmacSHA256(key: [UInt8], _ message: some DataProtocol) -> [UInt8] {
        let bytes = Array(message)
        var code = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let done = key.withUnsafeBytes { key in
            bytes.withUnsafeBytes { message in
                code.withUnsafeMutableBufferPointer { out in
                    HMAC(
                        EVP_sha256(), key.baseAddress, Int32(key.count), message.baseAddress?.assumingMemoryBound(to: UInt8.self),
                        message.count, out.baseAddress, &length)
                }
            }
        }
        precondition(done != nil, "libcrypto failed an HMAC of its own algorithm")
        return Array(code.prefix(Int(length)))
    }
}
