import Foundation
import Testing
import TestTraits
@testable import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// Who owns the level files' descriptors: whatever owns the writer's threads, so they are closed only
/// after those threads have stopped (issue 11).
@Suite("Level file ownership", .ownThreads)
struct OwnershipTests {
    @Test(
        "a pyramid writer keeps its level files open while it lives, however its other owners let go",
        arguments: [LevelWriter.bands(), .bands(.init(threading: .onCaller)), .window])
    func writerOwnsItsFiles(writer kind: LevelWriter) throws {
        let geometry = try TileGeometry(storedWidth: 700, storedHeight: 500)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("owner-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // Closed synchronously when released, as a persistent store's files are.
        var files: LevelFiles? = try LevelFiles.opening(geometry.levels.count) { index throws(TileError) in
            try SystemCall.createExclusive("\(folder)/level-\(index)")
        }
        let descriptors = files!.descriptors
        let progress = TileRowCounters(count: geometry.levels.count)
        var writer: PyramidWriter? = try PyramidWriter(geometry: geometry, files: files!, progress: progress, writer: kind)
        files = nil  // what a failed build's image and store do when they are released first
        for fd in descriptors { #expect(fcntl(fd, F_GETFD) != -1, "descriptor \(fd) closed under a live writer") }
        // The writer still works on them: every row goes through, every tile row completes.
        var rows = 0
        while rows < 500 {
            rows += try writer!.withRowBuffer { (buffer, stride, capacity) throws(TileError) -> (rows: Int, result: Int) in
                let count = min(capacity, 500 - rows)
                buffer.baseAddress!.initializeMemory(as: UInt8.self, repeating: 90, count: stride * count)
                return (count, count)
            }
        }
        try writer!.finish()
        #expect(progress[0] == geometry.levels[0].storedRows)
        writer = nil
    }

    @Test("files opened one by one are all closed when one of them fails")
    func openingFailsWhole() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("owner-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        func openInFolder() -> [String] {  // this process's descriptors of files in the folder (deleted or not)
            let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
            return entries.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)") }
                .filter { $0.hasPrefix(folder + "/") }
        }
        var opened = 0
        #expect(throws: TileError.self) {
            _ = try LevelFiles.opening(4) { index throws(TileError) in
                guard index < 3 else {
                    #expect(openInFolder().count == 3, "the three files made are open while the fourth is made")
                    throw TileError(.io, "the fourth file fails")
                }
                opened += 1
                return try SystemCall.createAnonymous(in: folder)
            }
        }
        #expect(opened == 3)
        #expect(openInFolder().isEmpty, "\(openInFolder())")
    }
}
