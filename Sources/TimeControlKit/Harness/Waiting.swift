#if canImport(Glibc)
import Glibc
#endif
import TimeShimC

/// What ``TimeSession/run(until:within:maxSteps:realTimeLimit:description:)`` did.
public struct RunResult: Sendable, Hashable {
    /// How many times it advanced to a next deadline.
    public var steps: Int
    /// How much virtual time passed.
    public var elapsed: Duration
}

extension TimeSession {
    /// Suspends until at least `count` pending waits match `predicate`, and returns them.
    ///
    /// This is the handshake that makes advancing safe: a test that spawns a
    /// process and advances at once may advance before the process has
    /// started its sleep, and the sleep then begins after the advance. Wait
    /// for the sleep to be pending first:
    ///
    /// ```swift
    /// let worker = try session.spawn("sleep", ["5"])
    /// try await session.waitForPendingWaits(count: 1)
    /// try session.advance(by: .seconds(5))   // wakes it, exactly once
    /// ```
    ///
    /// It blocks on the segment's wait-table futex, so it returns the moment
    /// the wait is registered, without polling.
    ///
    /// - Parameters:
    ///   - count: how many matching waits to wait for.
    ///   - predicate: which waits count (all, by default).
    ///   - realTimeLimit: the harness's own guard against a hang, in real
    ///     time; past it ``TimeControlError/realTimeLimitExceeded(waitingFor:limit:)`` is thrown.
    @discardableResult
    public func waitForPendingWaits(count: Int = 1, where predicate: @escaping @Sendable (PendingWait) -> Bool = { _ in true },
                                    realTimeLimit: Duration = .seconds(30)) async throws -> [PendingWait] {
        try await onOwnThread { [self] in
            mapping.startWatchingWaits()
            defer { mapping.stopWatchingWaits() }
            let deadline = tc_real_ns(CLOCK_MONOTONIC).addingSaturating(SessionClock.Instant.nanoseconds(of: realTimeLimit))
            while true {
                let changes = mapping.load(.waitChanges)
                let matching = pendingWaits().filter(predicate)
                if matching.count >= count { return matching }
                let left = deadline - tc_real_ns(CLOCK_MONOTONIC)
                if left <= 0 {
                    throw TimeControlError.realTimeLimitExceeded(
                        waitingFor: "\(count) pending wait\(count == 1 ? "" : "s") in session '\(name)' (\(matching.count) now)",
                        limit: realTimeLimit)
                }
                mapping.waitForChange(of: .waitChanges, from: changes, realNanoseconds: left)
            }
        }
    }

    /// Suspends until the session's processes have settled: every wait a
    /// verb made due has returned, and every thread of every attached (or
    /// spawned) process, and of their descendants, is blocked again —
    /// decided from the kernel's state of those threads, not from a
    /// real-time guess (see <doc:AdvancingAutomatically>).
    public func settle(realTimeLimit: Duration = .seconds(30)) async throws {
        let scheduler = harnessScheduler()
        try await onOwnThread {
            var loopGuard = LoopGuard(session: scheduler.session)
            _ = try scheduler.settle(realTimeLimit: realTimeLimit, loopGuard: &loopGuard)
        }
    }

    /// Advances by `duration` through every pending deadline in between, in
    /// order, letting the woken processes settle before the next step and
    /// after the last — `timectl tick DURATION --step`. A process that sleeps
    /// 3 s and then reads the clock sees +3 s, where ``advance(by:)`` would
    /// show it the whole `duration` at once.
    ///
    /// ```swift
    /// let worker = try session.spawn("sh", ["-c", "sleep 3; date +%s; sleep 3; date +%s"])
    /// try await session.waitForPendingWaits(count: 1)
    /// try await session.stepForward(by: .seconds(10))   // date prints +3 s, then +6 s
    /// ```
    ///
    /// - Parameters:
    ///   - duration: how far to advance in all; negative durations are refused.
    ///   - maxSteps: the loop guard: a process that re-arms a timer for ever
    ///     would otherwise make this step for ever; past it
    ///     ``TimeControlError/stepLimitExceeded(goal:steps:busiest:)`` is thrown.
    ///   - realTimeLimit: the harness's own guard, in real time, for each settle.
    @discardableResult
    public func stepForward(by duration: Duration, maxSteps: Int = 1000,
                            realTimeLimit: Duration = .seconds(30)) async throws -> RunResult {
        let nanoseconds = try Self.nonNegativeNanoseconds(duration)
        return try await onOwnThread { [self] in
            try stepForwardBlocking(by: nanoseconds, maxSteps: maxSteps, realTimeLimit: realTimeLimit)
        }
    }

    /// ``stepForward(by:maxSteps:realTimeLimit:)`` for synchronous callers (`timectl tick --step`): blocks the calling thread.
    @_spi(CommandLine)
    public func stepForwardBlocking(by nanoseconds: Int64, maxSteps: Int, realTimeLimit: Duration) throws(TimeControlError) -> RunResult {
        let target = monotonicNanoseconds.addingSaturating(max(0, nanoseconds))
        return try harnessScheduler().step(to: target, maxSteps: maxSteps, realTimeLimit: realTimeLimit)
    }

    /// Advances from deadline to deadline, letting the processes settle
    /// after each step, until no wait is pending — `timectl run-pending`,
    /// and swift-clocks' `TestClock.run()` for whole processes.
    ///
    /// - Parameters:
    ///   - maxSteps: the loop guard (sinon's `loopLimit`): a periodic timer
    ///     or a retry loop never runs out of waits; past it
    ///     ``TimeControlError/stepLimitExceeded(goal:steps:busiest:)`` is
    ///     thrown, naming the wait that kept coming back.
    ///   - realTimeLimit: the harness's own guard, in real time, for each settle.
    @discardableResult
    public func runUntilIdle(maxSteps: Int = 1000, realTimeLimit: Duration = .seconds(30)) async throws -> RunResult {
        try await onOwnThread { [self] in
            try runUntilIdleBlocking(maxSteps: maxSteps, realTimeLimit: realTimeLimit)
        }
    }

    /// ``runUntilIdle(maxSteps:realTimeLimit:)`` for synchronous callers (`timectl run-pending`): blocks the calling thread.
    @_spi(CommandLine)
    public func runUntilIdleBlocking(maxSteps: Int, realTimeLimit: Duration) throws(TimeControlError) -> RunResult {
        try harnessScheduler().runUntilIdle(maxSteps: maxSteps, realTimeLimit: realTimeLimit)
    }

    /// Runs the session forward until `condition` holds: after the
    /// processes settle, it checks the condition; if it does not hold yet, it
    /// advances exactly to the next pending deadline, lets the woken
    /// processes settle, and checks again — the way time would have passed,
    /// without any of the waiting.
    ///
    /// Time only ever moves to a pending deadline. When nothing is pending,
    /// it waits — in real time, bounded by `realTimeLimit` — for a process to
    /// start a wait or for the condition to hold, re-checking the condition
    /// as it goes. With no process left to watch, only code in this process
    /// (on ``clock``) can start one, and it is given 200 ms of real time to
    /// do so. Only when every pending deadline lies beyond the limit, or
    /// nothing starts a wait, does time jump to the limit for a last check.
    ///
    /// ```swift
    /// let worker = try session.spawn("python3", ["worker.py"])
    /// try await session.run(until: { worker.standardOutput.contains("done") }, within: .seconds(90))
    /// ```
    ///
    /// - Parameters:
    ///   - condition: checked after every step; `run` returns when it holds.
    ///   - limit: the virtual time the condition may take.
    ///   - maxSteps: the loop guard: a process that keeps re-arming a timer
    ///     (a retry loop, a 0 s timer) would otherwise make this advance for
    ///     ever; past it ``TimeControlError/stepLimitExceeded(goal:steps:busiest:)``
    ///     is thrown, naming the wait that kept coming back.
    ///   - realTimeLimit: the harness's own guard, in real time, for each
    ///     settle and for waiting while nothing is pending.
    ///   - description: how errors name the condition.
    @discardableResult
    public func run(until condition: @Sendable () async throws -> Bool, within limit: Duration, maxSteps: Int = 1000,
                    realTimeLimit: Duration = .seconds(30), description: String = "the condition") async throws -> RunResult {
        let start = monotonicNanoseconds
        let end = start.addingSaturating(SessionClock.Instant.nanoseconds(of: limit))
        let scheduler = harnessScheduler()
        func result() -> RunResult { RunResult(steps: scheduler.steps, elapsed: .nanoseconds(monotonicNanoseconds - start)) }
        func settled() async throws -> SessionScheduler.Evaluation {
            try await onOwnThread {
                var loopGuard = LoopGuard(session: scheduler.session)
                return try scheduler.settle(realTimeLimit: realTimeLimit, loopGuard: &loopGuard)
            }
        }
        var evaluation = try await settled()
        while true {
            if try await condition() { return result() }
            let now = monotonicNanoseconds
            switch evaluation {
            case .quiescent(let next) where now.addingSaturating(next.remainingNanoseconds) <= end:
                try scheduler.checkSteps(maxSteps, goal: "'\(description)' holding")
                try scheduler.advance(to: next)
            case .idle:
                // Nothing pending. A watched process may yet start a wait; with none, only code in
                // this process can, and it gets `inProcessGrace` to do so.
                let watching = !scheduler.watch.processes().isEmpty
                switch try await waitForWaitOrCondition(condition, realTimeLimit: watching ? realTimeLimit : Self.inProcessGrace,
                                                        description: description, throwing: watching) {
                case .conditionHeld: return result()
                case .waitStarted: break
                case .timedOut:
                    guard now < end else {
                        throw TimeControlError.virtualTimeLimitExceeded(condition: description, limit: limit, steps: scheduler.steps)
                    }
                    try advance(to: SessionClock.Instant(nanoseconds: end))
                }
            default:
                // Everything pending is past the limit, or nobody is left to start a wait.
                guard now < end else {
                    throw TimeControlError.virtualTimeLimitExceeded(condition: description, limit: limit, steps: scheduler.steps)
                }
                try advance(to: SessionClock.Instant(nanoseconds: end))
            }
            evaluation = try await settled()
        }
    }

    /// How long ``run(until:within:maxSteps:realTimeLimit:description:)``
    /// waits, with no process to watch and nothing pending, for code in this
    /// process to start a wait before it jumps to the limit. It returns the
    /// moment a wait registers; the grace only bounds the case where none does.
    static let inProcessGrace: Duration = .milliseconds(200)

    private enum WaitOutcome { case conditionHeld, waitStarted, timedOut }

    /// Nothing pending: waits for a wait to start, or for the condition to
    /// hold. Past `realTimeLimit` it throws (`throwing`) or reports `.timedOut`.
    private func waitForWaitOrCondition(_ condition: @Sendable () async throws -> Bool, realTimeLimit: Duration,
                                        description: String, throwing: Bool) async throws -> WaitOutcome {
        let deadline = tc_real_ns(CLOCK_MONOTONIC).addingSaturating(SessionClock.Instant.nanoseconds(of: realTimeLimit))
        while true {
            if try await condition() { return .conditionHeld }
            if pendingWaits().contains(where: { $0.remainingNanoseconds > 0 }) { return .waitStarted }
            let left = deadline - tc_real_ns(CLOCK_MONOTONIC)
            if left <= 0 {
                guard throwing else { return .timedOut }
                throw TimeControlError.realTimeLimitExceeded(
                    waitingFor: "\(description), or a process of session '\(name)' to start a timed wait", limit: realTimeLimit)
            }
            // Until a wait starts — but output and exits change no table: look again within 10 ms.
            _ = try? await waitForPendingWaits(count: 1, where: { $0.remainingNanoseconds > 0 },
                                               realTimeLimit: .nanoseconds(min(left, 10_000_000)))
        }
    }

    /// Fails unless `condition` holds within `limit` of virtual time — the
    /// assertion form of ``run(until:within:maxSteps:realTimeLimit:description:)``.
    ///
    /// ```swift
    /// try await session.eventually("the worker reports done", within: .seconds(30)) {
    ///     worker.standardOutput.contains("done")
    /// }
    /// ```
    public func eventually(_ description: String = "the condition", within limit: Duration, maxSteps: Int = 1000,
                           realTimeLimit: Duration = .seconds(30), _ condition: @Sendable () async throws -> Bool) async throws {
        try await run(until: condition, within: limit, maxSteps: maxSteps, realTimeLimit: realTimeLimit,
                      description: description)
    }

    /// Advances exactly to the deadline of `wait`.
    func advance(toDeadlineOf wait: PendingWait) throws(TimeControlError) {
        try apply(.advanceToDeadline(nanoseconds: wait.deadlineNanoseconds, on: wait.virtualClock))
    }

    /// A scheduler watching what the harness is responsible for: the
    /// session's attached processes, the ones spawned here, and their
    /// descendants — never this process's own threads.
    func harnessScheduler() -> SessionScheduler {
        SessionScheduler(session: self, roots: SessionScheduler.harnessRoots(of: self), runRoots: SessionScheduler.harnessRunRoots(of: self))
    }
}

/// Runs blocking work on a thread of its own and suspends until it ends, so
/// that the harness never blocks the cooperative thread pool.
func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        startThread {
            continuation.resume(with: Result { try body() })
        }
    }
}
