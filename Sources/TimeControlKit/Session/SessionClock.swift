#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import TimeShimC

/// A `Clock` on a session's timeline, for code in the test process itself.
///
/// `now` is the session's virtual `CLOCK_MONOTONIC` — the same value an
/// attached process reads — and `sleep(until:)` ends when the session's time
/// reaches the deadline: when a verb moves it there (from this process or
/// any other), or, while the session runs, when that much virtual time has
/// passed. Code under test that takes `any Clock<Duration>` thus runs on the
/// same timeline as the processes it talks to.
///
/// ```swift
/// let session = try TimeSession.temporary(frozenAt: start)
/// async let reminder: Void = session.clock.sleep(for: .seconds(10))
/// try await session.waitForPendingWaits(count: 1)
/// try session.advance(by: .seconds(10))
/// try await reminder   // returns now, at exactly +10 s of virtual time
/// ```
///
/// An in-process sleep is listed among the session's pending waits (as this
/// process's, thread 0), so ``TimeSession/advanceToNextDeadline()`` and
/// ``TimeSession/waitForPendingWaits(count:where:realTimeLimit:)`` see it.
public struct SessionClock: Clock {
    /// A point on the session's monotonic timeline.
    public struct Instant: InstantProtocol, CustomStringConvertible {
        /// Virtual `CLOCK_MONOTONIC` nanoseconds.
        public var nanoseconds: Int64

        /// The instant at `nanoseconds` of virtual `CLOCK_MONOTONIC`.
        public init(nanoseconds: Int64) {
            self.nanoseconds = nanoseconds
        }

        /// The instant `duration` later (saturating).
        public func advanced(by duration: Duration) -> Instant {
            Instant(nanoseconds: nanoseconds.addingSaturating(Self.nanoseconds(of: duration)))
        }

        /// The time from this instant to `other`.
        public func duration(to other: Instant) -> Duration {
            .nanoseconds(other.nanoseconds - nanoseconds)
        }

        /// Whether `lhs` comes before `rhs`.
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.nanoseconds < rhs.nanoseconds }

        /// The instant, as the virtual monotonic time it stands for.
        public var description: String { "SessionClock.Instant(\(TimeFormats.formatDuration(nanoseconds)))" }

        static func nanoseconds(of duration: Duration) -> Int64 {
            let (seconds, attoseconds) = duration.components
            let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
            if overflow { return seconds < 0 ? .min : .max }
            return scaled.addingSaturating(attoseconds / 1_000_000_000)
        }
    }

    /// The session whose timeline this clock reads.
    public let session: TimeSession

    /// The clock of `session` (the same as `session.clock`).
    public init(session: TimeSession) {
        self.session = session
    }

    /// The session's virtual monotonic time now.
    public var now: Instant { Instant(nanoseconds: session.monotonicNanoseconds) }

    /// One nanosecond: the session's resolution.
    public var minimumResolution: Duration { .nanoseconds(1) }

    /// Suspends until the session's time reaches `deadline`. Throws
    /// `CancellationError` if the task is cancelled first.
    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try await session.sleeper.sleep(until: deadline.nanoseconds)
    }
}

extension Int64 {
    func addingSaturating(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? (other > 0 ? .max : .min) : sum
    }

    func subtractingSaturating(_ other: Int64) -> Int64 {
        let (difference, overflow) = subtractingReportingOverflow(other)
        return overflow ? (other < 0 ? .max : .min) : difference
    }
}

/// The in-process sleeps of one session: a heap of deadlines and one thread
/// that blocks on the segment's generation futex (like an attached
/// process's helper thread) and resumes each sleep when it is due.
final class SessionSleeper: @unchecked Sendable {
    // @unchecked: `pokes` is a futex word, only touched through atomic C calls.
    private struct Sleep {
        var deadline: Int64
        var slot: Int32
        var continuation: CheckedContinuation<Void, any Error>?
    }

    private struct State {
        var sleeps: [Int: Sleep] = [:]
        var cancelled: Set<Int> = []
        var nextID = 0
        var threadRunning = false
        var stopped = false
    }

    private let mapping: SegmentMapping
    private let state = Mutex(State())
    /// Process-private futex word: bumped to make the thread look again.
    private let pokes: UnsafeMutablePointer<UInt32>

    init(mapping: SegmentMapping) {
        self.mapping = mapping
        pokes = .allocate(capacity: 1)
        pokes.initialize(to: 0)
    }

    deinit {
        pokes.deallocate()
    }

    private var owner: UInt64 { tc_wait_owner(getpid(), 0) }

    func sleep(until deadline: Int64) async throws {
        try Task.checkCancellation()
        if mapping.read(.monotonic) >= deadline { return }
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let slot = mapping.claimWait(pid: getpid(), thread: 0, kind: TC_WAIT_SLEEP, clock: .monotonic, deadline: deadline)
                let outcome: (start: Bool, refuse: Bool) = state.withLock { state in
                    if state.cancelled.remove(id) != nil || state.stopped { return (false, true) }
                    state.sleeps[id] = Sleep(deadline: deadline, slot: slot, continuation: continuation)
                    let start = !state.threadRunning
                    state.threadRunning = true
                    return (start, false)
                }
                if outcome.refuse {
                    mapping.releaseWait(slot: slot, owner: owner)
                    continuation.resume(throwing: CancellationError())
                    return
                }
                if outcome.start { startThread { [self] in run() } }
                poke()
            }
        } onCancel: {
            let sleep: Sleep? = state.withLock { state in
                guard let sleep = state.sleeps.removeValue(forKey: id) else {
                    state.cancelled.insert(id)
                    return nil
                }
                return sleep
            }
            if let sleep {
                mapping.releaseWait(slot: sleep.slot, owner: owner)
                sleep.continuation?.resume(throwing: CancellationError())
            }
        }
    }

    /// Ends every sleep (with CancellationError) and the thread: the session is going away.
    func stop() {
        let pending: [Sleep] = state.withLock { state in
            state.stopped = true
            defer { state.sleeps.removeAll() }
            return Array(state.sleeps.values)
        }
        for sleep in pending {
            mapping.releaseWait(slot: sleep.slot, owner: owner)
            sleep.continuation?.resume(throwing: CancellationError())
        }
        poke()
    }

    private func poke() {
        tc_word_poke(pokes)
    }

    /// The thread: resume what is due, then block until a verb, a new sleep, or the next deadline.
    private func run() {
        while true {
            let generation = mapping.load(.generation)
            let poked = tc_word_load(pokes)
            let now = mapping.read(.monotonic)
            let (due, next, stopped): ([Sleep], Int64?, Bool) = state.withLock { state in
                let due = state.sleeps.filter { $0.value.deadline <= now }
                for id in due.keys { state.sleeps.removeValue(forKey: id) }
                if state.stopped { state.threadRunning = false }
                return (Array(due.values), state.sleeps.values.map(\.deadline).min(), state.stopped)
            }
            for sleep in due {
                mapping.releaseWait(slot: sleep.slot, owner: owner)
                sleep.continuation?.resume()
            }
            if stopped { return }
            // No deadline: until a verb or a poke.
            let realWait = next.map { tc_real_wait_ns(now, $0, mapping.rate(of: .monotonic)) } ?? -1
            mapping.waitForChange(of: .generation, from: generation, orOf: pokes, from: poked, realNanoseconds: realWait)
        }
    }
}
