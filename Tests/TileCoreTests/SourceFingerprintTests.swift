import Foundation
import Testing
import TestTraits
import TestSupport
@testable import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// A source's version changes whenever its bytes can have (issue 37, point 9): an edit in place whose
/// modification time is set back, in the middle of a large file (outside the hashed ends), still
/// changes it, through the change time, which no one can set.
@Suite("Source fingerprints", .ownThreads)
struct SourceFingerprintTests {
    @Test("a modification time past what nanoseconds in 64 bits hold (the year 2300) is held at the end, not a crash")
    func farTimes() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("fingerprint-\(UUID().uuidString)").path
        defer { unlink(path) }
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: path))
        // 2300-01-01, as `date -u -d 2300-01-01 +%s` gives it (ext4 and tmpfs keep it; the year 1600 ext4
        // turns into 1901, inside the range).
        #expect(FileFacts.setModificationTime(path, seconds: 10_413_792_000))
        #expect(try SourceFingerprint.read(path: path).identity.modificationTime == .max)
        #expect(FileFacts.setModificationTime(path, seconds: 1_600_000_000, nanoseconds: 5))
        #expect(try SourceFingerprint.read(path: path).identity.modificationTime == 1_600_000_000_000_000_005)
    }

    @Test("an in-place edit of the middle with the modification time restored gives another version; an untouched file the same")
    func inPlaceEdit() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("fingerprint-\(UUID().uuidString)").path
        defer { unlink(path) }
        let size = 1 << 20  // past the two 64 KiB ends that are hashed
        try Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) }).write(to: URL(fileURLWithPath: path))
        #expect(FileFacts.setModificationTime(path, seconds: 1_600_000_000))
        let before = try SourceFingerprint.read(path: path)
        #expect(try SourceFingerprint.read(path: path) == before, "read twice, unchanged")
        // One byte in the middle written in place (same inode, same size), the old time put back.
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.seek(toOffset: UInt64(size / 2))
        try handle.write(contentsOf: Data([0xAA]))
        try handle.close()
        #expect(FileFacts.setModificationTime(path, seconds: 1_600_000_000))
        // The kernel's change times are as coarse as its clock tick: set the time again until the
        // change time has moved (a state, waited for; at once on most runs).
        let deadline = ContinuousClock.now + .seconds(10)
        while try SourceFingerprint.read(path: path).identity.changeTime == before.identity.changeTime, ContinuousClock.now < deadline {
            usleep(1000)
            #expect(FileFacts.setModificationTime(path, seconds: 1_600_000_000))
        }
        let after = try SourceFingerprint.read(path: path)
        #expect(after.identity.modificationTime == before.identity.modificationTime)
        #expect(after.identity.inode == before.identity.inode && after.sampleHash == before.sampleHash)
        // The change time, read with stat here: after the edit, and in the version.
        var info = stat()
        #expect(stat(path, &info) == 0)
        #expect(after.identity.changeTime == Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec))
        #expect(after.description != before.description)
    }
}
