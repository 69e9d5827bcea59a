#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Testing
@_spi(Testing) import TimeControlKit

/// Gives each test its own temporary `TimeSession`, reachable as
/// `TimeSession.current` while the test runs, and runs the test's own code
/// on it: `Date()`, `clock_gettime`, `ContinuousClock` and
/// `SuspendingClock`, `Task.sleep`, `DispatchQueue.asyncAfter` and dispatch
/// timers, `Timer` on a `RunLoop`, `Thread.sleep` — every clock and every
/// wait of the test, with no change to the code under test. When the test
/// ends, passed or failed, the session is ended: every process it spawned
/// or attached killed, its segment removed.
///
/// To do that, each test case runs in a process of its own: the runner
/// starts the test program again, with the shim preloaded and attached to
/// the case's session, restricted to that one case, waits for it, and
/// reports its issues as the case's own. The case's body shares no memory
/// with the runner or with other tests (TimeControlKit's article "Testing
/// Code That Calls Date()", and docs/swift.md, say what that means for
/// fixtures, what it costs, and the limits).
///
/// On a `@Test`, each case of a parameterised test gets its own session and
/// process; on a `@Suite`, each test in it (and in its nested suites) does.
/// Tests and cases running in parallel never share one.
///
/// ```swift
/// @Test(.timeSession(frozenAt: Date(timeIntervalSince1970: 1_451_649_600)))
/// func reportIsDated() async throws {
///     #expect(Date().timeIntervalSince1970 == 1_451_649_600)   // the test's own clock
///     let session = try #require(TimeSession.current)
///     let date = try session.spawn("date", ["+%s"])
///     _ = try await date.waitForExit()
///     #expect(date.standardOutput == "1451649600\n")
/// }
/// ```
public struct TimeSessionTrait: TestTrait, SuiteTrait, TestScoping {
    /// Where a test's own code runs, and so which of its clocks follow the session.
    public enum Isolation: Sendable, Hashable {
        /// In a process of its own, started for the test case, in which
        /// every clock and wait is the session's (the default).
        case ownProcess
        /// In the runner's process, on real time: only the processes the
        /// test spawns, and `session.clock`, follow the session. For a test
        /// that must share memory with the runner; its own `Date()` is real.
        case runnerProcess
    }

    /// The wall time each session is frozen at; nil for a session at real time, running.
    public let frozenAt: Date?
    /// Whether a scheduler advances each session whenever the test's process
    /// and the processes it started are all blocked and one waits on time.
    public let autoAdvance: Bool
    /// Where the test's own code runs.
    public let isolation: Isolation
    /// The directory the sessions are made in.
    public let directory: SessionDirectory
    /// The runner's guard on a test case's own process, in real time: past
    /// it the process is killed and an issue recorded. Not the test's time.
    public let realTimeLimit: Duration
    /// The rate at which each session runs from the moment the test's own
    /// code begins (with `autoAdvance`, the rate the scheduler keeps between
    /// its jumps); nil for a session that stands frozen at ``frozenAt``.
    public let rate: Double?
    /// How long, in real time, the test may stand stuck — every thread of its
    /// process and of what it started blocked, on a frozen session that
    /// nothing advances, or each on another (a deadlock) — before it fails
    /// with what each waits for; nil never fails it so.
    public let stallGrace: Duration?
    /// With ``autoAdvance``: waits that fall due together end one at a time, in
    /// an order drawn from this seed, the same every run (`timectl run --seed`);
    /// nil lets the kernel decide.
    public let seed: UInt64?

    /// Applies to every test of a suite, one session each.
    public var isRecursive: Bool { true }

    /// A session for each test case, none for a suite as a whole.
    public func scopeProvider(for test: Test, testCase: Test.Case?) -> TimeSessionTrait? {
        testCase == nil ? nil : self
    }

    /// Runs the test case on a session of its own (in a process of its own,
    /// unless the isolation says otherwise), then ends the session.
    public func provideScope(for test: Test, testCase: Test.Case?,
                             performing function: @Sendable () async throws -> Void) async throws {
        if let refusal = refusal {
            Issue.record(Comment(rawValue: refusal), sourceLocation: test.sourceLocation)
            return
        }
        if let assignment = TestProcess.assignment {
            // The process the runner started for one case: run that case's body here, on the session.
            guard assignment.testID == test.id.description, assignment.caseKey == Self.caseKey(of: testCase) else { return }
            try await TestCaseProcess.runBody(assignment, rate: rate, function)
            return
        }
        switch isolation {
        case .ownProcess:
            try await TestCaseProcess(trait: self, test: test, caseKey: Self.caseKey(of: testCase)).run()
        case .runnerProcess:
            let session = try TimeSession.temporary(frozenAt: frozenAt, in: directory)
            defer { session.end() }
            if let rate { try session.setRate(rate) }
            if let seed { session.setOrder(seed: seed, jitter: 0) }
            let scheduler = autoAdvance ? try session.startAutoAdvance(keepRate: rate != nil) : nil
            defer { scheduler?.stop() }
            try await TimeSession.$current.withValue(session) {
                try await function()
            }
            if let failure = scheduler?.failure {
                Issue.record(Comment(rawValue: "\(failure)\(seedNote)"), sourceLocation: test.sourceLocation)
            }
        }
    }

    /// Why the trait cannot run as given (a seed without auto-advance, or with a rate), or nil.
    var refusal: String? {
        guard let seed else { return nil }
        if seed == UInt64.max { return "The trait's seed takes a whole number from 0 to \(UInt64.max - 1), got \(seed)" }
        if !autoAdvance { return "The trait's seed orders auto-advance's steps: give autoAdvance: true as well" }
        if rate != nil { return "The trait's seed with a rate: a running clock puts real time into the test; drop rate" }
        return nil
    }

    /// What a failure of a seeded test adds, so that the seed that made it can be given again.
    var seedNote: String { seed.map { " (seed \($0))" } ?? "" }

    /// Which case of a test `testCase` is, the same in the runner and in the
    /// case's own process: the encoded identity of each argument (what
    /// Swift Testing shows as the case's arguments) and the case's
    /// discriminator among cases with equal arguments. "-" for a test without arguments.
    static func caseKey(of testCase: Test.Case?) -> String {
        guard let testCase, testCase.isParameterized else { return "-" }
        var parts: [String] = []
        if let arguments = Self.child("arguments", of: testCase) {
            for argument in Mirror(reflecting: arguments).children {
                if let bytes = Self.child("bytes", of: argument.value) as? [UInt8] {
                    parts.append(bytes.map { String($0, radix: 16) }.joined(separator: "."))
                } else if let value = Self.child("value", of: argument.value) {
                    parts.append(String(reflecting: value))
                }
            }
        }
        if parts.isEmpty { parts.append(String(reflecting: testCase)) }
        if let discriminator = Self.child("discriminator", of: testCase) { parts.append("#\(discriminator)") }
        return parts.joined(separator: "|")
    }

    /// The first descendant labelled `label` (breadth first, a few levels down) of `value`'s reflection.
    private static func child(_ label: String, of value: Any) -> Any? {
        var level: [Any] = [value]
        for _ in 0..<5 {
            var next: [Any] = []
            for item in level {
                for child in Mirror(reflecting: item).children {
                    if child.label == label { return child.value }
                    next.append(child.value)
                }
            }
            level = next
        }
        return nil
    }
}

extension Trait where Self == TimeSessionTrait {
    /// A private session for each test, frozen at `date` (with no date, at
    /// real time and running), on which the test's own code runs in a
    /// process of its own.
    /// - Parameters:
    ///   - date: The wall time the session is frozen at; nil leaves it running at real time.
    ///   - autoAdvance: Whether a scheduler advances the session whenever the
    ///     test's process and the processes it started are all blocked and
    ///     one of them waits on time: a `Task.sleep(for: .seconds(60))` in
    ///     the test returns at once, 60 s later on the session.
    ///   - isolation: Where the test's own code runs: in a process of its
    ///     own (the default), or in the runner's, where only spawned processes follow the session.
    ///   - directory: Where the session's segment is made (by default as `timectl` finds it).
    ///   - realTimeLimit: The runner's guard on the test's process, in real time.
    ///   - rate: The rate at which the session runs from the moment the test's
    ///     own code begins: `1` real speed, `100` a hundred times faster; with
    ///     `autoAdvance`, the rate kept between jumps. For code that waits on
    ///     time passing while it runs (a task spinning on `Task.yield()`
    ///     until a timeout cancels it). nil: frozen at `date`.
    ///   - stallGrace: How long in real time the test may stand stuck (every
    ///     thread blocked on a frozen session nothing advances, or in a
    ///     deadlock) before it fails with what each thread waits for; nil never.
    ///   - seed: With `autoAdvance`: waits that fall due together (threads
    ///     sleeping to the same instant) end one at a time, in an order drawn
    ///     from the seed, the same every run; a failure names the seed. nil:
    ///     the kernel decides the order.
    public static func timeSession(frozenAt date: Date? = nil, autoAdvance: Bool = false,
                                   isolation: TimeSessionTrait.Isolation = .ownProcess,
                                   in directory: SessionDirectory = SessionDirectory(),
                                   realTimeLimit: Duration = .seconds(600),
                                   rate: Double? = nil, stallGrace: Duration? = .seconds(2), seed: UInt64? = nil) -> Self {
        TimeSessionTrait(frozenAt: date, autoAdvance: autoAdvance, isolation: isolation, directory: directory,
                         realTimeLimit: realTimeLimit, rate: rate, stallGrace: stallGrace, seed: seed)
    }
}
