import Testing
@testable import TileServer

/// What a build waits on for another server's lock: a name's changes counted, each waking who waits.
@Suite("FolderChanges")
struct FolderChangesTests {
    @Test("a wait returns once the name changes past the count taken; a change before the wait is not lost; others do not wake it")
    func waits() async {
        let changes = FolderChanges()
        let name = ".photo.lock"
        let before = changes.count(of: name)
        #expect(before == 0)
        // A change between the count and the wait: the wait returns at once.
        changes.changed(name)
        await changes.wait(for: name, after: before)
        #expect(changes.count(of: name) == 1)
        // A wait for the next change, woken by it (another name's change does not end it).
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await changes.wait(for: name, after: 1) }
            changes.changed(".other.lock")
            changes.changed(name)
            await group.waitForAll()
        }
        #expect(changes.count(of: name) == 2 && changes.count(of: ".other.lock") == 1)
    }

    @Test("a cancelled wait returns; a wait with a deadline returns by it without a change")
    func cancelledAndDeadline() async {
        let changes = FolderChanges()
        let waiter = Task { await changes.wait(for: ".x.lock", after: 0) }
        waiter.cancel()
        await waiter.value
        await changes.wait(for: ".x.lock", after: 0, until: .now + .milliseconds(20))
        #expect(changes.count(of: ".x.lock") == 0)
    }
}
