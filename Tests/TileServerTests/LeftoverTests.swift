import Foundation
import Testing
import TestSupport
import TileCore
import TileServer

/// A server that starts after another was killed mid-upload or mid-build.
@Suite("Leftovers of killed builds")
struct LeftoverTests {
    @Test("a catalog starting removes the stagings of uploads (in the folder) and builds (in the cache) no one holds")
    func startRemovesStagings() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("leftovers-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let cache = "\(folder)/.cache"
        try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: true)
        for (parent, name, file) in [
            (folder, "..upload-scan-123.tiles.partial-4242-7", "pyramid.tif"), (cache, ".photo.tiles.partial-4242-8", "level-0.tiles"),
            (folder, ".notes.partial-1-2", "notes.txt")
        ] {
            try FileManager.default.createDirectory(atPath: "\(parent)/\(name)", withIntermediateDirectories: false)
            #expect(FileManager.default.createFile(atPath: "\(parent)/\(name)/\(file)", contents: Data("x".utf8)))
        }
        _ = try ImageCatalog(root: folder, cache: cache)
        #expect(!FileManager.default.fileExists(atPath: "\(folder)/..upload-scan-123.tiles.partial-4242-7"))
        #expect(!FileManager.default.fileExists(atPath: "\(cache)/.photo.tiles.partial-4242-8"))
        #expect(FileManager.default.fileExists(atPath: "\(folder)/.notes.partial-1-2/notes.txt"))  // not a store's files
    }
}
