import Foundation

/// The small JSON document that describes a persistent store.
struct StoreManifest: Codable, Equatable {
    static let currentFormatVersion = 1
    static let fileName = "manifest.json"

    struct Level: Codable, Equatable {
        var storedWidth: Int
        var storedHeight: Int
    }

    var formatVersion: Int
    var storedWidth: Int
    var storedHeight: Int
    var orientation: Int
    var tileSize: Int
    var levels: [Level]
    var sourceByteCount: Int
    /// FNV-1a 64 of the source bytes, in hex: enough to tell whether a store came from a given file.
    var sourceFingerprint: String
    var warningCount: Int
    var wasTruncated: Bool

    static func levelFileName(_ index: Int) -> String { "level-\(index).tiles" }

    func encoded() throws(TileError) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        do { return try encoder.encode(self) } catch {
            throw TileError(.invalidStore, "cannot encode the store manifest: \(error)")
        }
    }

    static func decode(_ data: Data, path: String) throws(TileError) -> StoreManifest {
        do { return try JSONDecoder().decode(StoreManifest.self, from: data) } catch {
            throw TileError(.invalidStore, "\(path): the manifest is not readable: \(error)")
        }
    }
}

/// FNV-1a, 64 bits: a cheap running fingerprint of the source bytes.
struct Fingerprint {
    private(set) var value: UInt64 = 0xcbf2_9ce4_8422_2325

    mutating func add(_ bytes: UnsafeRawBufferPointer) {
        var h = value
        for byte in bytes { h = (h ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        value = h
    }

    var hex: String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}
