import Testing
import TestTraits
import TestSupport

/// The tests' SHA-256 (the corpus manifest's pixel hashes are compared with it) against the examples
/// of FIPS 180-2, Appendix B, whole and fed in pieces across block boundaries.
@Suite("The tests' SHA-256", .ownThreads)
struct ReferenceHashTests {
    static let examples: [(String, String)] = [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
        (String(repeating: "a", count: 1_000_000), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    ]

    @Test("FIPS 180-2's examples, whole and in pieces of 1, 55, 63, 64 and 65 bytes")
    func fipsExamples() {
        for (message, digest) in Self.examples {
            let bytes = Array(message.utf8)
            #expect(SHA256.hex(bytes) == digest, "\(message.prefix(20))")
            for piece in [1, 55, 63, 64, 65] where bytes.count < 100_000 || piece >= 63 {
                var hasher = SHA256()
                for start in stride(from: 0, to: bytes.count, by: piece) { hasher.update(Array(bytes[start..<min(bytes.count, start + piece)])) }
                #expect(hasher.finalize() == digest, "\(message.prefix(20)) in pieces of \(piece)")
            }
        }
    }

    @Test("the RGB of RGBA pixels hashes as the RGB bytes alone")
    func rgbOfRGBA() {
        let rgb = (0..<3 * 1000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        var rgba: [UInt8] = []
        for i in 0..<1000 { rgba += rgb[(3 * i)..<(3 * i + 3)] + [0xAB] }
        var hasher = SHA256()
        rgba.withUnsafeBytes { hasher.updateRGB(fromRGBA: $0) }
        #expect(hasher.finalize() == SHA256.hex(rgb))
    }
}
