import ArgumentParser

/// `sofa view create|list|drop`: declarative views
/// (``Database/defineView(named:keyPaths:valuePath:reduce:documentType:)``), whose definitions live in their
/// index files so the tool can build and query them without app code.
struct ViewCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "view",
        abstract: "Create, list and drop declarative views.",
        subcommands: [ViewCreateCommand.self, ViewListCommand.self, ViewDropCommand.self])

    /// Without a subcommand: bad usage.
    func run() throws {
        throw ValidationError("missing a view command: create, list or drop")
    }
}
