#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import TimeShimC

/// Runs a command attached to a session, the way `timectl run` does:
/// refuses programs a preload shim cannot control, passes signals on, and
/// reports the child's exit status (128+N when killed by signal N).
public struct AttachedCommand: Sendable {
    /// The command and its arguments; the command is looked up in `PATH`.
    public let arguments: [String]
    /// The session it attaches to, and the shim it uses.
    public let attachment: Attachment

    /// A command to run attached.
    public init(arguments: [String], attachment: Attachment) {
        self.arguments = arguments
        self.attachment = attachment
    }

    /// Signals passed on to the child when another process sends them to
    /// timectl. Terminal-generated ones (Ctrl-C) already reach the child,
    /// which shares timectl's process group, so those are not sent twice.
    static let forwardedSignals: [Int32] = [SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, SIGWINCH]

    /// Finds the command of `arguments` in `environment`'s `PATH` and checks
    /// that a preload shim can control it (dynamically linked, not setuid),
    /// without running it: for callers that should change nothing — create
    /// no session, freeze nothing — for a command that would be refused.
    public static func check(_ arguments: [String], environment: [String] = ProcessEnvironment.entries) throws(TimeControlError) {
        guard let command = arguments.first else { throw .commandNotFound("") }
        let executable = try Spawn.resolve(command, path: Spawn.searchPath(in: environment))
        try Spawn.checkControllable(executable, as: command)
    }

    /// Starts the command, waits for it, and returns the status to exit with.
    public func run(environment: [String] = ProcessEnvironment.entries) throws(TimeControlError) -> Int32 {
        try runChild(environment: environment, reapAdopted: false) { _ in }
    }

    private final class ChildProcess: Sendable {
        let pid = Atomic<Int32>(0)
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
    /// loop guard stops the scheduler, the command's processes are
    /// terminated (SIGTERM, then SIGKILL after 2 s) and the guard's error is
    /// thrown once the command has exited.
    public func runAutoAdvancing(session: TimeSession, keepRate: Bool = false, maxSteps: Int? = nil, adoptingOrphans: Bool = false,
                                 environment: [String] = ProcessEnvironment.entries) throws(TimeControlError) -> (status: Int32, report: AutoAdvance.Report) {
        try Self.check(arguments, environment: environment)  // refused before the session is claimed or frozen
        if adoptingOrphans { _ = tc_become_subreaper() }
        let attached = AttachedPIDs(session: session)
        let ownPID = getpid()
        let child = ChildProcess()
        // The command's tree: through this process (its main thread spawns, and orphans come to it), or from the command itself.
        let roots: () -> [Int32] = adoptingOrphans ? { [ownPID] + attached.current() }
                                                   : { [child.pid.load(ordering: .acquiring)].filter { $0 > 0 } + attached.current() }
        // Frozen before the command starts, so that it never reads a running clock.
        let autoAdvance = try AutoAdvance(session: session, kind: .command, roots: roots, keepRate: keepRate,
                                          maxSteps: maxSteps, onFailure: { _, processes in Self.terminate(processes) })
        let status: Int32
        do {
            status = try runChild(environment: environment, reapAdopted: adoptingOrphans) { child.pid.store($0, ordering: .releasing) }
        } catch {
            autoAdvance.stop()
            throw error
        }
        let report = autoAdvance.stop()
        if let failure = autoAdvance.failure { throw failure }
        return (status, report)
    }

    /// SIGTERM, then SIGKILL to whatever is left 2 s later.
    static func terminate(_ processes: [Int32]) {
        for pid in processes { kill(pid, SIGTERM) }
        let deadline = tc_real_ns(CLOCK_MONOTONIC) + 2_000_000_000
        while tc_real_ns(CLOCK_MONOTONIC) < deadline && processes.contains(where: { kill($0, 0) == 0 }) {
            var pause = timespec(tv_sec: 0, tv_nsec: 10_000_000)
            nanosleep(&pause, nil)
        }
        for pid in processes { kill(pid, SIGKILL) }
    }

    /// Starts the child with the forwarded signals blocked, tells `started`
    /// its pid, and waits for it, passing signals on. With `reapAdopted`,
    /// orphaned descendants re-parented here are reaped as they exit.
    private func runChild(environment: [String], reapAdopted: Bool, started: (pid_t) -> Void) throws(TimeControlError) -> Int32 {
        guard let command = arguments.first else { throw .commandNotFound("") }
        let childEnvironment = attachment.environmentEntries(inheriting: environment)
        let executable = try Spawn.resolve(command, path: Spawn.searchPath(in: childEnvironment))
        try Spawn.checkControllable(executable, as: command)

        var waited = sigset_t()
        sigemptyset(&waited)
        for signal in Self.forwardedSignals + [SIGCHLD] { sigaddset(&waited, signal) }
        var saved = sigset_t()
        pthread_sigmask(SIG_BLOCK, &waited, &saved)
        defer { pthread_sigmask(SIG_SETMASK, &saved, nil) }

        let child = try Spawn.start(executable, arguments: arguments, options: .init(environment: childEnvironment))
        started(child)
        while true {
            var info = siginfo_t()
            let signal = sigwaitinfo(&waited, &info)
            if signal < 0 { continue }  // EINTR
            if signal == SIGCHLD {
                // One loop for the child and adopted orphans alike, so the child's status is never reaped away.
                var status: Int32 = 0
                while case let reaped = waitpid(reapAdopted ? -1 : child, &status, WNOHANG), reaped > 0 {
                    if reaped == child { return Spawn.exitStatus(status) }
                }
                continue
            }
            if info.si_code != SI_KERNEL { kill(child, signal) }
        }
    }
}
