import ArgumentParser
import Sofa

/// The `sofa` tool: inspect, query, verify, compact and load Sofa databases.
@main
struct SofaCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sofa",
        abstract: "Inspect, query, verify, compact and load Sofa databases.",
        subcommands: [DemoCommand.self])
}
