import ArgumentParser
import Glibc
import Sofa

/// The `sofa` tool: inspect, query, verify, compact and load Sofa databases.
///
/// Exit status: 0 on success, 1 when a command fails or finds a problem (`verify`), 2 on bad usage. Errors
/// are one line on standard error.
@main
struct SofaCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sofa",
        abstract: "Inspect, query, verify, compact and load Sofa databases.",
        subcommands: [InfoCommand.self, DumpCommand.self, VerifyCommand.self, LoadCommand.self, CompactCommand.self,
                      QueryCommand.self, ViewCommand.self, DemoCommand.self])

    static func main() {
        do {
            var command = try parseAsRoot()
            try command.run()
            Output.flush()
        } catch let exit as ExitCode {
            Output.flush()
            Glibc.exit(exit.rawValue)  // the command already said what it found (`verify`)
        } catch {
            Output.flush()
            let code = exitCode(for: error)
            if code == .success {
                exit(withError: error)  // --help, --version: ArgumentParser prints them
            }
            let message = error is SofaError ? "sofa: \(error)" : fullMessage(for: error)
            var line = message.hasSuffix("\n") ? message : message + "\n"
            line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
            Glibc.exit(code == .validationFailure ? 2 : 1)
        }
    }
}
