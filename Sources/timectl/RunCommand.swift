import ArgumentParser
@_spi(CommandLine) import TimeControlKit

struct Run: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run a command attached to the session.",
        usage: """
            timectl run [--session <name>] [--auto-advance [--keep-rate] [--max-steps <n>] [--report]] [--] <command> ...
              timectl run --at <at> [--frozen | --rate <factor>] [--session <name>] [--auto-advance ...] [--] <command> ...
            """,
        discussion: """
            The command and everything it starts read the session's virtual time. The \
            session is created at real time if it does not exist. Signals sent to timectl \
            are passed on; the exit status is the command's (128+N if killed by signal N). \
            SIGTERM, SIGINT or SIGHUP sent to timectl \
            reaches every process of the command's tree (whatever process group or \
            session it moved to); what is still running when the command has exited is \
            killed, as is everything still running 5 s after the signal or at a second one. If timectl itself \
            is killed (SIGKILL), a guardian process kills the tree (and removes a private session). \
            Processes the command leaves running when it exits by itself are reported on stderr and \
            keep running (one already exiting, or killed, is not), or are ended with --end-leftovers. Statically linked programs (CGO_ENABLED=0 Go among them) run \
            through timectl-static-loader, beside the shim. Setuid programs cannot be \
            controlled with LD_PRELOAD and are refused, as the command and wherever \
            the command's processes exec or posix_spawn them (the exec fails with \
            EACCES: a shell says "Permission denied"); --allow-uncontrolled (or \
            TIMECTL_ALLOW_UNCONTROLLED=1) runs them on real time with a warning. Exit status 125 means timectl \
            itself failed or refused the command (one line on stderr says why), 126 that the command could \
            not be executed, 127 that it was not found.

            With --auto-advance, timectl freezes the session and runs a scheduler for it: \
            whenever every thread of the command's processes (and of every other process \
            attached to the session) is blocked and one of them waits on virtual time, the \
            session jumps exactly to the earliest deadline. Sleeps, timeouts and back-offs \
            take no real time, and every process sees time pass exactly as it would have. \
            When the command has exited, a named session runs again as it ran before (or as \
            --at set it; a frozen one stays frozen), from where the run left its clocks. The run's processes \
            are stopped, and timectl exits 123, after --max-steps steps, or when the loop guard \
            finds a process that re-arms a 0 s timer for ever; it exits 122 when nothing can ever \
            happen again (a deadlock).

            With --at, the command runs on a private session of its own whose wall clock starts \
            at AT (ISO 8601, 'YYYY-MM-DD hh:mm:ss', @SECONDS, +DURATION/-DURATION from now, or a time \
            of day hh:mm[:ss] on today's date, in UTC or in the zone after it: '--at 09:30+02:00'), running, \
            frozen (--frozen) or at a rate (--rate); the session is removed, with anything still \
            attached to it, when the command exits (or timectl is stopped or killed). This is faketime's 'faketime DATE COMMAND'. \
            With an explicit --session NAME, --at sets that session instead (and it stays; a time \
            of day is then on the date that session's wall clock shows). \
            Under --frozen a sleep waits until the session is ticked (its name is in 'timectl \
            session list'); with '--at AT --auto-advance' the clocks stand still at AT exactly (the \
            command's first reading is AT) and move only by skipping each wait to its deadline, at once.
            """)

    @OptionGroup var sessionOptions: SessionOptions

    @Flag(name: .customLong("auto-advance"), help: "Advance to the next deadline whenever every process is blocked.")
    var autoAdvance = false

    @Flag(name: .customLong("keep-rate"), help: "With --auto-advance: keep the session's rate instead of freezing it.")
    var keepRate = false

    @Option(name: .customLong("max-steps"), parsing: .unconditional, help: ArgumentHelp("With --auto-advance: stop the command's processes after N steps (exit status 123).", valueName: "n"))
    var maxSteps: Int?

    @Flag(name: .customLong("allow-uncontrolled"), help: "Run programs the shim cannot control (setuid, other architectures), as the command or anywhere in its tree, on real time with a warning instead of refusing them.")
    var allowUncontrolled = false

    @Flag(name: .customLong("end-leftovers"), help: "End the processes the command leaves running when it exits (SIGTERM, then SIGKILL 2 s later) instead of reporting them.")
    var endLeftovers = false

    @Flag(help: "With --auto-advance: print the steps, virtual time, real time, speed-up and looks to stderr at exit.")
    var report = false

    @Option(name: .customLong("at"), parsing: .unconditional,
            help: ArgumentHelp("Start the wall clock at AT, on a private session removed when the command exits (with --session: set that session).", valueName: "at"))
    var startAt: String?

    @Flag(help: "With --at: the clocks stand still at AT (a sleep waits for a tick; --auto-advance skips it).")
    var frozen = false

    @Option(name: .customLong("rate"), parsing: .unconditional, help: ArgumentHelp("With --at: the clocks run FACTOR times as fast as real time.", valueName: "factor"))
    var startRate: String?

    @Argument(parsing: .postTerminator, help: ArgumentHelp("The command and its arguments (the '--' in front may be left out).", valueName: "command"))
    var command: [String] = []

    func validate() throws {
        if command.isEmpty { throw ValidationError("no command given: expected 'timectl run [OPTIONS] [--] COMMAND [ARGUMENTS...]'") }
        _ = try start()
        if !autoAdvance {
            let stray = [keepRate ? "--keep-rate" : nil, maxSteps != nil ? "--max-steps" : nil, report ? "--report" : nil].compactMap { $0 }
            if let first = stray.first { throw ValidationError("\(first) only applies with --auto-advance") }
        }
        if let maxSteps, maxSteps < 1 { throw ValidationError("--max-steps must be a whole number of at least 1, got \(maxSteps)") }
    }

    /// Where --at, --frozen and --rate start the session; nil without --at.
    func start() throws -> SessionStart? {
        if frozen && startRate != nil { throw ValidationError("give either --frozen or --rate, not both") }
        guard let startAt else {
            if frozen { throw ValidationError("--frozen only applies with --at: 'timectl run --at AT --frozen -- COMMAND'") }
            if startRate != nil { throw ValidationError("--rate only applies with --at: 'timectl run --at AT --rate FACTOR -- COMMAND' (or use 'timectl rate')") }
            return nil
        }
        if let startRate, autoAdvance && !keepRate {
            throw ValidationError("--rate \(startRate) with --auto-advance needs --keep-rate: the scheduler freezes the session otherwise")
        }
        let target = try InvalidValue.reporting { () throws(FormatError) in try TimeFormats.parseInstant(startAt) }
        let rate = try startRate.map(TimeRate.init(parsingArgument:))
        return SessionStart(wallClock: target, frozen: frozen, rate: rate, forScheduler: autoAdvance && !keepRate)
    }

    func run() throws {
        let start = try start()
        let session: SessionChoice = start == nil ? .named(sessionOptions.session)
            : sessionOptions.session.map { .named($0) } ?? .temporary
        guard autoAdvance else {
            throw ExitCode(Self.execute(session: session, start: start, arguments: command, leftovers: leftovers, allowingUncontrolled: allowUncontrolled))
        }
        throw ExitCode(Self.execute(session: session, start: start, arguments: command, leftovers: leftovers,
                                    allowingUncontrolled: allowUncontrolled) { command, session throws(TimeControlError) in
            // The scheduler freezes the session; a named one runs again afterwards as it did before (or as --at set it).
            let pace = start?.pace ?? session.pace
            defer { if !keepRate && !session.isTemporary { Self.resume(session, at: pace) } }
            let (status, outcome) = try command.runAutoAdvancing(session: session, keepRate: keepRate, maxSteps: maxSteps,
                                                                 adoptingOrphans: true)
            if report { Main.report(line: "auto-advance: \(outcome)") }
            return status
        })
    }

    /// Sets the session running at `pace` again after the scheduler froze it; one line on stderr if that fails.
    static func resume(_ session: TimeSession, at pace: SessionPace) {
        do {
            try session.resume(pace)
        } catch {
            Main.report(line: "the session stays frozen after auto-advance (\(error.description)); resume it with 'timectl --session \(session.name) resume'")
        }
    }

    var leftovers: LeftoverProcesses { endLeftovers ? .end : .report }

    /// Which session a command runs on.
    enum SessionChoice {
        /// The session named by --session, else `$TIMECTL_SESSION`, else `default`; created if need be.
        case named(String?)
        /// A private session, removed (with anything attached to it) when the command exits.
        case temporary
    }

    /// How --at starts the session before the command runs.
    struct SessionStart {
        var wallClock: WallClockTarget
        var frozen: Bool
        var rate: TimeRate?
        /// Whether an auto-advance scheduler that freezes the session runs the command.
        var forScheduler = false

        /// How the session runs once --at has set it (and once auto-advance is over).
        var pace: SessionPace { frozen ? .frozen : SessionPace(rate: rate ?? .realTime) }

        func apply(to session: TimeSession) throws(TimeControlError) {
            // For a scheduler, frozen at AT at once: set running and frozen a moment later, the clocks would start past AT.
            if frozen || forScheduler {
                try session.freeze(at: wallClock)
                return
            }
            try session.setWallClock(to: wallClock)
            if let rate { try session.setRate(rate) }
        }
    }

    /// Runs the command (by default plainly); returns timectl's exit status. Failures are reported here.
    static func execute(session choice: SessionChoice, start: SessionStart? = nil, arguments: [String],
                        leftovers: LeftoverProcesses = .report, allowingUncontrolled: Bool = false,
                        running: (CommandRunner, TimeSession) throws(TimeControlError) -> Int32 = { command, _ throws(TimeControlError) in try command.run() }) -> Int32 {
        // Signals sent while the session is set up, or after the command has exited, must not end timectl before it cleans up.
        CommandRunner.holdForwardedSignals()
        do {
            try CommandRunner.check(arguments, allowingUncontrolled: allowingUncontrolled)  // a refused command leaves no session behind
            let session: TimeSession
            switch choice {
            case .named(let name): session = try TimeSession.openOrCreate(named: try SessionOptions.resolve(name))
            case .temporary: session = try TimeSession.temporary()
            }
            try start?.apply(to: session)
            let shimEnvironment = try ShimEnvironment(session: session)
            // A private session is removed with whatever is still attached to it: nothing keeps running.
            let leftovers: LeftoverProcesses = session.isTemporary ? .end : leftovers
            return try running(CommandRunner(arguments: arguments, shimEnvironment: shimEnvironment, leftovers: leftovers,
                                               allowingUncontrolled: allowingUncontrolled), session)
        } catch {
            return CommandStatus.failure(error)
        }
    }
}

extension Run: RunsAProgram {
    static let optionsTakingValues: Set<String> = ["--at", "--rate", "--max-steps"]
}

/// timectl's own exit statuses for the commands that run a program (run,
/// record, replay), besides the program's own.
enum CommandStatus {
    /// timectl itself failed.
    static let failed: Int32 = 125
    /// `replay --strict`: a process diverged from the recording.
    static let diverged: Int32 = 121
    /// `run --auto-advance`: nothing could ever happen again — a deadlock, or
    /// waits past the end of the supported range — and the run was ended.
    static let stuck: Int32 = 122
    /// `run --auto-advance`, `replay`: the scheduler stopped the command, which
    /// would never have finished by itself: it reached `--max-steps`, or the
    /// loop guard caught a process re-arming a 0 s timer for ever.
    static let stopped: Int32 = 123

    /// Reports `error` on one line; returns the status to exit with: 127 for
    /// a command not found, 126 for one that cannot be executed, 122 or 123
    /// when the scheduler ended the run, else 125.
    static func failure(_ error: TimeControlError) -> Int32 {
        Main.report(line: error.description)
        switch error {
        case .commandNotFound: return 127
        case .commandNotExecutable: return 126
        case .deadlock, .endOfTimeRange: return stuck
        case .stepLimitExceeded, .livelock: return stopped
        default: return failed
        }
    }
}

/// `timectl [--session NAME] run [--session NAME] [--] COMMAND...`, recognised
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
            } else if sawRun && !word.hasPrefix("-") {
                arguments = Array(rest)
                return
            } else {
                return nil
            }
        }
        return nil
    }
}
