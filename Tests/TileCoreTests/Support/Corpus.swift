import Foundation

/// The external fixture corpus in `../shared/fixtures/jpeg` (beside the package), when present.
enum Corpus {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    static var sharedFolder: URL {
        if let path = ProcessInfo.processInfo.environment["TILEDIMAGEKIT_SHARED"] { return URL(fileURLWithPath: path) }
        return packageRoot.deletingLastPathComponent().appendingPathComponent("shared")
    }

    static var folder: URL { sharedFolder.appendingPathComponent("fixtures/jpeg") }

    static var isPresent: Bool { FileManager.default.fileExists(atPath: folder.appendingPathComponent("manifest.csv").path) }

    static let skipMessage = "fixture corpus not found at ../shared/fixtures/jpeg: corpus tests skipped"

    struct Entry: Sendable, CustomStringConvertible {
        var fields: [String: String]
        var file: String { fields["file"]! }
        var path: String { Corpus.folder.appendingPathComponent(file).path }
        subscript(_ key: String) -> String { fields[key] ?? "" }
        var description: String { file }
    }

    /// The manifest's rows (an empty list when the corpus is absent).
    static let entries: [Entry] = {
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
    static func parseCSV(_ text: String) -> [[String]] {
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
                } else { field.append(c) }
            } else if c == "\"" { quoted = true }
            else if c == "," { row.append(field); field = "" }
            else if c == "\n" || c == "\r\n" { row.append(field); rows.append(row); row = []; field = "" }
            else if c != "\r" { field.append(c) }
        }
        if !field.isEmpty || !row.isEmpty { row.append(field); rows.append(row) }
        return rows
    }
}
