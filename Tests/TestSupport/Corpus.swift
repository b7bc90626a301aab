public import Foundation

/// The external fixture corpus in `../shared/fixtures/jpeg` (beside the package), when present.
public enum Corpus {
    /// The package's folder (this file is Tests/TestSupport/Corpus.swift).
    public static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    public static var sharedFolder: URL {
        if let path = ProcessInfo.processInfo.environment["TILEDIMAGEKIT_SHARED"] { return URL(fileURLWithPath: path) }
        return packageRoot.deletingLastPathComponent().appendingPathComponent("shared")
    }

    public static var folder: URL { sharedFolder.appendingPathComponent("fixtures/jpeg") }

    public static var isPresent: Bool { FileManager.default.fileExists(atPath: folder.appendingPathComponent("manifest.csv").path) }

    public static let skipMessage = "fixture corpus not found at ../shared/fixtures/jpeg: corpus tests skipped"

    public struct Entry: Sendable, CustomStringConvertible {
        public var fields: [String: String]
        public var file: String { fields["file"]! }
        public var path: String { Corpus.folder.appendingPathComponent(file).path }
        public subscript(_ key: String) -> String { fields[key] ?? "" }
        public var description: String { file }
    }

    /// The manifest's rows (an empty list when the corpus is absent).
    public static let entries: [Entry] = {
        guard let text = try? String(contentsOf: folder.appendingPathComponent("manifest.csv"), encoding: .utf8) else {
            return []
        }
        let rows = parseCSV(text)
        guard let header = rows.first else { return [] }
        return rows.dropFirst().filter { $0.count == header.count }.map {
            Entry(fields: Dictionary(uniqueKeysWithValues: zip(header, $0)))
        }
    }()

    /// RFC 4180 CSV: quoted fields may hold commas, quotes ("") and newlines.
    public static func parseCSV(_ text: String) -> [[String]] {
        var rows: [[String]] = [], row: [String] = [], field = ""
        var quoted = false
        var chars = Array(text).makeIterator()
        var lookahead: Character? = nil
        while let c = lookahead ?? chars.next() {
            lookahead = nil
            if quoted {
                if c == "\"" {
                    let next = chars.next()
                    if next == "\"" { field.append("\"") } else { quoted = false; lookahead = next }
                } else {
                    field.append(c)
                }
            } else if c == "\"" {
                quoted = true
            } else if c == "," {
                row.append(field); field = ""
            } else if c == "\n" || c == "\r\n" {
                row.append(field); rows.append(row); row = []; field = ""
            } else if c != "\r" {
                field.append(c)
            }
        }
        if !field.isEmpty || !row.isEmpty { row.append(field); rows.append(row) }
        return rows
    }
}
