import ArgumentParser
import Foundation

#if canImport(Glibc)
import Glibc
#endif

@main
struct Tiler: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tiler",
        abstract: "Turn huge images (JPEG, PNG, TIFF, JPEG 2000) into zoomable tile pyramids with bounded memory, and serve them.",
        subcommands: [
            DemoCommand.self, BuildCommand.self, ExportCommand.self, ServeCommand.self, RenderCommand.self, InfoCommand.self,
            ThumbCommand.self
        ])

    static func main() async {
        // A file-size limit (ulimit -f) must end a build with an I/O error (EFBIG), not kill the tool.
        signal(SIGXFSZ, SIG_IGN)
        if let typed = CommandLine.arguments.dropFirst().first, let meant = suggestion(for: typed) {
            FileHandle.standardError.write(Data("tiler: no command named \"\(typed)\"; did you mean \"\(meant)\"? (tiler --help lists them)\n".utf8))
            Glibc.exit(ExitCode.validationFailure.rawValue)
        }
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }

    /// The command `typed` was probably meant to be, when it names none: one within two edits of it.
    static func suggestion(for typed: String) -> String? {
        let names = configuration.subcommands.compactMap { $0.configuration.commandName } + ["help"]
        guard !typed.hasPrefix("-"), !names.contains(typed) else { return nil }
        let scored = names.map { (name: $0, distance: editDistance(typed, $0)) }.min { $0.distance < $1.distance }
        return scored.flatMap { $0.distance <= 2 ? $0.name : nil }
    }

    /// Levenshtein's distance between two words (insertions, deletions and substitutions of characters).
    static func editDistance(_ a: String, _ b: String) -> Int {
        let (a, b) = (Array(a), Array(b))
        guard !a.isEmpty, !b.isEmpty else { return max(a.count, b.count) }
        var row = Array(0...b.count)
        for i in 1...a.count {
            var diagonal = row[0]
            row[0] = i
            for j in 1...b.count {
                let above = row[j]
                row[j] = min(above + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1))
                diagonal = above
            }
        }
        return row[b.count]
    }
}
