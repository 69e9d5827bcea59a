#if canImport(Glibc)
import Glibc
#endif
import TimeShimC

/// Watches a test's session for a state that can never end (SPEC §6): every
/// thread of the watched processes blocked, and either only waits on virtual
/// time pending while the session stands frozen with nothing to advance it,
/// or no wait on time at all (a deadlock, also under auto-advance). When such
/// a state has held for `grace` of real time with no verb in between, it
/// calls `onStall` once, on its own thread, with a report for people
/// (``StallReport``).
///
/// It judges through ``SessionScheduler/evaluate()`` and never steps. A verb
/// (from the test, another task, `timectl`) starts the grace again; so does a
/// change in what is pending, a thread that waits on the world outside the
/// session, the session running, or a scheduler owning it (then only a
/// deadlock counts). Looks that find a thread running neither count nor
/// reset: the runtime's own housekeeping (libdispatch's pool monitor, every
/// real second) wakes threads of a stuck process too. A state counts only if
/// most looks over the grace found it.
///
/// Not for use outside TimeControlKitTesting.
@_spi(Testing)
public final class StallWatch: @unchecked Sendable {
    // @unchecked: the state is used by the watch's thread alone; `stop()` only raises a futex word.
    private let stopFlag = StopFlag()
    private let finishedFlag = StopFlag()

    /// How often the watch looks (real time).
    static let interval: Int64 = 50_000_000

    /// Starts watching the processes of `session` (those spawned by it and those attached to it).
    public init(session: TimeSession, grace: Duration, onStall: @escaping @Sendable (StallReport) -> Void) {
        let graceNanoseconds = SessionClock.Instant.nanoseconds(of: grace)
        startThread { [stopFlag, finishedFlag] in
            defer { finishedFlag.raise() }
            let scheduler = SessionScheduler(session: session, roots: SessionScheduler.harnessRoots(of: session))
            var judge = Judge(grace: graceNanoseconds)
            while !stopFlag.raised {
                tc_word_wait(stopFlag.word, stopFlag.expected, Self.interval)
                if stopFlag.raised { return }
                let now = tc_real_ns(CLOCK_MONOTONIC)
                if let report = judge.look(session: session, scheduler: scheduler, realNow: now) {
                    onStall(report)
                    return
                }
            }
        }
    }

    deinit { stop() }

    /// Stops watching (waiting for the watch's thread to finish its look).
    public func stop() {
        stopFlag.raise()
        while !finishedFlag.raised { tc_word_wait(finishedFlag.word, finishedFlag.expected, -1) }
    }

    /// The state across looks.
    private struct Judge {
        let grace: Int64
        /// When the current candidate state was first seen, and what it was.
        var since: Int64?
        var candidate: Set<String> = []
        var looks = 0
        var stalledLooks = 0
        var verbs: UInt64?

        init(grace: Int64) { self.grace = grace }

        mutating func reset() {
            since = nil
            candidate = []
            looks = 0
            stalledLooks = 0
        }

        mutating func look(session: TimeSession, scheduler: SessionScheduler, realNow: Int64) -> StallReport? {
            let applied = session.mapping.verbsApplied
            defer { verbs = applied }
            if verbs != applied { reset() }
            let owned = session.scheduler != nil
            let frozen = session.isFrozen
            let fingerprint: Set<String>
            var deadlock: [BlockedThread]? = nil
            switch scheduler.evaluate() {
            case .quiescent where frozen && !owned:
                fingerprint = Set(session.pendingWaits().map { "\($0.pid)/\($0.thread) \($0.kind) \($0.clock) \($0.deadlineNanoseconds)" })
            case .deadlock(let threads):
                deadlock = threads
                fingerprint = Set(threads.map(\.description))
            case .endOfRange(let wait):
                fingerprint = ["end of range \(wait.pid)/\(wait.thread) \(wait.kind)"]
            case .held, .quiescent:
                reset()
                return nil
            case .busy, .due, .idle, .release:
                if since != nil { looks += 1 }
                return nil
            }
            if since == nil || fingerprint != candidate {
                reset()
                since = realNow
                candidate = fingerprint
            }
            looks += 1
            stalledLooks += 1
            guard let since, realNow - since >= grace, stalledLooks >= 3, stalledLooks * 2 >= looks else { return nil }
            return StallReport(session: session, deadlock: deadlock, stalledFor: realNow - since)
        }
    }
}

/// What a stuck test waits for, in the words of the code that waits
/// (`Task.sleep for 2ms (timerfd on CLOCK_BOOTTIME)`), and what would end it.
///
/// Not for use outside TimeControlKitTesting.
@_spi(Testing)
public struct StallReport: Sendable, CustomStringConvertible {
    /// One line per pending wait, the runtime's own housekeeping last.
    public let waits: [String]
    /// For a deadlock: what each blocked thread waits on.
    public let blocked: [String]
    /// Whether nothing waits on time at all (a deadlock), rather than on time that nothing advances.
    public let isDeadlock: Bool
    /// How long the state held, in real nanoseconds.
    public let stalledNanoseconds: Int64

    init(session: TimeSession, deadlock: [BlockedThread]?, stalledFor: Int64) {
        waits = Self.describeWaits(of: session)
        blocked = (deadlock ?? []).map { thread in
            "\(thread.threadName.map { "thread \"\($0)\"" } ?? "main thread") of \(thread.command) (pid \(thread.pid)): \(thread.waitsOn)"
        }
        isDeadlock = deadlock != nil
        stalledNanoseconds = stalledFor
    }

    /// The report: what holds, what each thread waits for, what would end it.
    public var description: String {
        let held = TimeFormats.formatSeconds(stalledNanoseconds, decimals: 1)
        var lines: [String] = []
        if isDeadlock {
            lines.append("The test can never finish: every thread of its process (and of the processes it started) has been blocked for \(held) of real time, each waiting on another, and none on time:")
            lines += blocked.map { "  " + $0 }
            lines.append("Nothing on the session can end these waits: a lock, a semaphore or a continuation that nothing will release or resume.")
        } else {
            lines.append("The test can never finish: every thread of its process (and of the processes it started) has been blocked for \(held) of real time, waiting on the session's time, and the session is frozen with nothing to advance it. Pending:")
            lines += waits.map { "  " + $0 }
            lines.append("To end these waits, advance the session from another task (`try TimeSession.current!.advance(by: …)`, `eventually`, `stepForward`), give the session `autoAdvance: true`, or a `rate:` at which it runs.")
        }
        return lines.joined(separator: "\n")
    }

    /// The session's pending waits, one line each, for people: what waits, for how long, in which thread.
    public static func describeWaits(of session: TimeSession) -> [String] {
        let waits = session.pendingWaits()
        var dispatchProcesses: [Int32: Bool] = [:]
        var own: [String] = [], runtime: [String] = []
        for wait in waits {
            let usesDispatch = dispatchProcesses[wait.pid] ?? {
                let mapped = ProcFS.text("/proc/\(wait.pid)/maps")?.contains("/libdispatch.so") ?? false
                dispatchProcesses[wait.pid] = mapped
                return mapped
            }()
            let threadName = wait.thread == 0 ? nil : ProcFS.threadName(pid: wait.pid, tid: wait.thread)
            let (what, isRuntime) = Self.name(of: wait, usesDispatch: usesDispatch, threadName: threadName)
            let place = (wait.thread == 0 ? "" : "thread \"\(threadName ?? "?")\" of ") + "\(wait.command) (pid \(wait.pid))"
            let line = "\(what) for \(TimeFormats.formatDuration(wait.remainingNanoseconds)) (\(wait.kind) on \(wait.clock)), in \(place)"
            if isRuntime { runtime.append(line + ": the runtime's own") } else { own.append(line) }
        }
        return own + runtime
    }

    /// What made a wait, as the code that waits names it, and whether it is the runtime's own housekeeping.
    static func name(of wait: PendingWait, usesDispatch: Bool, threadName: String?) -> (String, Bool) {
        switch wait.kind {
        case "timerfd" where usesDispatch:
            // libdispatch keeps one timerfd per clock for every timer of the process (docs/swift.md).
            switch wait.virtualClock {
            case .boottime: return ("Task.sleep or ContinuousClock.sleep (libdispatch's timer)", false)
            case .realtime: return ("DispatchQueue.asyncAfter(wallDeadline:) or a wall-clock DispatchSourceTimer", false)
            default: return ("DispatchQueue.asyncAfter, a DispatchSourceTimer, SuspendingClock.sleep, Task.sleep(nanoseconds:) or an event loop's timer", false)
            }
        case "timerfd": return ("a timer (timerfd)", false)
        case "sleep": return ("Thread.sleep, usleep or nanosleep", false)
        case "cond": return ("a timed condition wait (NSCondition.wait(until:), pthread_cond_timedwait)", false)
        case "sem" where usesDispatch && (threadName?.contains("qos") ?? false) && wait.remainingNanoseconds <= 5_000_000_000:
            return ("an idle libdispatch worker thread, which ends itself after 5 s without work,", true)
        case "sem": return ("a timed semaphore wait (DispatchSemaphore.wait(timeout:), sem_timedwait)", false)
        case "mutex": return ("a timed lock (pthread_mutex_timedlock)", false)
        case "poll", "select", "epoll": return ("\(wait.kind) with a timeout (an event loop, a RunLoop)", false)
        case "timer": return ("a POSIX timer", false)
        case "alarm": return ("alarm()", false)
        case "futex": return ("a timed futex wait", false)
        default: return ("a wait", false)
        }
    }
}
