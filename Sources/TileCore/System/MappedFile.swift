#if canImport(Glibc)
import Glibc
#endif

// The Linux-only calls of the Swift side live here: transparent huge pages for a mapping
// (`MADV_HUGEPAGE`) and `MADV_POPULATE_READ` (Linux 5.14). The C side's are in aio.c (Linux AIO) and
// band_writer.c (`O_DIRECT`). The package builds for Linux only (Package.swift claims no other platform).

/// A read-only shared mapping of a whole level file; unmapped when released.
final class MappedFile: @unchecked Sendable {
    // @unchecked: the pointer and length never change, and the mapping is only read.
    let base: UnsafeRawPointer
    let byteCount: Int

    init(fd: Int32, byteCount: Int, path: String) throws(TileError) {
        guard let m = mmap(nil, byteCount, PROT_READ, MAP_SHARED, fd, 0), m != MAP_FAILED else {
            throw SystemCall.error("cannot map", path: path)
        }
        base = UnsafeRawPointer(m)
        self.byteCount = byteCount
        // Faults read 2 MiB folios (where transparent huge pages are enabled for madvise): fewer
        // faults for transformed reads, and large page-cache folios for later preads.
        #if os(Linux)
        _ = madvise(m, byteCount, MADV_HUGEPAGE)
        #endif
    }

    deinit { munmap(UnsafeMutableRawPointer(mutating: base), byteCount) }

    /// Reads a range into the page cache through this mapping (`MADV_POPULATE_READ`: an I/O error is
    /// an error return, not a SIGBUS), then drops the mapping's pages again. Best effort.
    func populate(offset: Int, byteCount: Int) {
        let (start, length) = pages(offset, byteCount)
        if madvise(UnsafeMutableRawPointer(mutating: base + start), length, Self.populateRead) == 0 {
            release(offset: offset, byteCount: byteCount)
        }
    }

    /// The whole pages holding a range (madvise and mincore want a page-aligned start; a tile of a
    /// size not a multiple of 32 pixels does not start on a page): their offset and length.
    private func pages(_ offset: Int, _ byteCount: Int) -> (offset: Int, length: Int) {
        let start = offset / Self.pageSize * Self.pageSize
        return (start, offset + byteCount - start)
    }

    /// Whether every page of a range is in the page cache (`mincore`: nothing is read or mapped).
    func isResident(offset: Int, byteCount: Int) -> Bool {
        let (start, length) = pages(offset, byteCount)
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: (length + Self.pageSize - 1) / Self.pageSize) { vector in
            mincore(UnsafeMutableRawPointer(mutating: base + start), length, vector.baseAddress) == 0
                && vector.allSatisfy { $0 & 1 != 0 }
        }
    }

    private static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))

    /// `MADV_POPULATE_READ` (Linux 5.14), which older C headers lack.
    private static let populateRead: Int32 = 22

    /// Drops this mapping's pages of one tile (the page cache keeps them), so reading many tiles does
    /// not pile mapped pages up in the process's resident set.
    func release(offset: Int, byteCount: Int) {
        let (start, length) = pages(offset, byteCount)
        _ = madvise(UnsafeMutableRawPointer(mutating: base + start), length, MADV_DONTNEED)
    }
}
