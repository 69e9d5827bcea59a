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
            let word = tc_wait_changes_word(mapping.segment)
            tc_segment_watch_waits(mapping.segment, 1)
            defer { tc_segment_watch_waits(mapping.segment, 0) }
            let deadline = tc_real_ns(CLOCK_MONOTONIC) + SessionClock.Instant.nanoseconds(of: realTimeLimit)
            while true {
                let changes = tc_word_load(word)
                let matching = pendingWaits().filter(predicate)
                if matching.count >= count { return matching }
                let left = deadline - tc_real_ns(CLOCK_MONOTONIC)
                if left <= 0 {
                    throw TimeControlError.realTimeLimitExceeded(
                        waitingFor: "\(count) pending wait\(count == 1 ? "" : "s") in session '\(name)' (\(matching.count) now)",
                        limit: realTimeLimit)
                }
                _ = tc_segment_wait_for_change(mapping.segment, word, changes, nil, 0, left)
            }
        }
    }

    /// Suspends until the session's processes have settled: every wait a
    /// verb made due has returned, and every thread of every attached (or
    /// spawned) process is blocked again — decided from the kernel's state
    /// of those threads (see `Quiescence`), not from a real-time guess.
    public func settle(realTimeLimit: Duration = .seconds(30)) async throws {
        try await onOwnThread { [self] in
            let word = tc_wait_changes_word(mapping.segment)
            tc_segment_watch_waits(mapping.segment, 1)
            defer { tc_segment_watch_waits(mapping.segment, 0) }
            let deadline = tc_real_ns(CLOCK_MONOTONIC) + SessionClock.Instant.nanoseconds(of: realTimeLimit)
            while true {
                let changes = tc_word_load(word)
                let dueWaits = pendingWaits().filter { $0.remainingNanoseconds == 0 }
                if dueWaits.isEmpty && Quiescence.settled(processesToWatch()) { return }
                let left = deadline - tc_real_ns(CLOCK_MONOTONIC)
                if left <= 0 {
                    throw TimeControlError.realTimeLimitExceeded(waitingFor: "the processes of session '\(name)' to settle", limit: realTimeLimit)
                }
                _ = tc_segment_wait_for_change(mapping.segment, word, changes, nil, 0, min(left, 1_000_000))
            }
        }
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
    /// as it goes. Only when every pending deadline lies beyond the limit, or
    /// no process is left that could start a wait, does time jump to the
    /// limit for a last check.
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
    ///     ever; past it ``TimeControlError/stepLimitExceeded(condition:steps:busiest:)``
    ///     is thrown, naming the wait that kept coming back.
    ///   - realTimeLimit: the harness's own guard, in real time, for each
    ///     settle and for waiting while nothing is pending.
    ///   - description: how errors name the condition.
    @discardableResult
    public func run(until condition: @Sendable () async throws -> Bool, within limit: Duration, maxSteps: Int = 1000,
                    realTimeLimit: Duration = .seconds(30), description: String = "the condition") async throws -> RunResult {
        let start = monotonicNanoseconds
        let end = start.addingSaturating(SessionClock.Instant.nanoseconds(of: limit))
        var steps = 0
        var returning: [String: Int] = [:]
        func result() -> RunResult { RunResult(steps: steps, elapsed: .nanoseconds(monotonicNanoseconds - start)) }
        try await settle(realTimeLimit: realTimeLimit)
        while true {
            if try await condition() { return result() }
            let now = monotonicNanoseconds
            let ahead = pendingWaits().filter { $0.remainingNanoseconds > 0 }
            if let next = ahead.first, now.addingSaturating(next.remainingNanoseconds) <= end {
                guard steps < maxSteps else {
                    let busiest = returning.max { $0.value < $1.value }.map { "\($0.key), \($0.value) times" } ?? "none"
                    throw TimeControlError.stepLimitExceeded(condition: description, steps: steps, busiest: busiest)
                }
                try advance(toDeadlineOf: next)
                steps += 1
                returning["\(next.command) (pid \(next.pid)): \(next.kind) on \(next.clock)", default: 0] += 1
            } else if !ahead.isEmpty || processesToWatch().isEmpty {
                // Everything pending is past the limit, or nobody is left to start a wait.
                guard now < end else {
                    throw TimeControlError.virtualTimeLimitExceeded(condition: description, limit: limit, steps: steps)
                }
                try advance(to: SessionClock.Instant(nanoseconds: end))
            } else if try await waitForWaitOrCondition(condition, realTimeLimit: realTimeLimit, description: description) {
                return result()
            }
            try await settle(realTimeLimit: realTimeLimit)
        }
    }

    /// Nothing pending, processes alive: waits for one of them to start a
    /// wait (true if the condition held meanwhile).
    private func waitForWaitOrCondition(_ condition: @Sendable () async throws -> Bool, realTimeLimit: Duration,
                                        description: String) async throws -> Bool {
        let deadline = tc_real_ns(CLOCK_MONOTONIC) + SessionClock.Instant.nanoseconds(of: realTimeLimit)
        while true {
            if try await condition() { return true }
            if pendingWaits().contains(where: { $0.remainingNanoseconds > 0 }) || processesToWatch().isEmpty { return false }
            if tc_real_ns(CLOCK_MONOTONIC) > deadline {
                throw TimeControlError.realTimeLimitExceeded(
                    waitingFor: "\(description), or a process of session '\(name)' to start a timed wait", limit: realTimeLimit)
            }
            // Until a wait starts — but output and exits change no table: look again within 10 ms.
            _ = try? await waitForPendingWaits(count: 1, where: { $0.remainingNanoseconds > 0 }, realTimeLimit: .milliseconds(10))
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
        var verb = tc_verb()
        verb.kind = Int32(TC_VERB_ADVANCE_TO.rawValue)
        verb.vclock = PendingWait.vclock(named: wait.clock)
        verb.value = wait.deadlineNanoseconds
        _ = try mapping.apply(verb, describedAs: "advance to the deadline of \(wait.command)'s \(wait.kind)")
    }

    /// The processes whose threads `settle` watches: attached ones, and every
    /// process in the groups of the ones spawned here (which may not have
    /// attached yet, or run helpers that never will), not this one.
    func processesToWatch() -> [Int32] {
        var pids = Set(attachedProcesses().map(\.pid))
        pids.formUnion(Quiescence.members(ofProcessGroups: Set(spawnedProcessIDs())))
        pids.remove(getpid())
        return pids.sorted()
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
