import NIOConcurrencyHelpers
import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// An advisory lock (`flock`) on one image's lock file in the cache folder, held for the whole of its
/// build: servers that share a cache folder (several instances behind a load balancer) build each
/// image once, and the others reuse the store. The lock file (`.ID.lock`) stays; its descriptor is
/// this value's own, closed (and the lock released) when the value goes, or by the kernel when the
/// process ends, however it ends.
///
/// Its descriptor is opened once and kept while the lock is tried again: closing a descriptor opened
/// for writing is the event (`IN_CLOSE_WRITE`) a waiter wakes on, so a waiter closing its own after
/// each try would wake itself.
final class BuildLock: Sendable {
    private let descriptor: OwnedDescriptor
    private let held = NIOLockedValueBox(false)

    private init(descriptor: consuming OwnedDescriptor) { self.descriptor = descriptor }

    /// The name of `id`'s lock file in the cache folder.
    static func fileName(_ id: String) -> String { ".\(ImageCatalog.cacheName(id)).lock" }

    /// Opens the lock file of `id` in `cache`, not locked yet. Blocking (opens a file).
    /// - Throws: ``TileCore/TileError/Code/io`` when the lock file cannot be opened.
    static func open(_ id: String, in cache: String) throws(TileError) -> BuildLock {
        let path = "\(cache)/\(fileName(id))"
        let raw = Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard raw >= 0 else { throw TileError(.io, "cannot open the build lock \(path): \(String(cString: strerror(errno)))") }
        return BuildLock(descriptor: OwnedDescriptor(adopting: raw))
    }

    /// Takes the lock when no one holds it (a system call that does not wait).
    /// - Returns: whether this value holds it now.
    func tryTake() -> Bool {
        held.withLockedValue { held in
            if !held { held = flock(descriptor.raw, LOCK_EX | LOCK_NB) == 0 }
            return held
        }
    }
}

/// Changes of a folder's entries as its ``FolderWatcher`` reports them, counted by name, for tasks
/// that wait for one (another process's build lock released: its lock file closed).
final class FolderChanges: Sendable {
    private struct State {
        var counts: [String: Int] = [:]
        var waiters: [Int: (name: String, continuation: CheckedContinuation<Void, Never>)] = [:]
        var nextWaiter = 0
    }
    private let state = NIOLockedValueBox(State())

    /// Changes of `name` so far: what ``wait(for:after:)`` compares with. Take it before looking at
    /// the entry, so that a change while looking is not missed.
    func count(of name: String) -> Int { state.withLockedValue { $0.counts[name, default: 0] } }

    /// Says `name` changed (the watcher's thread), waking who waits for it.
    func changed(_ name: String) {
        let woken = state.withLockedValue { state -> [CheckedContinuation<Void, Never>] in
            state.counts[name, default: 0] += 1
            let matching = state.waiters.filter { $0.value.name == name }
            for key in matching.keys { state.waiters[key] = nil }
            return matching.values.map(\.continuation)
        }
        for continuation in woken { continuation.resume() }
    }

    /// Returns once `name` has changed more than `count` times, or the task is cancelled.
    func wait(for name: String, after count: Int) async {
        let key = state.withLockedValue { state -> Int in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLockedValue { state -> Bool in
                    if state.counts[name, default: 0] > count || Task.isCancelled { return true }
                    state.waiters[key] = (name, continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            state.withLockedValue { $0.waiters.removeValue(forKey: key) }?.continuation.resume()
        }
    }

    /// ``wait(for:after:)`` until `deadline` at the latest.
    func wait(for name: String, after count: Int, until deadline: ContinuousClock.Instant) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.wait(for: name, after: count) }
            group.addTask { try? await Task.sleep(until: deadline) }
            await group.next()
            group.cancelAll()
        }
    }
}
