import ArgumentParser
@_spi(CommandLine) import TimeControlKit

// The verbs of SPEC §2. Each validates its argument before touching the
// session, so bad input changes nothing. freeze, rate and set create the
// session at real time if it does not exist; the others need it to exist.

struct Freeze: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "freeze",
        abstract: "Stop the clocks; with AT, the wall clock jumps to AT first.",
        usage: "timectl freeze [--session <name>] [--wall] [<at>]",
        discussion: """
            Creates the session if it does not exist. Monotonic clocks stop where they are. \
            'freeze 12:00' stops the clocks with the wall clock at 12:00 UTC on the date it shows \
            (in UTC), earlier or later than now; 'freeze 12:00+02:00' at 12:00 in that zone, on the \
            date the wall clock shows there.

            With --wall, only the wall clocks stop (CLOCK_REALTIME, time(), gettimeofday(), \
            Instant.now()): monotonic clocks, sleeps, timeouts and timers go on at the session's rate, \
            as libfaketime's DONT_FAKE_MONOTONIC. 'tick' moves both; 'set' moves the stopped wall; \
            'rate' changes the monotonic rate and leaves the wall stopped; 'resume' lets the wall run \
            again from where it stands; plain 'freeze' stops both; 'reset' puts the wall back on \
            real time, running. A wait for a wall-clock deadline (an absolute CLOCK_REALTIME sleep, \
            pthread_cond_timedwait) ends only when a verb moves the wall past it.
            """)

    @OptionGroup var sessionOptions: SessionOptions

    @Flag(help: "Stop only the wall clocks; monotonic clocks and waits go on.")
    var wall = false

    @Argument(parsing: .allUnrecognized, help: ArgumentHelp(ArgumentHelpText.at, valueName: "at"))
    var target: [String] = []

    func validate() throws { _ = try wallClockTarget() }

    func wallClockTarget() throws -> WallClockTarget? {
        guard !target.isEmpty else { return nil }
        return try InvalidValue.reporting { () throws(FormatError) in
            try TimeFormats.parseInstant(try OneValue.of(target, kind: "AT", usage: wall ? "timectl freeze --wall [AT]" : "timectl freeze [AT]"))
        }
    }

    func run() throws {
        let session = try sessionOptions.openOrCreate()
        if wall {
            try session.freezeWall(at: try wallClockTarget())
        } else {
            try session.freeze(at: try wallClockTarget())
        }
    }
}

struct Resume: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resume",
        abstract: "Let the clocks run again, at real speed or at RATE.",
        usage: "timectl resume [--session <name>] [<rate>]",
        discussion: "The clocks continue from where they stand; nothing jumps. A wall clock stopped by 'freeze --wall' runs again too.")

    @OptionGroup var sessionOptions: SessionOptions

    @Argument(parsing: .allUnrecognized, help: ArgumentHelp("Speed factor (default 1).", valueName: "rate"))
    var rate: [String] = []

    func validate() throws { _ = try chosenRate() }

    func chosenRate() throws -> TimeRate {
        guard !rate.isEmpty else { return .realTime }
        return try TimeRate(parsingArgument: try InvalidValue.reporting { () throws(FormatError) in
            try OneValue.of(rate, kind: "RATE", usage: "timectl resume [RATE]")
        })
    }

    func run() throws {
        try sessionOptions.openExisting().resume(rate: try chosenRate())
    }
}

struct Rate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rate",
        abstract: "Run the clocks FACTOR times as fast as real time.",
        usage: "timectl rate [--session <name>] <factor>",
        discussion: "FACTOR is from 0.001 to 1000000: 2 is twice as fast, 0.5 half as fast. Use freeze to stop the clocks. A wall clock stopped by 'freeze --wall' stays stopped (use resume). Creates the session if it does not exist.")

    @OptionGroup var sessionOptions: SessionOptions

    @Argument(parsing: .allUnrecognized, help: ArgumentHelp("Speed factor, 0.001 to 1000000.", valueName: "factor"))
    var factor: [String] = []

    func validate() throws { _ = try rate() }

    func rate() throws -> TimeRate {
        try TimeRate(parsingArgument: try InvalidValue.reporting { () throws(FormatError) in
            try OneValue.of(factor, kind: "RATE", usage: "timectl rate FACTOR")
        })
    }

    func run() throws {
        try sessionOptions.openOrCreate().setRate(try rate())
    }
}

struct Tick: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tick",
        abstract: "Move every clock of the session forward by DURATION, or to the next pending deadline.",
        usage: "timectl tick [--session <name>] (<duration> [--step [--max-steps <n>]] | --to-next) [-q]",
        discussion: """
            Wall and monotonic clocks all move; a frozen session stays frozen. 'tick 3' is 3 seconds. \
            Every wait and timer whose deadline the tick passes wakes. With --to-next, the clocks move \
            exactly to the earliest deadline of a pending wait or armed timer (see 'timectl status'). \
            Negative durations are refused: monotonic time cannot go back.

            A plain tick moves the whole DURATION at once: a process that sleeps 3 s and then reads \
            the clock after 'tick 10' sees +10 s. With --step, the tick stops at each pending \
            deadline in order, and lets the processes it woke run until every attached process is \
            blocked again before the next step: that process sees +3 s, as it would have in real \
            time. After the last step it waits for the processes to settle once more.

            Prints one line: how far the clocks moved and where the wall clock stands, e.g. \
            '+3s; wall clock now 2016-01-01T12:00:03Z'; with --to-next also the wait it reached \
            ('+7d to the deadline of pid 1234 (sleep): sleep on CLOCK_MONOTONIC; ...', as \
            'timectl status' lists waits); with --step how many steps it took. -q prints nothing.
            """)

    @OptionGroup var sessionOptions: SessionOptions

    @Flag(name: .customLong("to-next"), help: "Advance exactly to the earliest pending deadline instead.")
    var toNext = false

    @Flag(name: [.short, .long], help: "Print nothing on success.")
    var quiet = false

    @Flag(help: "Stop at each pending deadline on the way, in order, letting the woken processes settle.")
    var step = false

    @Option(name: .customLong("max-steps"), parsing: .unconditional,
            help: ArgumentHelp("With --step: give up after N steps (default 1000).", valueName: "n"))
    var maxSteps: Int?

    // Captured raw so that '-3' reaches the parser (and its message) instead of
    // being taken for an option.
    @Argument(parsing: .allUnrecognized, help: ArgumentHelp("How far to move (3, 1.5, 1h30m, 250ms).", valueName: "duration"))
    var duration: [String] = []

    func validate() throws {
        if let maxSteps {
            if !step { throw ValidationError("--max-steps only applies with --step") }
            if maxSteps < 1 { throw ValidationError("--max-steps must be a whole number of at least 1, got \(maxSteps)") }
        }
        if toNext {
            if step { throw ValidationError("give either --step or --to-next, not both: 'timectl tick DURATION --step' or 'timectl tick --to-next'") }
            if !duration.isEmpty {
                throw ValidationError("give either DURATION or --to-next, not both: 'timectl tick DURATION' or 'timectl tick --to-next'")
            }
            return
        }
        _ = try nanoseconds()
    }

    func nanoseconds() throws -> Int64 {
        try InvalidValue.reporting { () throws(FormatError) in
            try TimeFormats.parseDuration(try OneValue.of(duration, kind: "DURATION", usage: "timectl tick DURATION [--step], or timectl tick --to-next"))
        }
    }

    func run() throws {
        let session = try sessionOptions.openExisting()
        let moved: String
        if step {
            let result = try session.stepForwardBlocking(by: try nanoseconds(), maxSteps: maxSteps ?? 1000, realTimeLimit: SchedulerCommands.settleLimit)
            moved = "+\(TimeFormats.formatDuration(result.elapsed)) in \(TimeFormats.count(result.steps, "step"))"
        } else if toNext {
            guard let wait = try session.advanceToNextDeadline() else {
                throw CommandFailure(message: "session '\(session.name)' has no pending wait with a deadline ahead; nothing to advance to", status: 1)
            }
            moved = "+\(TimeFormats.formatDuration(wait.remainingNanoseconds)) to the deadline of \(Self.describe(wait))"
        } else {
            let nanoseconds = try nanoseconds()
            try session.apply(.advance(nanoseconds: nanoseconds))
            moved = "+" + TimeFormats.formatDuration(nanoseconds)
        }
        if !quiet {
            print("\(moved); wall clock now \(TimeFormats.formatInstant(session.wallClockNanoseconds))")
        }
    }

    /// `pid 1234 (sleep): sleep on CLOCK_MONOTONIC`, as `status` lists a wait (`pid/thread` for a thread of its own).
    static func describe(_ wait: PendingWait) -> String {
        let who = wait.thread == 0 || wait.thread == wait.pid ? "\(wait.pid)" : "\(wait.pid)/\(wait.thread)"
        return "pid \(who) (\(wait.command)): \(wait.kind) on \(wait.clock)"
    }
}

struct SetWallClock: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set",
        abstract: "Move the wall clock to AT (forward or back); monotonic clocks are untouched.",
        usage: "timectl set [--session <name>] <at>",
        discussion: "AT may be relative: 'set +1d', 'set -90m', or a time of day: 'set 09:30' is 09:30 UTC on the date the session's wall clock shows (in UTC), earlier or later than now. Creates the session if it does not exist.")

    @OptionGroup var sessionOptions: SessionOptions

    @Argument(parsing: .allUnrecognized, help: ArgumentHelp(ArgumentHelpText.at, valueName: "at"))
    var target: [String] = []

    func validate() throws { _ = try wallClockTarget() }

    func wallClockTarget() throws -> WallClockTarget {
        try InvalidValue.reporting { () throws(FormatError) in
            try TimeFormats.parseInstant(try OneValue.of(target, kind: "AT", usage: "timectl set AT"))
        }
    }

    func run() throws {
        try sessionOptions.openOrCreate().setWallClock(to: try wallClockTarget())
    }
}

struct Reset: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reset",
        abstract: "Put the wall clock back on real time, running, at rate 1.",
        discussion: "Monotonic clocks keep going forward from where they stand.")

    @OptionGroup var sessionOptions: SessionOptions

    func run() throws {
        try sessionOptions.openExisting().reset()
    }
}

/// Exactly one positional value, captured raw. A `--` in front of it is
/// the usual end of options (`timectl set -- -10d`), not a value.
enum OneValue {
    /// What a KIND may be, for the message: every accepted form, in one line.
    static func accepted(_ kind: String) -> String {
        switch kind {
        case "AT": return TimeFormats.instantHelp
        case "DURATION": return TimeFormats.durationHelp
        default: return TimeFormats.rateHelp
        }
    }

    static func of(_ captured: [String], kind: String, usage: String) throws(FormatError) -> String {
        let values = captured.first == "--" ? Array(captured.dropFirst()) : captured
        guard values.count == 1 else {
            let given = values.isEmpty ? "nothing" : values.map(FormatError.quoted).joined(separator: " ")
            throw FormatError(kind: kind, value: values.joined(separator: " "),
                              reason: "expected exactly one \(kind) (\(usage)), got \(given); \(kind) is \(accepted(kind))")
        }
        return values[0]
    }
}

extension TimeRate {
    init(parsingArgument text: String) throws {
        do {
            self = try TimeRate(parsing: text)
        } catch .invalidInput(let error) {
            throw ValidationError(error.description)
        }
    }
}

/// Turns a parse failure into ArgumentParser's validation error: one line,
/// exit status 64 (EX_USAGE) like every other bad argument.
enum InvalidValue {
    static func reporting<T>(_ parse: () throws(FormatError) -> T) throws(ValidationError) -> T {
        do {
            return try parse()
        } catch {
            throw ValidationError(error.description)
        }
    }
}

/// Help shared by the arguments that take the same kind of value.
enum ArgumentHelpText {
    static let at = "Where the wall clock should stand: a date and time (ISO 8601), a time of day HH:MM[:SS] on the current virtual date (UTC unless a zone such as +02:00 follows), @SECONDS, or +DURATION/-DURATION."
}
