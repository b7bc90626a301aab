import Synchronization

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
    /// Bytes the mapping may have mapped since its pages were last dropped (``release(offset:byteCount:)``).
    private let mappedSinceRelease = Atomic<Int>(0)

    /// How many bytes one mapping may hold mapped before they are all dropped at once.
    static let releaseBatch = 16 << 20
    /// The folio size a read may map whole (with `MADV_HUGEPAGE`).
    static let folioBytes = 2 << 20

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
        let start = UnsafeMutableRawPointer(mutating: base + offset)
        if madvise(start, byteCount, Self.populateRead) == 0 { _ = madvise(start, byteCount, MADV_DONTNEED) }
    }

    /// `MADV_POPULATE_READ` (Linux 5.14), which older C headers lack.
    private static let populateRead: Int32 = 22

    /// Notes that `byteCount` bytes were read through the mapping; once reads may have mapped
    /// ``releaseBatch`` bytes (each read counted as at least one whole 2 MiB folio), all the mapping's
    /// pages are dropped at once (the page cache keeps them), so reading many tiles does not pile
    /// mapped pages up in the process's resident set: at most 16 MiB a mapping stays mapped.
    ///
    /// Not one tile at a time: the level's 2 MiB folios are mapped whole (``init(fd:byteCount:path:)``),
    /// and dropping a part of one splits the huge mapping, which flushes the TLB of every core running
    /// the process (an interrupt to each): about 30 us a tile on two cores (BENCHMARKS.md, serve-cold).
    /// Dropping whole folios once per eight tiles costs a fraction of that. A reader on another thread
    /// meanwhile faults its pages back in from the page cache: the same bytes.
    func release(offset: Int, byteCount: Int) {
        let mapped = max(byteCount, Self.folioBytes)
        guard mappedSinceRelease.wrappingAdd(mapped, ordering: .relaxed).newValue >= Self.releaseBatch else { return }
        mappedSinceRelease.store(0, ordering: .relaxed)
        _ = madvise(UnsafeMutableRawPointer(mutating: base), self.byteCount, MADV_DONTNEED)
    }
}
