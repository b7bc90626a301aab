import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The small JSON document that describes a persistent store.
struct StoreManifest: Codable, Equatable {
    static let currentFormatVersion = 1
    /// A TIFF store's: readers of version 1 refuse it rather than look for level files.
    static let tiffFormatVersion = 2
    static let fileName = "manifest.json"
    /// The TIFF of a TIFF store.
    static let tiffFileName = "pyramid.tif"
    /// A raw store's ICC profile (a TIFF store keeps it in its TIFF).
    static let colorProfileFileName = "profile.icc"

    /// How a TIFF store's pyramid was made.
    struct TIFFDetails: Codable, Equatable {
        /// The TIFF's name in the store folder.
        var file: String
        /// `"copied"`: level 0's tiles hold the source's own DCT coefficients (lossless; a turned
        /// image's turned in the DCT domain); `"encoded"`: level 0 was decoded and encoded at `quality`
        /// (CMYK, RGB-coded, a turned image whose flipped side is not a whole number of MCUs, ...).
        var levelZero: String
        /// Why level 0 was encoded, when it was; how a turned image's was copied, when it was.
        var levelZeroReason: String?
        /// JPEG quality of the encoded levels.
        var quality: Int
        /// The quantisation tables `quality` scaled; absent in stores written before there was a
        /// choice (Annex K's).
        var tables: TIFFWriting.Tables?
        var bigTIFF: Bool
        /// The orientation the source's pixels were turned by (the TIFF is upright).
        var sourceOrientation: Int
        /// `"webp"` for WebP tiles (then `quality` and `tables` are unused); absent for JPEG tiles.
        var compression: String?
        /// WebP tiles' quality, and whether they are lossless.
        var webpQuality: Int?
        var webpLossless: Bool?
    }

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
    /// `nil` (raw level files) or `"tiff"`.
    var format: String?
    var tiff: TIFFDetails?
    /// The file in the store holding the source's ICC profile (``colorProfileFileName``); absent when
    /// the source had none, and in stores written before profiles were kept.
    var colorProfile: String?

    static func levelFileName(_ index: Int) -> String { "level-\(index).tiles" }

    func encoded() throws(TileError) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        do { return try encoder.encode(self) } catch {
            throw TileError(.invalidStore, "cannot encode the store manifest: \(error)")
        }
    }

    /// The largest manifest read: a store of 21 levels takes about 2 KB.
    static let maximumByteCount = 1 << 20

    /// Reads and decodes the manifest of the store at `path` (a regular file only, never a FIFO).
    static func read(store path: String) throws(TileError) -> StoreManifest {
        let file = "\(path)/\(fileName)"
        BlockingCallCheck.check("read \(file)")
        guard access(path, F_OK) == 0 else {
            throw SystemCall.error("cannot open the store", path: path)
        }
        let data: [UInt8]
        do { data = try InputFile(regularFile: file).readAll(limit: maximumByteCount) } catch {
            if error.errno == ENOENT { throw TileError(.invalidStore, "\(path) is not a tile store (it has no \(fileName))") }
            if error.code == .invalidArgument { throw TileError(.invalidStore, error.message) }
            throw error
        }
        return try decode(Data(data), path: path)
    }

    static func decode(_ data: Data, path: String) throws(TileError) -> StoreManifest {
        do { return try JSONDecoder().decode(StoreManifest.self, from: data) } catch let error as DecodingError {
            // Foundation on Linux reports a number that does not fit its field (1800.5 for an Int) as
            // invalid JSON: name the field if the JSON itself parses.
            if case .dataCorrupted(let context) = error, context.codingPath.isEmpty,
                let object = try? JSONSerialization.jsonObject(with: data), let field = firstFraction(in: object, path: "")
            {
                throw TileError(.invalidStore, "\(path)/\(fileName): `\(field.path)` is not an integer (\(field.value))")
            }
            throw TileError(.invalidStore, "\(path)/\(fileName): \(describe(error))")
        } catch {
            throw TileError(.invalidStore, "\(path)/\(fileName) is not valid JSON")
        }
    }

    /// One sentence for a decoding error, naming the field (not Swift's debug dump).
    static func describe(_ error: DecodingError) -> String {
        func field(_ path: [any CodingKey]) -> String {
            path.isEmpty
                ? "the document"
                : "`"
                    + path.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
                    .joined(separator: ".").replacingOccurrences(of: ".[", with: "[") + "`"
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "\(field(context.codingPath + [key])) is missing"
        case .typeMismatch(let type, let context), .valueNotFound(let type, let context):
            return "\(field(context.codingPath)) is not \(Self.name(of: type))"
        case .dataCorrupted(let context):
            // JSONDecoder reports a number that does not fit the field (1800.5 for an Int) this way.
            if context.codingPath.isEmpty { return "not valid JSON" }
            return "\(field(context.codingPath)) has a value that is not valid for it"
        @unknown default:
            return "not a valid manifest"
        }
    }

    /// The first number in a parsed JSON value that is not a whole number, and where it is.
    private static func firstFraction(in value: Any, path: String) -> (path: String, value: String)? {
        if let dictionary = value as? [String: Any] {
            for key in dictionary.keys.sorted() {
                if let found = firstFraction(in: dictionary[key]!, path: path.isEmpty ? key : "\(path).\(key)") { return found }
            }
        } else if let array = value as? [Any] {
            for (index, element) in array.enumerated() {
                if let found = firstFraction(in: element, path: "\(path)[\(index)]") { return found }
            }
        } else if let number = value as? NSNumber, !(value is Bool) {
            let double = number.doubleValue
            if double != double.rounded() || abs(double) >= 9.2e18 { return (path, "\(number)") }
        }
        return nil
    }

    private static func name(of type: Any.Type) -> String {
        switch type {
        case is Int.Type: return "an integer"
        case is String.Type: return "a string"
        case is Bool.Type: return "true or false"
        default: return "of the expected type"
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
