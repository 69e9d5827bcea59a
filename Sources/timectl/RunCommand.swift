import ArgumentParser
import TimeControlKit

struct Run: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run a command attached to the session.",
        discussion: """
            The command and everything it starts read the session's virtual time. The \
            session is created at real time if it does not exist. Signals sent to timectl \
            are passed on; the exit status is the command's (128+N if killed by signal N). \
            Statically linked programs, Go programs and setuid programs cannot be \
            controlled with LD_PRELOAD and are refused. Exit status 125 means timectl \
            itself failed, 126 that the command could not be executed, 127 that it was \
            not found.
            """)

    @OptionGroup var sessionOptions: SessionOptions

    @Argument(parsing: .postTerminator, help: ArgumentHelp("The command and its arguments, after --.", valueName: "command"))
    var command: [String] = []

    func validate() throws {
        if command.isEmpty { throw ValidationError("no command after '--': expected 'timectl run [--session NAME] -- COMMAND [ARGUMENTS...]'") }
    }

    func run() throws {
        throw ExitCode(Self.execute(session: sessionOptions.session, arguments: command))
    }

    /// Runs the command; returns timectl's exit status. Failures are reported here.
    static func execute(session: String?, arguments: [String]) -> Int32 {
        do {
            let session = try TimeSession.openOrCreate(named: try SessionOptions.resolve(session))
            let attachment = try Attachment(session: session)
            return try AttachedCommand(arguments: arguments, attachment: attachment).run()
        } catch {
            Main.report(line: error.description)
            switch error {
            case .commandNotFound: return 127
            case .commandNotExecutable: return 126
            default: return 125
            }
        }
    }
}

/// `timectl [--session NAME] run [--session NAME] -- COMMAND...`, recognised
/// without ArgumentParser: `run` sits in front of every controlled command,
/// and ArgumentParser's reflection costs milliseconds at start-up. Anything
/// else (help, unknown options, no command) is left to ArgumentParser,
/// which accepts the same grammar.
struct FastRunRequest {
    var session: String?
    var arguments: [String]

    init?(_ words: ArraySlice<String>) {
        var rest = words
        var sawRun = false
        while let word = rest.first {
            if word == "--session", rest.count >= 2 {
                session = rest[rest.index(after: rest.startIndex)]
                rest = rest.dropFirst(2)
            } else if word.hasPrefix("--session=") {
                session = String(word.dropFirst("--session=".count))
                rest = rest.dropFirst()
            } else if word == "run" && !sawRun {
                sawRun = true
                rest = rest.dropFirst()
            } else if sawRun && word == "--" {
                rest = rest.dropFirst()
                guard !rest.isEmpty else { return nil }
                arguments = Array(rest)
                return
            } else {
                return nil
            }
        }
        return nil
    }
}
