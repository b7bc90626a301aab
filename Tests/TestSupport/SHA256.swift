import CJpegReference

/// A plain SHA-256 (FIPS 180-4), used to compare pixels with the corpus manifest's hashes: the
/// reference target's C (`cjs_sha256_*`), since the tests' debug builds run Swift unoptimized (a
/// Swift SHA-256 there spent minutes on the corpus).
public struct SHA256 {
    private var context = cjs_sha256()

    public init() { cjs_sha256_init(&context) }

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress else { return }
        cjs_sha256_update(&context, base, bytes.count)
    }

    public mutating func update(_ bytes: [UInt8]) { bytes.withUnsafeBytes { update($0) } }

    /// Hashes the RGB samples of RGBA pixels (alpha left out), as a PPM holds them.
    public mutating func updateRGB(fromRGBA pixels: UnsafeRawBufferPointer) {
        guard let base = pixels.baseAddress else { return }
        cjs_sha256_update_rgb(&context, base.assumingMemoryBound(to: UInt8.self), pixels.count / 4)
    }

    /// The digest in lowercase hexadecimal, as `sha256sum` writes it.
    public mutating func finalize() -> String {
        var digest = [UInt8](repeating: 0, count: 32)
        cjs_sha256_final(&context, &digest)
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: digest.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] }, as: UTF8.self)
    }

    public static func hex(_ bytes: [UInt8]) -> String {
        var hasher = SHA256()
        hasher.update(bytes)
        return hasher.finalize()
    }
}
