#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import SystemPackage
import TimeShimC

/// Runs a command attached to a session, the way `timectl run` does:
/// refuses programs a preload shim cannot control, passes signals on, and
/// reports the child's exit status (128+N when killed by signal N).
public struct CommandRunner: Sendable {
    /// The command and its arguments; the command is looked up in `PATH`.
    public let arguments: [String]
    /// The session it attaches to, and the shim it uses.
    public let shimEnvironment: ShimEnvironment
    /// What happens to processes the command leaves running when it exits by itself.
    public var leftovers: LeftoverProcesses
    /// Whether programs the shim cannot control (setuid, file capabilities, other architectures) run on
    /// real time with a warning, as the command and anywhere in its tree,
    /// instead of being refused (`TIMECTL_ALLOW_UNCONTROLLED=1` in the
    /// environment does the same).
    public var allowingUncontrolled: Bool

    /// A command to run attached.
    public init(arguments: [String], shimEnvironment: ShimEnvironment, leftovers: LeftoverProcesses = .report,
                allowingUncontrolled: Bool = false) {
        self.arguments = arguments
        self.shimEnvironment = shimEnvironment
        self.leftovers = leftovers
        self.allowingUncontrolled = allowingUncontrolled
    }

    /// The old spelling of ``init(arguments:shimEnvironment:leftovers:allowingUncontrolled:)``.
    @available(*, deprecated, renamed: "init(arguments:shimEnvironment:leftovers:allowingUncontrolled:)")
    public init(arguments: [String], attachment: ShimEnvironment, leftovers: LeftoverProcesses = .report,
                allowingUncontrolled: Bool = false) {
        self.init(arguments: arguments, shimEnvironment: attachment, leftovers: leftovers, allowingUncontrolled: allowingUncontrolled)
    }

    /// The old name of ``shimEnvironment``.
    @available(*, deprecated, renamed: "shimEnvironment")
    public var attachment: ShimEnvironment { shimEnvironment }

    /// Signals passed on to the child when another process sends them to
    /// timectl. Terminal-generated ones (Ctrl-C) already reach the child,
    /// which shares timectl's process group, so those are not sent twice.
    static let forwardedSignals: [Int32] = [SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, SIGWINCH]

    /// For a process whose one job is to run a command (`timectl run`,
    /// `record`, `replay`): holds the signals ``run(environment:)`` passes
    /// on, in the calling thread, from now until the process exits. One sent
    /// before the command starts is passed on to it (a stop signal: the
    /// command is not started at all); one sent after the command's exit was
    /// seen stays pending and dies with the process, instead of killing it
    /// before it has removed a private session or written a trace. GNU
    /// `timeout` sends SIGTERM to timectl, then to its whole process group:
    /// the second one could come after the command, killed by the first,
    /// had been reaped. Call it before any other thread starts, or from the
    /// main thread of a process whose other threads block these signals.
    @_spi(CommandLine)
    public static func holdForwardedSignals() {
        var held = sigset_t()
        sigemptyset(&held)
        for signal in forwardedSignals { sigaddset(&held, signal) }
        pthread_sigmask(SIG_BLOCK, &held, nil)
    }

    /// Finds the command of `arguments` in `environment`'s `PATH` and checks
    /// that a preload shim can control it (dynamically linked, not setuid),
    /// without running it: for callers that should change nothing — create
    /// no session, freeze nothing — for a command that would be refused.
    ///
    /// With `allowingUncontrolled` (or `TIMECTL_ALLOW_UNCONTROLLED=1` in
    /// `environment`), such a command is let through.
    public static func check(_ arguments: [String], environment: [String] = ProcessEnvironment.entries,
                             allowingUncontrolled: Bool = false) throws(TimeControlError) {
        guard let command = arguments.first else { throw .commandNotFound("") }
        let executable = try Spawn.resolve(command, path: Spawn.searchPath(in: environment))
        guard !(allowingUncontrolled || allowsUncontrolled(environment)) else { return }
        try Spawn.checkControllable(executable, as: command)
    }

    /// The variable that lets programs the shim cannot control run on real time, with a warning, in the whole tree.
    static let allowUncontrolledVariable = "TIMECTL_ALLOW_UNCONTROLLED"

    static func allowsUncontrolled(_ environment: [String]) -> Bool {
        environment.last { $0.hasPrefix(allowUncontrolledVariable + "=") } == allowUncontrolledVariable + "=1"
    }

    /// Starts the command, waits for it, and returns the status to exit with.
    ///
    /// SIGTERM, SIGINT or SIGHUP sent to this process reaches every process
    /// the command started, wherever it moved (its own process group or
    /// session, re-parented); what still runs when the command has exited,
    /// or 5 s after the signal, or at a second such signal, is killed. If this
    /// process is killed, a guardian process kills them. What the command
    /// leaves running when it exits by itself is handled by ``leftovers``.
    /// Each process can be found by the `TIMECTL_RUN` variable in its
    /// environment; one that replaces its environment with one without it
    /// before an exec escapes this.
    public func run(environment: [String] = ProcessEnvironment.entries) throws(TimeControlError) -> Int32 {
        try runChild(environment: environment, reapAdopted: false) { _ in }
    }

    /// The command's process: 0 before it starts, −1 once it has been reaped.
    private final class ChildProcess: Sendable {
        let pid = Atomic<Int32>(0)

        /// Whether it has started and not exited (a zombie has exited). Until
        /// then, and from then on, the scheduler takes no verdict: on the other
        /// attached processes alone it could find a deadlock that is not the command's.
        /// Not `exactly`: whether it has started and its exit has not been seen yet (a load, no system call).
        func isRunning(exactly: Bool) -> Bool {
            let pid = pid.load(ordering: .acquiring)
            return pid > 0 && (!exactly || tc_child_is_running(pid) != 0)
        }
    }

    /// Runs the command the way `timectl run --auto-advance` does: a
    /// scheduler (``AutoAdvance``) advances `session` whenever the command's
    /// whole process tree and every other process attached to the session
    /// are blocked, and one of them waits on virtual time.
    ///
    /// With `adoptingOrphans`, this process becomes the command's subreaper,
    /// so that daemonised descendants stay in view, and reaps every child
    /// that exits: only for a process of its own, such as `timectl`. Without
    /// it, descendants that leave the command's tree are watched only while
    /// they are attached to the session.
    ///
    /// Returns the status to exit with and what the scheduler did. If a
    /// loop guard or `maxSteps` stops the scheduler, the run's processes
    /// (found by their `TIMECTL_RUN` token: other processes attached to the
    /// session are left alone) are terminated (SIGTERM, then SIGKILL to
    /// whatever is left 2 s later, or once the command has exited), and the
    /// guard's error is thrown once the command has exited.
    public func runAutoAdvancing(session: TimeSession, keepRate: Bool = false, maxSteps: Int? = nil, adoptingOrphans: Bool = false,
                                 environment: [String] = ProcessEnvironment.entries) throws(TimeControlError) -> (status: Int32, report: AutoAdvance.Report) {
        try Self.check(arguments, environment: environment, allowingUncontrolled: allowingUncontrolled)  // refused before the session is claimed or frozen
        if adoptingOrphans { _ = tc_become_subreaper() }
        let attached = RunningRegisteredPIDs(session: session)
        let ownPID = getpid()
        let child = ChildProcess()
        let run = RunProcesses()
        // The command's tree: through this process (its main thread spawns, and orphans come to it), or from the command itself.
        let roots: () -> [Int32] = adoptingOrphans ? { [ownPID] + attached.current() }
                                                   : { [child.pid.load(ordering: .acquiring)].filter { $0 > 0 } + attached.current() }
        // Frozen before the command starts, so that it never reads a running clock.
        let runRoots: () -> [Int32] = adoptingOrphans ? { [ownPID] } : { [child.pid.load(ordering: .acquiring)].filter { $0 > 0 } }
        let autoAdvance = try AutoAdvance(session: session, kind: .command, roots: roots, runRoots: runRoots, ownHelper: { run.guardian },
                                          keepRate: keepRate, maxSteps: maxSteps,
                                          ready: { child.isRunning(exactly: $0) },
                                          onFailure: { _, _ in run.end(gracefully: true) })
        let status: Int32
        do {
            // Once the scheduler has stopped the command, what it leaves is ended, not reported as left running.
            status = try runChild(environment: environment, run: run, reapAdopted: adoptingOrphans,
                                  stopped: { autoAdvance.failure != nil }, exited: { child.pid.store(-1, ordering: .releasing) }) {
                child.pid.store($0, ordering: .releasing)
            }
        } catch {
            autoAdvance.stop()
            throw error
        }
        let report = autoAdvance.stop()
        if let failure = autoAdvance.failure { throw failure }
        return (status, report)
    }

    /// Signals that ask timectl to stop: they end the command's whole tree.
    static let stopSignals: [Int32] = [SIGHUP, SIGINT, SIGTERM]
    /// How long the command's processes have, after a stop signal, before everything still running is killed.
    static let stopGracePeriod: Int64 = 5_000_000_000

    /// Starts the child with the forwarded signals blocked, tells `started`
    /// its pid, and waits for it, passing signals on. With `reapAdopted`,
    /// orphaned descendants re-parented here are reaped as they exit.
    ///
    /// Every process of the run carries `TIMECTL_RUN` (a token of this run)
    /// in its environment, so the run's processes are found wherever they
    /// are re-parented. A stop signal goes to each of them; once the command
    /// has exited, what is left is killed; so is everything still running 5 s
    /// after the signal, or at a second stop signal. A guardian process kills them all if this process dies
    /// before the run ends (SIGKILL), and is disarmed when it ends.
    ///
    /// `stopped` says whether the run was stopped from elsewhere (the
    /// scheduler's loop guard): then, once the command has exited, what is
    /// left is killed rather than reported. `exited` is called as soon as
    /// the command has been reaped.
    private func runChild(environment: [String], run: RunProcesses = RunProcesses(), reapAdopted: Bool,
                          stopped: () -> Bool = { false }, exited: () -> Void = {},
                          started: (pid_t) -> Void) throws(TimeControlError) -> Int32 {
        guard let command = arguments.first else { throw .commandNotFound("") }
        let allowing = allowingUncontrolled || Self.allowsUncontrolled(environment)
        let executable = try Spawn.resolve(command, path: Spawn.searchPath(in: environment))
        let program = try Spawn.checkControllable(executable, as: command, allowingUncontrolled: allowing)
        let fitted = try shimEnvironment.fitted(to: program, as: command, allowingUncontrolled: allowing)
        let spawned = try fitted.commandLine(for: program, executable: executable, arguments: arguments, as: command)
        var childEnvironment = fitted.environmentEntries(inheriting: environment, sanitizerRuntime: program.sanitizerRuntime)
            .filter { !$0.hasPrefix(TC_RUN_VARIABLE + "=") } + [TC_RUN_VARIABLE + "=" + run.token]
        if allowing { childEnvironment.append(Self.allowUncontrolledVariable + "=1") }

        var waited = sigset_t()
        sigemptyset(&waited)
        for signal in Self.forwardedSignals + [SIGCHLD] { sigaddset(&waited, signal) }
        var saved = sigset_t()
        pthread_sigmask(SIG_BLOCK, &waited, &saved)
        defer { pthread_sigmask(SIG_SETMASK, &saved, nil) }

        // Asked to stop before the command started (the signals were held meanwhile): nothing is started.
        var pending = sigset_t()
        sigpending(&pending)
        if let signal = Self.stopSignals.first(where: { sigismember(&pending, $0) == 1 }) {
            var only = sigset_t()
            sigemptyset(&only)
            sigaddset(&only, signal)
            var now = timespec()
            _ = sigtimedwait(&only, nil, &now)
            return 128 + signal
        }

        try run.startGuardian(removing: shimEnvironment.privateSegment)
        defer { run.disarmGuardian() }
        let spawnedAt = tc_real_ns(CLOCK_MONOTONIC)
        let child = try Spawn.start(spawned.executable, arguments: spawned.arguments, options: .init(environment: childEnvironment))
        run.commandStarted(pid: child, at: spawnedAt)
        started(child)
        var stopRequests = 0
        var killDeadline: Int64?  // after a stop signal: when what still runs is killed
        while true {
            var info = siginfo_t()
            let signal: Int32
            if let deadline = killDeadline {
                let left = max(deadline - tc_real_ns(CLOCK_MONOTONIC), 0)
                var timeout = timespec(tv_sec: Int(left / 1_000_000_000), tv_nsec: Int(left % 1_000_000_000))
                signal = sigtimedwait(&waited, &info, &timeout)
                if signal < 0 && errno == EAGAIN {
                    run.end(gracefully: false)
                    killDeadline = nil
                    continue
                }
            } else {
                // SIGCHLD is sent to the process: another of its threads that does not block it (a test
                // runner's, Foundation's) may take it first, leaving this loop waiting beside a zombie. So
                // the children are looked at every 100 ms whatever comes.
                var poll = timespec(tv_sec: 0, tv_nsec: 100_000_000)
                signal = sigtimedwait(&waited, &info, &poll)
            }
            if signal < 0 && errno != EAGAIN { continue }  // EINTR
            if signal == SIGCHLD || signal < 0 {
                // One loop for the child and adopted orphans alike, so the child's status is never reaped away.
                var status: Int32 = 0
                while case let reaped = waitpid(reapAdopted ? -1 : child, &status, WNOHANG), reaped > 0 {
                    if reaped == child {
                        exited()
                        if stopRequests > 0 || stopped() {
                            run.end(gracefully: false)
                        } else if leftovers == .end {
                            run.end(gracefully: true)
                        } else {
                            run.reportLeftovers()
                        }
                        return Spawn.exitStatus(status)
                    }
                }
                continue
            }
            let fromTerminal = info.si_code == SI_KERNEL
            guard Self.stopSignals.contains(signal) else {
                if !fromTerminal { kill(child, signal) }
                continue
            }
            stopRequests += 1
            killDeadline = tc_real_ns(CLOCK_MONOTONIC) + Self.stopGracePeriod
            if stopRequests > 1 {
                run.end(gracefully: false)
                continue
            }
            // A terminal's signal already reached the processes in its foreground group (ours).
            let ownGroup = getpgrp()
            for pid in run.members() where !fromTerminal || getpgid(pid) != ownGroup { kill(pid, signal) }
        }
    }
}

/// The old name of ``CommandRunner``.
@available(*, deprecated, renamed: "CommandRunner")
public typealias AttachedCommand = CommandRunner

/// What to do with the processes a command leaves running when it exits
/// by itself (a daemon it started on purpose).
public enum LeftoverProcesses: Sendable, Hashable {
    /// They keep running; each is reported on standard error (pid and command).
    case report
    /// They are ended: SIGTERM, then SIGKILL 2 s later.
    case end
}

/// The processes of one run, found by the `TIMECTL_RUN` token they inherit (timectl_run.h).
///
/// `@unchecked Sendable`: a scheduler's loop guard ends the run from its own
/// thread; the token never changes, the guardian's pid is atomic, and its
/// descriptor is only touched by the thread that runs the command.
final class RunProcesses: @unchecked Sendable {
    let token = "\(getpid())-\(tc_real_ns(CLOCK_BOOTTIME))"
    private var guardianFD: Int32 = -1
    private let guardianPID = Atomic<Int32>(0)
    var guardian: Int32 { guardianPID.load(ordering: .acquiring) }

    /// Starts the guardian; if this process is killed, it ends the run and removes `privateSegment` (an absolute path).
    func startGuardian(removing privateSegment: String?) throws(TimeControlError) {
        var pid: Int32 = 0
        let fd = token.withCString { token in
            guard let privateSegment else { return tc_run_guardian_start(token, nil, &pid) }
            return privateSegment.withCString { tc_run_guardian_start(token, $0, &pid) }
        }
        guard fd >= 0 else { throw .system(call: "clone", path: nil, errno: Errno(rawValue: errno)) }
        guardianFD = fd
        guardianPID.store(pid, ordering: .releasing)
    }

    func disarmGuardian() {
        tc_run_guardian_disarm(guardianFD)
        guardianFD = -1
    }

    /// The command's pid and when it was started (real monotonic ns, read before), once it has been.
    private let command = Atomic<Int32>(0)
    private let commandStartedAt = Atomic<Int64>(0)

    /// Every other member descends from the command: only processes started after it need be looked at.
    func commandStarted(pid: Int32, at time: Int64) {
        commandStartedAt.store(time, ordering: .relaxed)
        command.store(pid, ordering: .releasing)
    }

    /// The run's live processes, besides the guardian.
    func members() -> [Int32] {
        var pids = [Int32](repeating: 0, count: 1024)
        let first = command.load(ordering: .acquiring), since = commandStartedAt.load(ordering: .relaxed)
        let count = token.withCString {
            first > 0 ? tc_run_members_since($0, guardian, first, since, &pids, Int32(pids.count))
                      : tc_run_members($0, guardian, &pids, Int32(pids.count))
        }
        return Array(pids.prefix(Int(min(count, Int32(pids.count)))))
    }

    /// Kills every process of the run; `gracefully`: SIGTERM first, SIGKILL 2 s later.
    func end(gracefully: Bool) {
        var terminated: [Int32] = []
        if gracefully {
            terminated = members()
            for pid in terminated { kill(pid, SIGTERM) }
            // Scanned again rather than probed with kill(pid, 0): a killed orphan stays a zombie until reaped.
            let deadline = tc_real_ns(CLOCK_MONOTONIC) + 2_000_000_000
            while tc_real_ns(CLOCK_MONOTONIC) < deadline && !members().isEmpty {
                tc_real_sleep_ns(10_000_000)
            }
        }
        _ = token.withCString { tc_run_kill_all($0, guardian, 400) }
        // What SIGTERM ended has left the member list, but may not have finished exiting yet.
        _ = tc_run_await_end(terminated, Int32(terminated.count), 400)
    }

    /// How long processes that outlive the command get to finish exiting before they are reported.
    static let exitGrace: Int64 = 100_000_000

    /// One line on standard error for each process still running: they keep running.
    ///
    /// A process whose exit is under way is not left behind: one that was
    /// killed or is a zombie (``ProcFS/isExiting(pid:)``) is never reported,
    /// and the others get up to 100 ms to go first, as a helper does that
    /// ends by itself when the command's end closes its pipe (Erlang's
    /// `erl_child_setup` and `inet_gethost` after `halt()`, a process the
    /// command signalled just before exiting). Only a process still there
    /// then is reported: a daemon started on purpose costs the wait.
    func reportLeftovers() {
        let running = { self.members().filter { !ProcFS.isExiting(pid: $0) } }
        var left = running()
        let deadline = tc_real_ns(CLOCK_MONOTONIC) + Self.exitGrace
        while !left.isEmpty && tc_real_ns(CLOCK_MONOTONIC) < deadline {
            tc_real_sleep_ns(5_000_000)
            left = running()
        }
        for pid in left {
            let line = "timectl: pid \(pid) (\(ProcFS.commandLine(of: pid))) is still running attached to the session; it keeps running (end it with 'kill \(pid)', or run with --end-leftovers)\n"
            _ = line.withCString { write(2, $0, strlen($0)) }
        }
    }
}
