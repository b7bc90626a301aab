import ArgumentParser

#if canImport(Glibc)
import Glibc
#endif

@main
struct Tiler: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tiler",
        abstract: "Turn huge JPEGs into zoomable tile pyramids with bounded memory.",
        subcommands: [
            DemoCommand.self, BuildCommand.self, ExportCommand.self, ServeCommand.self, RenderCommand.self, InfoCommand.self,
            ThumbCommand.self
        ])

    static func main() async {
        // A file-size limit (ulimit -f) must end a build with an I/O error (EFBIG), not kill the tool.
        signal(SIGXFSZ, SIG_IGN)
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
}
