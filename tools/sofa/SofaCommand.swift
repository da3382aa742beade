import ArgumentParser
import Glibc
import Sofa

/// The `sofa` tool: inspect, query, verify, compact and load Sofa databases.
///
/// Exit status: 0 on success, 1 when a command fails or finds a problem (`verify`), 2 on bad usage (a missing
/// command too). Errors are one line on standard error.
@main
struct SofaCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sofa",
        abstract: "Inspect, query, verify, compact and load Sofa databases.",
        subcommands: [InfoCommand.self, DumpCommand.self, VerifyCommand.self, LoadCommand.self, CompactCommand.self,
                      QueryCommand.self, ViewCommand.self, DemoCommand.self])

    /// Without a subcommand: bad usage.
    func run() throws {
        throw ValidationError("missing a command: info, dump, verify, load, compact, query, view or demo")
    }

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
            Output.error(errorLine(for: error))
            Glibc.exit(code == .validationFailure ? 2 : 1)
        }
    }

    /// The one line an error is reported with: `sofa: CODE: message (file at offset N)` for a ``SofaError``;
    /// for bad usage ArgumentParser's message and where to find help, without the usage block it would print.
    static func errorLine(for error: any Error) -> String {
        if error is SofaError { return "sofa: \(error)" }
        let message = self.message(for: error).split(separator: "\n").first.map(String.init) ?? "\(error)"
        // "  See 'sofa info --help' for more information." names the (sub)command's help.
        var hint: Substring?
        for line in fullMessage(for: error).split(separator: "\n") where line.drop(while: { $0 == " " }).hasPrefix("See '") {
            let quoted = line.split(separator: "'", omittingEmptySubsequences: false)
            if quoted.count >= 3 { hint = quoted[1] }
        }
        return "sofa: " + message.replacingPrefix("Error: ") + (hint.map { " (see '\($0)')" } ?? "")
    }
}

extension String {
    /// The string without `prefix` when it starts with it.
    fileprivate func replacingPrefix(_ prefix: String) -> String {
        hasPrefix(prefix) ? String(dropFirst(prefix.count)) : self
    }
}
