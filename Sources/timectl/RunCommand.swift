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
            through timectl-static-loader, beside the shim. Programs the kernel starts in \
            secure-execution mode (setuid and setgid ones, and file-capability ones such as ping for a \
            user other than root) cannot be controlled with LD_PRELOAD and are refused, as the command and wherever \
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

    @Option(name: .customLong("seed"), parsing: .unconditional,
            help: ArgumentHelp("With --auto-advance: waits that fall due together end one at a time, in an order drawn from N (the same N, the same order).", valueName: "n"))
    var seedArgument: String?

    @Option(name: .customLong("jitter"), parsing: .unconditional,
            help: ArgumentHelp("With --seed: stretch each wait by up to FRACTION (above 0, at most 1) of its length, by an amount drawn from the seed.", valueName: "fraction"))
    var jitterArgument: String?

    @Option(name: .customLong("repeat"), parsing: .unconditional,
            help: ArgumentHelp("With --auto-advance: run the command K times on identical fresh sessions and compare what each of its threads read and waited for, and its exit status.", valueName: "k"))
    var repeatArgument: String?

    @Option(name: .customLong("seed-from"), parsing: .unconditional,
            help: ArgumentHelp("With --repeat: give the runs the seeds S, S+1, ... and list the seeds whose exit status differs from the first's.", valueName: "s"))
    var seedFromArgument: String?

    @Argument(parsing: .postTerminator, help: ArgumentHelp("The command and its arguments (the '--' in front may be left out).", valueName: "command"))
    var command: [String] = []

    func validate() throws {
        if command.isEmpty { throw ValidationError("no command given: expected 'timectl run [OPTIONS] [--] COMMAND [ARGUMENTS...]'") }
        _ = try start()
        if !autoAdvance {
            let stray = [keepRate ? "--keep-rate" : nil, maxSteps != nil ? "--max-steps" : nil, report ? "--report" : nil,
                         seedArgument != nil ? "--seed" : nil, repeatArgument != nil ? "--repeat" : nil].compactMap { $0 }
            if let first = stray.first { throw ValidationError("\(first) only applies with --auto-advance") }
        }
        if let maxSteps, maxSteps < 1 { throw ValidationError("--max-steps must be a whole number of at least 1, got \(maxSteps)") }
        _ = try order()
        _ = try repetition()
    }

    /// How --repeat and --seed-from repeat the run: how many times, and the first seed if each run takes the next.
    func repetition() throws -> (count: Int, seedFrom: UInt64?)? {
        guard let repeatArgument else {
            if seedFromArgument != nil { throw ValidationError("--seed-from only applies with --repeat: 'timectl run --auto-advance --repeat K --seed-from S -- COMMAND'") }
            return nil
        }
        guard let count = Int(repeatArgument), count >= 2, count <= 10_000 else {
            throw ValidationError("--repeat takes a number of runs from 2 to 10000, got '\(repeatArgument)'")
        }
        if keepRate { throw ValidationError("--repeat with --keep-rate: a running clock puts real time into the runs; drop --keep-rate") }
        if startAt == nil && SessionOptions.named(sessionOptions.session) != nil || startAt != nil && sessionOptions.session != nil {
            throw ValidationError("--repeat runs on fresh private sessions: drop --session (and unset $TIMECTL_SESSION, or give --at)")
        }
        guard let seedFromArgument else { return (count, nil) }
        if seedArgument != nil { throw ValidationError("give either --seed or --seed-from, not both: --seed-from gives each run its own seed") }
        guard let first = UInt64(seedFromArgument), first <= UInt64.max - 1 - UInt64(count) else {
            throw ValidationError("--seed-from takes a whole number from 0 to \(UInt64.max - 1 - UInt64(count)), got '\(seedFromArgument)'")
        }
        return (count, first)
    }

    /// The order --seed and --jitter give the run: the seed as the segment keeps it (never 0, which means none).
    func order() throws -> RunOrder? {
        guard let seedArgument else {
            if jitterArgument != nil { throw ValidationError("--jitter only applies with --seed: 'timectl run --auto-advance --seed N --jitter FRACTION -- COMMAND'") }
            return nil
        }
        guard let seed = UInt64(seedArgument), seed < UInt64.max else {
            throw ValidationError("--seed takes a whole number from 0 to \(UInt64.max - 1), got '\(seedArgument)'")
        }
        if keepRate { throw ValidationError("--seed with --keep-rate: a running clock puts real time into the run; drop --keep-rate") }
        if startAt == nil && SessionOptions.named(sessionOptions.session) != nil || startAt != nil && sessionOptions.session != nil {
            throw ValidationError("--seed runs on a private session of its own: drop --session (and unset $TIMECTL_SESSION, or give --at)")
        }
        var jitter: UInt64 = 0
        if let jitterArgument {
            guard let fraction = Double(jitterArgument), fraction > 0, fraction <= 1 else {
                throw ValidationError("--jitter takes a fraction above 0 and at most 1 (0.1 stretches a wait by up to a tenth of it), got '\(jitterArgument)'")
            }
            jitter = UInt64((fraction * 4_294_967_296).rounded())
        }
        return RunOrder(seed: seed, jitter: jitter)
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
        var start = try start()
        let session: SessionChoice
        if start != nil {
            session = sessionOptions.session.map { .named($0) } ?? .temporary
        } else if autoAdvance && !keepRate && SessionOptions.named(sessionOptions.session) == nil {
            // A run that names no session and no time starts at the pinned origin: the same values every run.
            session = .temporary
            start = Self.pinnedStart
        } else {
            session = .named(sessionOptions.session)
        }
        guard autoAdvance else {
            throw ExitCode(Self.execute(session: session, start: start, arguments: command, leftovers: leftovers, allowingUncontrolled: allowUncontrolled))
        }
        let order = try order()
        let seedNote = order.map { " (seed \($0.seed))" } ?? ""
        if let (count, seedFrom) = try repetition() {
            throw ExitCode(Self.repeatRuns(count, start: start ?? Self.pinnedStart, order: order, seedFrom: seedFrom, arguments: command,
                                           maxSteps: maxSteps, allowingUncontrolled: allowUncontrolled))
        }
        throw ExitCode(Self.execute(session: session, start: start, order: order, arguments: command, leftovers: leftovers,
                                    allowingUncontrolled: allowUncontrolled, noting: seedNote) { command, session throws(TimeControlError) in
            // The scheduler freezes the session; a named one runs again afterwards as it did before (or as --at set it).
            let pace = start?.pace ?? session.pace
            defer { if !keepRate && !session.isTemporary { Self.resume(session, at: pace) } }
            let (status, outcome) = try command.runAutoAdvancing(session: session, keepRate: keepRate, maxSteps: maxSteps,
                                                                 adoptingOrphans: true)
            if report { Main.report(line: "auto-advance: \(outcome)\(seedNote)") }
            return status
        })
    }

    /// Where a run that names no session and no time starts: frozen at the pinned origin (2000-01-01T00:00:00Z).
    static let pinnedStart = SessionStart(wallClock: .absolute(nanosecondsSinceEpoch: 946_684_800 * 1_000_000_000),
                                          frozen: true, rate: nil, forScheduler: true)

    /// `--repeat K`: runs the command `count` times under auto-advance, each on a fresh private session set up
    /// alike (with `seedFrom`, seed S, S+1, … each), recording what every thread read and waited for; reports
    /// "identical in K runs" or the first difference, or with `seedFrom` the seeds whose exit status differs from
    /// the first's. Exits with the runs' common status, or 121 when they differ.
    static func repeatRuns(_ count: Int, start: SessionStart, order: RunOrder?, seedFrom: UInt64?, arguments: [String],
                           maxSteps: Int?, allowingUncontrolled: Bool) -> Int32 {
        CommandRunner.holdForwardedSignals()
        do {
            try CommandRunner.check(arguments, allowingUncontrolled: allowingUncontrolled)
            let directory = try ScratchDirectory(purpose: "repeat")
            defer { directory.remove() }
            var runs: [(seed: UInt64?, status: Int32, trace: Trace?)] = []
            for index in 0..<count {
                let seed = seedFrom.map { $0 + UInt64(index) } ?? order?.seed
                let session = try TimeSession.temporaryPinned()
                defer { session.end() }
                try start.apply(to: session)
                if let seed { session.setOrder(seed: seed, jitter: order?.jitter ?? 0) }
                let path = directory.path + "/run-\(index + 1).trace"
                do {
                    let summary = try TraceRecorder.record(arguments, into: path, session: session, autoAdvancing: true, maxSteps: maxSteps)
                    runs.append((seed, summary.status, try Trace(contentsOf: path)))
                } catch let error where CommandStatus.endsARun(error) {
                    // A run the scheduler ended (a deadlock, a loop): its status is what a seed search looks for.
                    runs.append((seed, CommandStatus.failure(error, noting: seed.map { " (seed \($0))" } ?? ""), nil))
                }
            }
            let first = runs[0]
            if let seedFrom {
                let differing = runs.filter { $0.status != first.status }
                let last = seedFrom + UInt64(count - 1)
                guard !differing.isEmpty else {
                    Main.report(line: "repeat: every seed from \(seedFrom) to \(last) exited \(first.status)")
                    return first.status
                }
                let listed = differing.map { "\($0.seed ?? 0) (exit \($0.status))" }.joined(separator: ", ")
                Main.report(line: "repeat: seeds whose exit status differs from seed \(seedFrom)'s (\(first.status)): \(listed)")
                return CommandStatus.diverged
            }
            let seedNote = order.map { " (seed \($0.seed))" } ?? ""
            for (index, run) in runs.enumerated().dropFirst() {
                if run.status != first.status {
                    Main.report(line: "repeat: run \(index + 1) exited \(run.status), run 1 \(first.status)\(seedNote)")
                    return CommandStatus.diverged
                }
                if let a = first.trace, let b = run.trace, let difference = a.firstDifference(from: b) {
                    Main.report(line: "repeat: run \(index + 1) differs from run 1 at \(difference.describing(first: "run 1", other: "run \(index + 1)"))\(seedNote)")
                    return CommandStatus.diverged
                }
            }
            Main.report(line: "repeat: identical in \(count) runs\(seedNote)")
            return first.status
        } catch {
            return CommandStatus.failure(error)
        }
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
            // A session created pinned for this run stands frozen at the origin until now.
            else if session.isPinned && session.pace.rate == nil { try session.resume() }
        }
    }

    /// A seeded run's order (SPEC §11): the seed, and the jitter as a fraction × 2^32.
    struct RunOrder {
        var seed: UInt64
        var jitter: UInt64
    }

    /// Runs the command (by default plainly); returns timectl's exit status. Failures are reported here, with
    /// `noting` after them (a seeded run's seed).
    static func execute(session choice: SessionChoice, start: SessionStart? = nil, order: RunOrder? = nil, arguments: [String],
                        leftovers: LeftoverProcesses = .report, allowingUncontrolled: Bool = false, noting note: String = "",
                        running: (CommandRunner, TimeSession) throws(TimeControlError) -> Int32 = { command, _ throws(TimeControlError) in try command.run() }) -> Int32 {
        // Signals sent while the session is set up, or after the command has exited, must not end timectl before it cleans up.
        CommandRunner.holdForwardedSignals()
        do {
            try CommandRunner.check(arguments, allowingUncontrolled: allowingUncontrolled)  // a refused command leaves no session behind
            let session: TimeSession
            switch choice {
            // A session --at sets is pinned, if this run creates it.
            case .named(let name):
                let resolved = try SessionOptions.resolve(name)
                session = start == nil ? try TimeSession.openOrCreate(named: resolved) : try TimeSession.openOrCreatePinned(named: resolved)
            case .temporary: session = start == nil ? try TimeSession.temporary() : try TimeSession.temporaryPinned()
            }
            try start?.apply(to: session)
            if let order { session.setOrder(seed: order.seed, jitter: order.jitter) }
            let shimEnvironment = try ShimEnvironment(session: session)
            // A private session is removed with whatever is still attached to it: nothing keeps running.
            let leftovers: LeftoverProcesses = session.isTemporary ? .end : leftovers
            return try running(CommandRunner(arguments: arguments, shimEnvironment: shimEnvironment, leftovers: leftovers,
                                               allowingUncontrolled: allowingUncontrolled), session)
        } catch {
            return CommandStatus.failure(error, noting: note)
        }
    }
}

extension Run: RunsAProgram {
    static let optionsTakingValues: Set<String> = ["--at", "--rate", "--max-steps", "--seed", "--jitter", "--repeat", "--seed-from"]
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
    /// Whether `error` is the scheduler ending a run (122, 123), rather than timectl failing.
    static func endsARun(_ error: TimeControlError) -> Bool {
        switch error {
        case .deadlock, .endOfTimeRange, .stepLimitExceeded, .livelock: return true
        default: return false
        }
    }

    static func failure(_ error: TimeControlError, noting note: String = "") -> Int32 {
        Main.report(line: error.description + note)
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
