import ArgumentParser
@_spi(CommandLine) import TimeControlKit

#if canImport(Glibc)
import Glibc
#endif

// The session scheduler from the shell (SPEC §8): run-pending and daemon.
// `run --auto-advance` and `tick --step` live with run and tick.

enum SchedulerCommands {
    /// How long a settle may take in real time before timectl gives up: the
    /// guard against a process that never blocks, not a statement about the
    /// session's time.
    static let settleLimit: Duration = .seconds(60)
}

struct RunPending: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run-pending",
        abstract: "Advance from deadline to deadline until no wait is pending.",
        discussion: """
            Waits for the attached processes to settle (every thread blocked), advances exactly \
            to the earliest pending deadline, and repeats until nothing waits on virtual time. \
            Prints the steps taken and the virtual time covered. A process that re-arms a timer \
            for ever (a periodic timer, a retry loop) never runs out of waits: after --max-steps \
            steps (default 1000) run-pending stops with an error naming the wait that kept \
            coming back, and exits 1.
            """)

    @OptionGroup var sessionOptions: SessionOptions

    @Option(name: .customLong("max-steps"), parsing: .unconditional, help: ArgumentHelp("Give up after N steps.", valueName: "n"))
    var maxSteps = 1000

    func validate() throws {
        if maxSteps < 1 { throw ValidationError("--max-steps must be a whole number of at least 1, got \(maxSteps)") }
    }

    func run() throws {
        let session = try sessionOptions.openExisting()
        let result = try session.runUntilIdleBlocking(maxSteps: maxSteps, realTimeLimit: SchedulerCommands.settleLimit)
        print("\(TimeFormats.count(result.steps, "step")), \(TimeFormats.formatDuration(result.elapsed)) of virtual time; nothing pending")
    }
}

struct Daemon: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "daemon",
        abstract: "Run the session's scheduler until stopped: auto-advance for a session driven from shells.",
        discussion: """
            Freezes the session (unless --keep-rate) and, whenever every thread of every process \
            attached to it is blocked and one of them waits on virtual time, advances exactly to \
            the earliest deadline. Runs in the foreground until SIGINT, SIGTERM or SIGHUP, or \
            'timectl daemon --stop' from another shell; then prints what it did and exits 0, \
            the session running again as it did before the daemon froze it. Exits 1 if its loop guard finds a process that \
            keeps re-arming a 0 s timer. A session has at most one scheduler at a time.
            """)

    @OptionGroup var sessionOptions: SessionOptions

    @Flag(name: .customLong("keep-rate"), help: "Keep the session's rate instead of freezing it.")
    var keepRate = false

    @Flag(help: "Stop the session's daemon (started by 'timectl daemon') and wait for it to exit.")
    var stop = false

    func validate() throws {
        if stop && keepRate { throw ValidationError("--keep-rate does not apply with --stop") }
    }

    func run() throws {
        let session = try stop ? sessionOptions.openExisting() : sessionOptions.openOrCreate()
        if stop {
            try Self.stopScheduler(of: session)
            return
        }
        var stopSignals = sigset_t()
        sigemptyset(&stopSignals)
        for signal in [SIGINT, SIGTERM, SIGHUP] { sigaddset(&stopSignals, signal) }
        pthread_sigmask(SIG_BLOCK, &stopSignals, nil)
        let ownPID = getpid()
        let pace = session.pace
        let scheduler = try session.startDaemon(keepRate: keepRate, maxSteps: nil,
                                                onStuck: { Main.report(line: $0.description) },
                                                onFailure: { _ in kill(ownPID, SIGTERM) })
        var received: Int32 = 0
        sigwait(&stopSignals, &received)
        let report = scheduler.stop()
        // The scheduler froze the session: the shells that drive it get back the clock they had.
        if !keepRate { Run.resume(session, at: pace) }
        if let failure = scheduler.failure { throw failure }
        Main.report(line: "daemon for session '\(session.name)' stopped: \(report)")
    }

    static func stopScheduler(of session: TimeSession) throws {
        guard let (scheduler, kind) = session.scheduler else {
            throw CommandFailure(message: "session '\(session.name)' has no scheduler running", status: 1)
        }
        // A signal to any other scheduler would end a command or a test run, not just the scheduler.
        guard kind == .daemon else {
            let owner = switch kind {
            case .command: "a command's run (timectl run --auto-advance or replay), which ends when the command exits"
            case .harness: "a test process (startAutoAdvance), which stops it itself"
            case .daemon, .unknown: "a scheduler that is still starting"
            }
            throw CommandFailure(message: "session '\(session.name)' is auto-advanced by pid \(scheduler.pid), \(owner); --stop stops only a 'timectl daemon'", status: 1)
        }
        kill(scheduler.pid, SIGTERM)
        let deadline = ContinuousClock.now + .seconds(10)
        while session.schedulerProcess?.pid == scheduler.pid && ContinuousClock.now < deadline {
            usleep(10_000)
        }
        if session.schedulerProcess?.pid == scheduler.pid {
            throw CommandFailure(message: "the scheduler of session '\(session.name)' (pid \(scheduler.pid)) did not stop within 10 s", status: 1)
        }
    }
}
