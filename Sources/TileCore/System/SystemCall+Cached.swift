internal import CJpegShim

extension SystemCall {
    /// Reads `count` bytes at `offset` only if the page cache holds them all: one `preadv2` with
    /// `RWF_NOWAIT`, which never waits for the disk, so it may run on an event loop.
    /// - Returns: false when it would have had to wait (`EAGAIN`, a short read, or a kernel without
    ///   `RWF_NOWAIT`): read with ``readFully(_:into:count:offset:what:path:)`` on a thread that may block.
    static func readIfCached(_ fd: Int32, into destination: UnsafeMutableRawPointer, count: Int, offset: Int) -> Bool {
        let n = retrying { cjs_read_if_cached(fd, destination, count, Int64(offset)) }
        return n == count
    }
}
