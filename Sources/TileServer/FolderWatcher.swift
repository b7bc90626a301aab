import Foundation
import Synchronization
import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// Tells, within moments, which entries of a folder were created, replaced, written, renamed or
/// removed (Linux `inotify`, read by a thread of its own): the catalog then stops trusting what it
/// knew of them, so a replaced image is answered fresh at once instead of after its next periodic
/// check. Where `inotify` is refused (out of instances), nothing is watched and the periodic check
/// alone applies.
///
/// The one owner of its three descriptors (the `inotify` instance and the two ends of a pipe that
/// stops the thread); ``stop()`` (or release) closes them once the thread has ended.
final class FolderWatcher: Sendable {
    private let watch: Int32
    private let stopPipe: (read: Int32, write: Int32)
    private let done = DispatchSemaphore(value: 0)
    private let isStopped = Atomic<Bool>(false)

    /// Watches `folder`, calling `changed` (on the watcher's thread) with each entry's name.
    /// Nil when the kernel refuses an `inotify` instance or the watch.
    init?(folder: String, changed: @escaping @Sendable (String) -> Void) {
        // Owned values until all three exist: a refusal on the way closes what was opened.
        let raw = inotify_init1(Int32(IN_CLOEXEC))
        guard raw >= 0 else { return nil }
        let instance = OwnedDescriptor(adopting: raw)
        let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | IN_ATTRIB)
        var ends: [Int32] = [0, 0]
        guard inotify_add_watch(instance.raw, folder, mask) >= 0, pipe(&ends) == 0 else { return nil }
        let reading = OwnedDescriptor(adopting: ends[0])
        let writing = OwnedDescriptor(adopting: ends[1])
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        let watch = instance.take()
        self.watch = watch
        stopPipe = (reading.take(), writing.take())
        let thread = Thread { [watch, stopPipe, done] in
            Self.run(watch: watch, stop: stopPipe.read, changed)
            done.signal()
        }
        thread.name = "tiler.watch"
        thread.start()
    }

    deinit { stop() }

    /// Stops the thread and closes the descriptors; later calls do nothing.
    func stop() {
        guard isStopped.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged else { return }
        var byte: UInt8 = 1
        _ = write(stopPipe.write, &byte, 1)
        done.wait()
        close(watch)
        close(stopPipe.read)
        close(stopPipe.write)
    }

    private static func run(watch: Int32, stop: Int32, _ changed: @Sendable (String) -> Void) {
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            var fds = [pollfd(fd: watch, events: Int16(POLLIN), revents: 0), pollfd(fd: stop, events: Int16(POLLIN), revents: 0)]
            guard poll(&fds, 2, -1) >= 0 || errno == EINTR else { return }
            if fds[1].revents != 0 { return }
            guard fds[0].revents != 0 else { continue }
            let count = read(watch, &buffer, buffer.count)
            guard count > 0 else { if count < 0 && (errno == EINTR || errno == EAGAIN) { continue } else { return } }
            // inotify_event: wd (4), mask (4), cookie (4), len (4), then len bytes of NUL-padded name.
            var offset = 0
            while offset + 16 <= count {
                let length = buffer.withUnsafeBytes { Int($0.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self)) }
                let name = buffer[(offset + 16)..<min(count, offset + 16 + length)].prefix { $0 != 0 }
                if !name.isEmpty { changed(String(decoding: name, as: UTF8.self)) }
                offset += 16 + length
            }
        }
    }
}
