import Foundation
import Testing
import TestSupport
@testable import TileCore

/// A TIFF store copied from elsewhere (a bucket's) by ``IncomingStore``: published whole by one rename,
/// or nothing left behind. The reference is the store a build wrote, whose bytes are copied.
@Suite("Stores copied in")
struct IncomingStoreTests {
    /// A folder with a TIFF store built from a 1500x1000 JPEG (`built.tiles`).
    static func builtStore() throws -> (folder: String, store: String) {
        let folder = NSTemporaryDirectory() + "incoming-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        var options = BuildOptions()
        options.storage = .persistent(path: "\(folder)/built.tiles")
        options.format = .tiff()
        _ = try TileBuilder.build(data: try Inputs.jpeg(width: 1500, height: 1000), options: options)
        return (folder, "\(folder)/built.tiles")
    }

    @Test("a store copied in two parts reads as the original: every stored tile its bytes; the manifest's TIFF name made the build's")
    func copied() throws {
        let (folder, built) = try Self.builtStore()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let tiff = try Data(contentsOf: URL(fileURLWithPath: "\(built)/pyramid.tif"))
        // As a bucket's manifest names it: its TIFF under the object's name, with a section of its own.
        var manifest = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: "\(built)/manifest.json"))) as? [String: Any])
        var details = try #require(manifest["tiff"] as? [String: Any])
        details["file"] = "pyramid-0123abcd.tif"
        manifest["tiff"] = details
        manifest["object"] = ["key": "stores/built.tiles/pyramid-0123abcd.tif", "size": tiff.count]
        let incoming = try IncomingStore(path: "\(folder)/copy.tiles", byteCount: tiff.count)
        let half = tiff.count / 2
        try tiff[..<half].withUnsafeBytes { try incoming.append($0) }
        #expect(!FileManager.default.fileExists(atPath: "\(folder)/copy.tiles"), "nothing at the store's path before it is published")
        try tiff[half...].withUnsafeBytes { try incoming.append($0) }
        try incoming.publish(manifest: try JSONSerialization.data(withJSONObject: manifest))

        let original = try TiledImage.open(store: built)
        let copy = try TiledImage.open(store: "\(folder)/copy.tiles")
        #expect(copy.geometry == original.geometry && copy.isComplete)
        for level in 0..<original.levelCount {
            let l = original.geometry.levels[level]
            for row in 0..<l.rows {
                for column in 0..<l.columns {
                    #expect(
                        try copy.storedJPEGTile(level: level, column: column, row: row)
                            == original.storedJPEGTile(level: level, column: column, row: row), "tile \(level)/\(column)/\(row)")
                }
            }
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: "\(folder)/copy.tiles").sorted()
        #expect(names == ["manifest.json", "pyramid.tif"], "\(names)")
        let written = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: "\(folder)/copy.tiles/manifest.json"))) as? [String: Any])
        #expect((written["tiff"] as? [String: Any])?["file"] as? String == "pyramid.tif" && written["object"] == nil)
    }

    @Test("too few bytes, too many, or a raw store's manifest: refused, and nothing left in the folder once let go")
    func refused() throws {
        let (folder, built) = try Self.builtStore()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let tiff = try Data(contentsOf: URL(fileURLWithPath: "\(built)/pyramid.tif"))
        let manifest = try Data(contentsOf: URL(fileURLWithPath: "\(built)/manifest.json"))
        do {
            let short = try IncomingStore(path: "\(folder)/short.tiles", byteCount: tiff.count)
            try tiff.dropLast().withUnsafeBytes { try short.append($0) }
            #expect(throws: TileError.self) { try short.publish(manifest: manifest) }
            let long = try IncomingStore(path: "\(folder)/long.tiles", byteCount: tiff.count - 1)
            #expect(throws: TileError.self) { try tiff.withUnsafeBytes { try long.append($0) } }
            var raw = try #require(try JSONSerialization.jsonObject(with: manifest) as? [String: Any])
            raw["format"] = nil
            raw["tiff"] = nil
            let notTIFF = try IncomingStore(path: "\(folder)/raw.tiles", byteCount: tiff.count)
            try tiff.withUnsafeBytes { try notTIFF.append($0) }
            #expect(throws: TileError.self) { try notTIFF.publish(manifest: try JSONSerialization.data(withJSONObject: raw)) }
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder).count > 1, "their staging folders while they live")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["built.tiles"])
    }
}
