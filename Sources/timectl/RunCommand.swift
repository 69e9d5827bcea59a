import ArgumentParser
@_spi(CommandLine) import TimeControlKit

struct Run: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run a command attached to the session.",
        discussion: """
            The command and everything it starts read the session's virtual time. The \
            session is created at real time if it does not exist. Signals sent to timectl \
            are passed on; the exit status is the command's (128+N if killed by signal N). \
            SIGTERM, SIGINT or SIGHUP sent to timectl \
            reaches every process of the command's tree (whatever process group or \
            session it moved to); what is still running when the command has exited is \
            killed, as is everything still running 5 s after the signal or at a second one. If timectl itself \
            is killed (SIGKILL), a guardian process kills the tree. Processes the command \
            leaves running when it exits by itself are reported on stderr and keep \
            running, or are ended with --end-leftovers. Statically linked programs, Go programs and setuid programs cannot be \
            controlled with LD_PRELOAD and are refused, as the command and wherever \
            the command's processes exec or posix_spawn them (the exec fails with \
            EACCES: a shell says "Permission denied"); --allow-uncontrolled (or \
            TIMECTL_ALLOW_UNCONTROLLED=1) runs them on real time with a warning. Exit status 125 means timectl \
            itself failed, 126 that the command could not be executed, 127 that it was \
            not found.

            With --auto-advance, timectl freezes the session and runs a scheduler for it: \
            whenever every thread of the command's processes (and of every other process \
            attached to the session) is blocked and one of them waits on virtual time, the \
            session jumps exactly to the earliest deadline. Sleeps, timeouts and back-offs \
            take no real time, and every process sees time pass exactly as it would have. \
            A loop guard stops a process that re-arms a 0 s timer for ever (status 125).
            """)

    @OptionGroup var sessionOptions: SessionOptions

    @Flag(name: .customLong("auto-advance"), help: "Advance to the next deadline whenever every process is blocked.")
    var autoAdvance = false

    @Flag(name: .customLong("keep-rate"), help: "With --auto-advance: keep the session's rate instead of freezing it.")
    var keepRate = false

    @Option(name: .customLong("max-steps"), help: ArgumentHelp("With --auto-advance: stop the command after N steps.", valueName: "n"))
    var maxSteps: Int?

    @Flag(name: .customLong("allow-uncontrolled"), help: "Run programs the shim cannot control (static, Go, setuid), as the command or anywhere in its tree, on real time with a warning instead of refusing them.")
    var allowUncontrolled = false

    @Flag(name: .customLong("end-leftovers"), help: "End the processes the command leaves running when it exits (SIGTERM, then SIGKILL 2 s later) instead of reporting them.")
    var endLeftovers = false

    @Flag(help: "With --auto-advance: print the steps, virtual time, real time and speed-up to stderr at exit.")
    var report = false

    @Argument(parsing: .postTerminator, help: ArgumentHelp("The command and its arguments, after --.", valueName: "command"))
    var command: [String] = []

    func validate() throws {
        if command.isEmpty { throw ValidationError("no command after '--': expected 'timectl run [--session NAME] [--auto-advance] -- COMMAND [ARGUMENTS...]'") }
        if !autoAdvance {
            let stray = [keepRate ? "--keep-rate" : nil, maxSteps != nil ? "--max-steps" : nil, report ? "--report" : nil].compactMap { $0 }
            if let first = stray.first { throw ValidationError("\(first) only applies with --auto-advance") }
        }
        if let maxSteps, maxSteps < 1 { throw ValidationError("--max-steps must be a whole number of at least 1, got \(maxSteps)") }
    }

    func run() throws {
        guard autoAdvance else {
            throw ExitCode(Self.execute(session: sessionOptions.session, arguments: command, leftovers: leftovers, allowingUncontrolled: allowUncontrolled))
        }
        throw ExitCode(Self.execute(session: sessionOptions.session, arguments: command, leftovers: leftovers, allowingUncontrolled: allowUncontrolled) { command, session throws(TimeControlError) in
            let (status, outcome) = try command.runAutoAdvancing(session: session, keepRate: keepRate, maxSteps: maxSteps,
                                                                 adoptingOrphans: true)
            if report { Main.report(line: "auto-advance: \(outcome)") }
            return status
        })
    }

    var leftovers: LeftoverProcesses { endLeftovers ? .end : .report }

    /// Runs the command (by default plainly); returns timectl's exit status. Failures are reported here.
    static func execute(session: String?, arguments: [String], leftovers: LeftoverProcesses = .report, allowingUncontrolled: Bool = false,
                        running: (AttachedCommand, TimeSession) throws(TimeControlError) -> Int32 = { command, _ throws(TimeControlError) in try command.run() }) -> Int32 {
        do {
            try AttachedCommand.check(arguments, allowingUncontrolled: allowingUncontrolled)  // a refused command leaves no session behind
            let session = try TimeSession.openOrCreate(named: try SessionOptions.resolve(session))
            let attachment = try Attachment(session: session)
            return try running(AttachedCommand(arguments: arguments, attachment: attachment, leftovers: leftovers,
                                               allowingUncontrolled: allowingUncontrolled), session)
        } catch {
            return CommandStatus.failure(error)
        }
    }
}

/// timectl's own exit statuses for the commands that run a program (run,
/// record, replay), besides the program's own.
enum CommandStatus {
    /// timectl itself failed.
    static let failed: Int32 = 125
    /// `replay --strict`: a process diverged from the recording.
    static let diverged: Int32 = 121

    /// Reports `error` on one line; returns the status to exit with: 127 for
    /// a command not found, 126 for one that cannot be executed, else 125.
    static func failure(_ error: TimeControlError) -> Int32 {
        Main.report(line: error.description)
        switch error {
        case .commandNotFound: return 127
        case .commandNotExecutable: return 126
        default: return failed
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
