import ArgumentParser

@main
struct Tiler: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tiler",
        abstract: "Turn huge JPEGs into zoomable tile pyramids with bounded memory.",
        subcommands: [DemoCommand.self, BuildCommand.self, RenderCommand.self, InfoCommand.self])
}
