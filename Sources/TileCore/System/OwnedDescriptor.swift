#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A file descriptor this process owns, as a value that cannot be copied: closed when the value
/// ends (an error thrown, a scope left, the class that holds it released), unless handed on whole
/// (``take()``) to the one owner that keeps it (``LevelFiles``, a C object such as libjpeg's
/// coefficient file).
///
/// Every `open`, `mkstemp` and the like of TileCore's returns one (``SystemCall``), so no error path
/// has to remember to close what was opened before it.
package struct OwnedDescriptor: ~Copyable, Sendable {
    /// The descriptor, lent for calls; the value still owns it.
    package let raw: Int32

    /// Takes ownership of `raw` (>= 0), just returned by a system call.
    package init(adopting raw: Int32) {
        precondition(raw >= 0, "not a descriptor")
        self.raw = raw
    }

    /// Ends the value without closing: the caller owns the descriptor from now on.
    package consuming func take() -> Int32 {
        let raw = self.raw
        discard self
        return raw
    }

    deinit { _ = close(raw) }
}
