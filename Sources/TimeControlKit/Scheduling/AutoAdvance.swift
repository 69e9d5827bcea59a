#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import TimeShimC

/// A session scheduler running on a thread of its own (SPEC §8): whenever
/// every thread of every watched process is blocked and at least one waits
/// on virtual time, the session jumps exactly to the earliest pending
/// deadline. Programs see time pass exactly as it would have, with none of
/// the waiting.
///
/// `timectl run --auto-advance` and `timectl daemon` run one; in a Swift
/// test, ``TimeSession/startAutoAdvance(keepRate:maxSteps:)`` does:
///
/// ```swift
/// let session = try TimeSession.temporary(frozenAt: start)
/// let autoAdvance = try session.startAutoAdvance()
/// let worker = try session.spawn("sh", ["-c", "sleep 60; date +%s"])
/// #expect(try await worker.waitForExit() == .exited(0))   // at once, 60 s later in virtual time
/// let report = autoAdvance.stop()
/// ```
///
/// At most one scheduler owns a session at a time (the segment records
/// which). Unless `keepRate` is set, starting one freezes the session, so
/// that time moves only by its steps and a run is exactly repeatable; at a
/// running rate, programs also see real time pass between steps.
public final class AutoAdvance: @unchecked Sendable {
    // @unchecked: the scheduler is only used by its thread; the flags are futex words.

    /// What a run of the scheduler did.
    public struct Report: Sendable, Hashable, Codable, CustomStringConvertible {
        /// How many times it advanced to a deadline.
        public var steps: Int
        /// How much virtual time passed while it ran.
        public var virtualNanoseconds: Int64
        /// How much real time passed.
        public var realNanoseconds: Int64
        /// How many times the scheduler looked at its processes, and how many of those looks read only the
        /// threads the kernel's wake log named (docs/scheduler.md, "Looking at what woke"): the others read every thread.
        public var looks = 0
        public var looksFromWakeLog = 0

        /// Virtual time per real time, or nil when no real time passed.
        public var speedup: Double? {
            realNanoseconds > 0 ? Double(virtualNanoseconds) / Double(realNanoseconds) : nil
        }

        /// One line for people: steps, virtual time covered, real time taken, speed-up.
        public var description: String {
            let virtual = TimeFormats.formatDuration(virtualNanoseconds)
            let real = TimeFormats.formatSeconds(realNanoseconds, decimals: 3)
            let ratio = speedup.map { " (\(Self.formatRatio($0))× real speed)" } ?? ""
            let looked = looks > 0 ? "; \(looks) look\(looks == 1 ? "" : "s"), \(looksFromWakeLog) from the wake log" : ""
            return "\(steps) step\(steps == 1 ? "" : "s"), \(virtual) of virtual time in \(real) of real time\(ratio)\(looked)"
        }

        static func formatRatio(_ ratio: Double) -> String {
            ratio >= 100 ? String(Int(ratio.rounded())) : String(Double(Int(ratio * 10)) / 10)
        }
    }

    /// The session it advances.
    public let session: TimeSession
    private let scheduler: SessionScheduler
    private let stopFlag = StopFlag()
    private let finishedFlag = StopFlag()
    private let outcome = Outcome()
    private let startReal: Int64
    private let startVirtual: Int64
    private let ownPID = getpid()

    /// Claims `session` for a scheduler watching `roots()` and their
    /// descendants (but not `ownHelper()`, a process of timectl's own), freezes it unless `keepRate`, and starts the scheduler,
    /// which takes no step and no verdict while `ready(exactly)` does not hold (a
    /// command not started yet, or exited: ``SessionScheduler/autoAdvance(until:maxSteps:ready:reportingOnly:)``). If a loop guard stops it, `onFailure` runs
    /// on the scheduler's thread with the error and the processes it was watching.
    init(session: TimeSession, kind: SchedulerKind, roots: @escaping () -> [Int32], runRoots: (() -> [Int32])? = nil,
         ownHelper: @escaping () -> Int32 = { 0 },
         keepRate: Bool, maxSteps: Int?,
         ready: @escaping @Sendable (_ exactly: Bool) -> Bool = { _ in true },
         reportingOnly: (@Sendable (TimeControlError) -> Void)? = nil,
         onFailure: @escaping @Sendable (TimeControlError, [Int32]) -> Void = { _, _ in }) throws(TimeControlError) {
        self.session = session
        try Self.claim(session, pid: ownPID, kind: kind)
        do {
            if !keepRate { try session.freeze() }
        } catch {
            session.mapping.releaseScheduler(pid: ownPID)
            throw error
        }
        scheduler = SessionScheduler(session: session, roots: roots, runRoots: runRoots, ownHelper: ownHelper, ownProcessIsInside: kind != .harness)
        startReal = tc_real_ns(CLOCK_MONOTONIC)
        startVirtual = session.monotonicNanoseconds
        // The thread holds what it uses, not this object: releasing the object stops it.
        startThread { [scheduler, stopFlag, finishedFlag, outcome, ownPID] in
            if let failure = scheduler.autoAdvance(until: stopFlag, maxSteps: maxSteps, ready: ready, reportingOnly: reportingOnly) {
                outcome.failure.withLock { $0 = failure }
                onFailure(failure, scheduler.watch.processes())
            }
            scheduler.session.mapping.releaseScheduler(pid: ownPID)
            finishedFlag.raise()
        }
    }

    deinit {
        stop()
    }

    /// Makes `pid` the session's one scheduler, taking over the claim of a
    /// scheduler that died (even if its pid now names another process).
    private static func claim(_ session: TimeSession, pid: Int32, kind: SchedulerKind) throws(TimeControlError) {
        let mapping = session.mapping
        let started = UInt64(ProcFS.startTicks(of: pid) ?? 0)
        var owner = mapping.claimScheduler(pid: pid, started: started, kind: kind)
        if owner != 0 && owner != pid && session.scheduler == nil {
            mapping.releaseScheduler(pid: owner)
            owner = mapping.claimScheduler(pid: pid, started: started, kind: kind)
        }
        guard owner != 0 else { return }
        throw .schedulerRunning(session: session.name, pid: owner, kind: session.scheduler?.kind ?? .unknown)
    }

    /// Why the scheduler stopped on its own (a loop guard), if it did.
    public var failure: TimeControlError? { outcome.failure.withLock { $0 } }

    /// The last time the watched processes could not move on by themselves —
    /// ``TimeControlError/deadlock(threads:)`` (every thread blocked on another, none on time) or
    /// ``TimeControlError/endOfTimeRange(wait:)`` — as a test's scheduler found it; nil if that never happened.
    public var stuck: TimeControlError? { stuckState?.error.withLock { $0 } }
    fileprivate var stuckState: Stuck?

    final class Stuck: Sendable {
        let error = Mutex<TimeControlError?>(nil)
    }

    /// Whether the scheduler is still running.
    public var isRunning: Bool { !finishedFlag.raised }

    /// Stops the scheduler (waiting for its thread to finish its step), gives
    /// up its claim on the session, and reports what it did. The session
    /// stays as it is: frozen, unless its rate was kept or changed meanwhile.
    @discardableResult
    public func stop() -> Report {
        stopFlag.raise()
        while !finishedFlag.raised { tc_word_wait(finishedFlag.word, finishedFlag.expected, -1) }
        return Report(steps: scheduler.steps, virtualNanoseconds: session.monotonicNanoseconds - startVirtual,
                      realNanoseconds: tc_real_ns(CLOCK_MONOTONIC) - startReal,
                      looks: scheduler.watch.logLooks + scheduler.watch.fullLooks, looksFromWakeLog: scheduler.watch.logLooks)
    }

    private final class Outcome: Sendable {
        let failure = Mutex<TimeControlError?>(nil)
    }
}

extension TimeSession {
    /// Starts a scheduler that advances this session whenever the processes
    /// it watches — the ones attached to it, the ones spawned here, and
    /// their descendants — are all blocked and one of them waits on virtual
    /// time: the library form of `timectl daemon`.
    ///
    /// - Parameters:
    ///   - keepRate: leave the session's rate as it is; by default it is
    ///     frozen, so that only the scheduler's steps move time.
    ///   - maxSteps: stop after this many steps (with
    ///     ``TimeControlError/stepLimitExceeded(goal:steps:busiest:)`` in
    ///     ``AutoAdvance/failure``); no limit by default.
    /// - Throws: ``TimeControlError/schedulerRunning(session:pid:kind:)`` if
    ///   another scheduler owns the session.
    ///
    /// The test process is not watched and may act at any time, so a deadlock of the processes it spawned (or
    /// waits that end only past 2200) does not stop the scheduler: it is kept in ``AutoAdvance/stuck``.
    public func startAutoAdvance(keepRate: Bool = false, maxSteps: Int? = nil) throws(TimeControlError) -> AutoAdvance {
        let stuck = AutoAdvance.Stuck()
        let autoAdvance = try AutoAdvance(session: self, kind: .harness, roots: SessionScheduler.harnessRoots(of: self),
                                          runRoots: SessionScheduler.harnessRunRoots(of: self), keepRate: keepRate,
                                          maxSteps: maxSteps, reportingOnly: { error in stuck.error.withLock { $0 = error } })
        autoAdvance.stuckState = stuck
        return autoAdvance
    }

    /// `timectl daemon`: a scheduler for the session's attached processes;
    /// `onFailure` runs on its thread if a loop guard stops it.
    @_spi(CommandLine)
    /// A deadlock or the end of the time range is handed to `onStuck` (once for each), and the daemon goes on.
    public func startDaemon(keepRate: Bool, maxSteps: Int?, onStuck: @escaping @Sendable (TimeControlError) -> Void,
                            onFailure: @escaping @Sendable (TimeControlError) -> Void) throws(TimeControlError) -> AutoAdvance {
        try AutoAdvance(session: self, kind: .daemon, roots: SessionScheduler.harnessRoots(of: self), keepRate: keepRate, maxSteps: maxSteps,
                        reportingOnly: onStuck, onFailure: { error, _ in onFailure(error) })
    }

    /// The process of the scheduler that owns the session (`timectl run --auto-advance`, `timectl daemon`), if one runs.
    public var schedulerProcess: RunningProcess? { scheduler?.process }

    /// The scheduler that owns the session and what kind it is, if one runs.
    @_spi(CommandLine)
    public var scheduler: (process: RunningProcess, kind: SchedulerKind)? {
        let claim = mapping.schedulerClaim
        guard claim.pid > 0, let process = RunningProcess.ifRunning(pid: claim.pid, registeredBoottime: 0) else { return nil }
        // A claim whose process started at another time was left by a scheduler that died.
        if claim.started != 0, let ticks = ProcFS.startTicks(of: claim.pid), UInt64(ticks) != claim.started { return nil }
        return (process, claim.kind)
    }
}
