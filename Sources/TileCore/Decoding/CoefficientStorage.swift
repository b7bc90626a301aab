/// Where a progressive (or other multi-scan) JPEG's coefficients are kept while it is decoded.
///
/// libjpeg reads such an image whole, as DCT coefficients, before its first row comes out: 128 bytes
/// per 8x8 block and component, about 1 GB for an 18000x18000 4:2:0 photo. On disk they go to a
/// temporary file (created exclusively, mode 0600, unlinked at once, in the build's folder) and only a
/// window of a few block rows per component stays in memory (about 14 MiB for that photo); the file
/// is closed, and its space freed, when the decode ends or fails. The page cache usually keeps the
/// file's pages, so the decode reads them back without touching the disk.
///
/// Single-scan (baseline) JPEGs are decoded row by row and need no coefficients at all: the setting
/// does not apply to them.
public enum CoefficientStorage: Sendable, Hashable {
    /// In memory when the coefficients take at most `memoryLimit` bytes, else on disk.
    case automatic(memoryLimit: Int)
    /// In memory, whatever their size (libjpeg's own arrays).
    case memory
    /// On disk, whatever their size (also for small images).
    case disk

    /// `.automatic(memoryLimit: 32 MiB)`: a 2-megapixel progressive photo stays in memory, a large one
    /// goes to disk.
    public static let `default` = CoefficientStorage.automatic(memoryLimit: 32 << 20)

    /// Whether coefficients of `byteCount` bytes go to disk.
    func usesDisk(forByteCount byteCount: Int) -> Bool {
        guard byteCount > 0 else { return false }
        switch self {
        case .automatic(let limit): return byteCount > limit
        case .memory: return false
        case .disk: return true
        }
    }
}
