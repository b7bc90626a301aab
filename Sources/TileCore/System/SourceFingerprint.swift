#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Which version of a file an image was made from: the file's identity (device, inode, size,
/// modification and change times) and a hash of its first and last 64 KiB. Replacing a file (a new
/// inode, a copy over it, a touch) changes it, and so does writing it in place with its modification
/// time set back (the change time, which no one can set, moves); a server derives its validators (ETags) from it, so they change
/// exactly when the pixels can, and stay the same across restarts while the file does.
///
/// Reading one costs a `stat` and two 64 KiB reads: blocking, so call it off event loops and Swift's
/// cooperative pool.
public struct SourceFingerprint: Sendable, Hashable, CustomStringConvertible {
    /// The `stat` fields that change when the file is replaced or written.
    public struct Identity: Sendable, Hashable {
        public var device: UInt64
        public var inode: UInt64
        public var byteCount: Int
        /// Nanoseconds since the epoch.
        public var modificationTime: Int64
        /// When the file's contents or attributes last changed (`st_ctim`), nanoseconds since the epoch.
        public var changeTime: Int64 = 0

        /// When the file last changed here, nanoseconds since the epoch: the later of its modification
        /// and change times. Unlike the modification time, which anyone may set back (`touch -d`,
        /// `cp -p`, a backup put back), it never goes backwards when the file is replaced or written:
        /// what a `Last-Modified` must be for `If-Modified-Since` to stay right.
        public var lastChangeTime: Int64 { max(modificationTime, changeTime) }

        /// An identity given field by field (one not a file's: an object in a bucket has no device nor inode).
        public init(device: UInt64, inode: UInt64, byteCount: Int, modificationTime: Int64, changeTime: Int64 = 0) {
            (self.device, self.inode, self.byteCount, self.modificationTime, self.changeTime) = (
                device, inode, byteCount, modificationTime, changeTime
            )
        }
    }

    public var identity: Identity
    /// FNV-1a 64 of the first and the last 64 KiB (the whole file when smaller).
    public var sampleHash: UInt64

    /// Bytes hashed at each end of the file.
    static let sampleByteCount = 64 << 10

    /// `device-inode-size-mtime-ctime-hash`, in hexadecimal: stable across processes.
    public var description: String {
        [
            identity.device, identity.inode, UInt64(identity.byteCount), UInt64(bitPattern: identity.modificationTime),
            UInt64(bitPattern: identity.changeTime), sampleHash
        ].map { String($0, radix: 16) }.joined(separator: "-")
    }

    public init(identity: Identity, sampleHash: UInt64) {
        self.identity = identity
        self.sampleHash = sampleHash
    }

    /// The identity `stat` gives a file.
    static func identity(of info: stat) -> Identity {
        Identity(
            device: UInt64(info.st_dev), inode: UInt64(info.st_ino), byteCount: Int(info.st_size),
            modificationTime: nanoseconds(info.st_mtim), changeTime: nanoseconds(info.st_ctim))
    }

    /// A file time in nanoseconds since 1970, held at the ends of `Int64` (the years 1677 and 2262):
    /// anyone can set a file's modification time past them (`touch -d 2300-01-01`), and a version is
    /// still told from the change time, which no one can set.
    static func nanoseconds(_ time: timespec) -> Int64 {
        let (product, overflow) = Int64(time.tv_sec).multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return time.tv_sec < 0 ? .min : .max }
        let (sum, past) = product.addingReportingOverflow(Int64(time.tv_nsec))
        return past ? .max : sum
    }

    /// The fingerprint of the regular file at `path`, opened without following a final symlink and
    /// without blocking on a FIFO (`O_NOFOLLOW | O_NONBLOCK`), checked with `fstat`.
    /// - Parameter known: a fingerprint read earlier: when the file's identity is unchanged its hash
    ///   is kept, and nothing is read but the `stat`.
    /// - Throws: ``TileError/Code/io`` (`ENOENT`, `ELOOP` for a symlink, ...), ``TileError/Code/invalidStore``
    ///   when the path is not a regular file.
    public static func read(path: String, known: SourceFingerprint? = nil) throws(TileError) -> SourceFingerprint {
        var info = stat()
        let fd = try SystemCall.openRegularFile(path, info: &info)
        let identity = identity(of: info)
        if let known, known.identity == identity { return known }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        let sample = UnsafeMutableRawBufferPointer.allocate(byteCount: sampleByteCount, alignment: 16)
        defer { sample.deallocate() }
        let size = identity.byteCount, side = sampleByteCount
        // The first and last 64 KiB; a file of up to 128 KiB whole, in two reads.
        let ranges = size <= 2 * side ? [(0, min(side, size)), (side, max(0, size - side))] : [(0, side), (size - side, side)]
        for (offset, count) in ranges where count > 0 {
            try SystemCall.readFully(fd.raw, into: sample.baseAddress!, count: count, offset: offset, what: "the file", path: path)
            for byte in UnsafeRawBufferPointer(rebasing: sample[..<count]) { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        }
        return SourceFingerprint(identity: identity, sampleHash: hash)
    }
}
