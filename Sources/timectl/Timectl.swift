import ArgumentParser
@_spi(CommandLine) import TimeControlKit

#if canImport(Glibc)
import Glibc
#endif

struct Timectl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "timectl",
        abstract: "Control the passage of time for unmodified Linux programs.",
        discussion: """
            Programs started with 'timectl run' read their clocks, and sleep, on the \
            session's virtual timeline. The verbs move that timeline for every attached \
            process at once.

            DURATION: a number of seconds (3, 1.5) or numbers with units ns us ms s m h d \
            (1h30m, 250ms).
            AT: ISO 8601 (2016-01-01, 2016-01-01T12:00:00Z, 2016-01-01T12:00:00+02:00, or \
            libfaketime's '2016-01-01 12:00:00'; UTC when no offset is given); a time of day \
            HH:MM[:SS[.frac]] with an optional zone (12:00, 12:00:30.5, T12:00Z, 12:00+02:00), \
            meaning that time on the date the session's virtual wall clock shows when the verb is \
            applied, both read in UTC unless a zone is given (so 'freeze 12:00' may move the \
            wall clock back); @SECONDS since the epoch; or +DURATION / -DURATION from the current \
            virtual time (after '--' if it starts with '-': 'timectl set -- -10d').
            The session is --session NAME, else $TIMECTL_SESSION, else 'default'.
            """,
        subcommands: [
            Freeze.self, Resume.self, Rate.self, Tick.self, SetWallClock.self, Reset.self,
            Status.self, Run.self, RunPending.self, Daemon.self, Record.self, Replay.self, TraceCommand.self, SessionCommand.self, Faketime.self,
        ]
    )

    @OptionGroup var sessionOptions: SessionOptions

    // Not `CommandConfiguration(version:)`: ArgumentParser then accepts
    // --version after every subcommand ('timectl tick --version' printed the
    // version and ticked nothing) and lists it in each one's help and man
    // page section. A flag of the root command's own is the root's alone.
    @Flag(help: "Show the version.")
    var version = false

    func run() throws {
        guard version else { throw CleanExit.helpRequest(self) }
        print(timectlVersion)
    }

    /// ArgumentParser takes a root command's flag after a subcommand too, and
    /// would then run the subcommand as if --version were not there
    /// ('timectl tick 3 --version' ticked): refused instead, with a subcommand
    /// on either side of it. Words after '--' are the program's.
    static func versionRefusal(for command: ParsableCommand, arguments: [String]) -> String? {
        guard !(command is Timectl), arguments.prefix(while: { $0 != "--" }).contains("--version") else { return nil }
        return "--version is timectl's own and takes no subcommand: 'timectl --version' (for '\(Main.commandPath())', see '\(Main.helpCommand())')"
    }
}

@main
enum Main {
    static func main() {
        if let request = FastRunRequest(CommandLine.arguments.dropFirst()) {
            exit(Run.execute(session: .named(request.session), arguments: request.arguments))
        }
        let status: Int32
        do {
            let arguments = ProgramArguments.terminatingOptions(Array(CommandLine.arguments.dropFirst()))
            var command = try Timectl.parseAsRoot(arguments)
            if let refusal = SessionOptions.refusal(for: command, arguments: CommandLine.arguments.dropFirst()) {
                throw CommandFailure(message: refusal, status: 64)
            }
            if let refusal = Timectl.versionRefusal(for: command, arguments: arguments) {
                throw CommandFailure(message: refusal, status: 64)
            }
            try command.run()
            status = 0
        } catch let exit as ExitCode {
            status = exit.rawValue
        } catch let error as TimeControlError {
            status = report(error)
        } catch let error as CommandFailure {
            report(line: error.message)
            status = error.status
        } catch {
            let code = Timectl.exitCode(for: error)
            if let unknown = unknownSubcommand() {
                report(line: unknown)
                status = 64
            } else if code == .success {
                print(Timectl.fullMessage(for: error))
                status = 0
            } else {
                let message = Timectl.message(for: error).split(separator: "\n").first.map(String.init) ?? "invalid arguments"
                report(line: message + accepted(missingValueIn: message) + " (see '\(helpCommand())')")
                status = code.rawValue
            }
        }
        exit(status)
    }

    /// For ArgumentParser's "Missing value for '--at <at>'": what the value
    /// may be (": AT is an ISO 8601 date and time ..."), so that the one line
    /// says what is accepted; "" for any other message.
    static func accepted(missingValueIn message: String) -> String {
        guard message.hasPrefix("Missing value for '"), message.hasSuffix(">'"),
              let open = message.lastIndex(of: "<")
        else { return "" }
        switch message[message.index(after: open)..<message.index(message.endIndex, offsetBy: -2)] {
        case "at": return ": AT is \(TimeFormats.instantHelp)"
        case "factor": return ": FACTOR is \(TimeFormats.rateHelp)"
        case "n": return ": N is a whole number of at least 1"
        default: return ""
        }
    }

    /// `timectl SUBCOMMAND --help` for the subcommand on the command line.
    static func helpCommand() -> String { commandPath() + " --help" }

    /// `timectl SUBCOMMAND…`: the (sub)command named on the command line.
    static func commandPath() -> String {
        var words = ["timectl"]
        var command: ParsableCommand.Type = Timectl.self
        var arguments = CommandLine.arguments.dropFirst()
        while let argument = arguments.popFirst() {
            if argument == "--session" { _ = arguments.popFirst(); continue }  // and its value
            if argument.hasPrefix("-") { continue }
            guard let next = command.configuration.subcommands.first(where: { $0._commandName == argument }) else { break }
            words.append(argument)
            command = next
        }
        return words.joined(separator: " ")
    }

    /// The line for a misspelt subcommand (`timectl frezee`, `timectl session lst`, `timectl help frezee`),
    /// naming the ones accepted, which ArgumentParser's "Unexpected argument" does not.
    static func unknownSubcommand() -> String? {
        var words: [String] = []
        var command: ParsableCommand.Type = Timectl.self
        var arguments = CommandLine.arguments.dropFirst()
        while let argument = arguments.popFirst() {
            if argument == "--session" || argument == "--generate-completion-script" { _ = arguments.popFirst(); continue }  // and its value
            if argument == "--" { return nil }
            if argument.hasPrefix("-") { continue }
            let subcommands = command.configuration.subcommands
            if subcommands.isEmpty { return nil }
            // `timectl help session lst` asks for help on a path that must exist too.
            if words.isEmpty && argument == "help" { continue }
            guard let next = subcommands.first(where: { $0._commandName == argument }) else {
                let accepted = subcommands.map { $0._commandName }.joined(separator: ", ")
                let path = (["timectl"] + words).joined(separator: " ")
                return "unknown command \(FormatError.quoted(argument)): expected one of \(accepted) (see '\(path) --help')"
            }
            words.append(argument)
            command = next
        }
        return nil
    }

    /// Reports a TimeControlKit error on one line; returns the exit status.
    static func report(_ error: TimeControlError) -> Int32 {
        report(line: error.description)
        switch error {
        case .invalidInput, .invalidSessionName: return 64  // EX_USAGE, as for other bad arguments
        default: return 1
        }
    }

    static func report(line: String) {
        var text = "timectl: " + line + "\n"
        text.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    }
}

/// A failure with its own exit status (used by `run`, whose status is the child's).
struct CommandFailure: Error {
    var message: String
    var status: Int32
}
