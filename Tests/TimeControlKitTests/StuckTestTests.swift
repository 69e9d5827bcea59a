import Foundation
import Synchronization
import Testing
import TimeControlKit
import TimeControlKitTesting
import TimeShimC

/// The directory a fixture program run was given (its sessions, and its markers), from its environment.
private enum FixtureRun {
    static func directory(_ variable: String) -> String { ProcessInfo.processInfo.environment[variable] ?? "/nonexistent" }
    static func sessions(_ variable: String) -> SessionDirectory { SessionDirectory(path: directory(variable) + "/sessions") }
}

/// Tests that can never finish, run only by ``StuckTestRunTests`` (the test program started again with
/// `TIMECTL_STALL_FIXTURES` set): what each reports, where, and how soon.
@Suite("Stuck test fixtures (fail on purpose)", .enabled(if: ProcessInfo.processInfo.environment["TIMECTL_STALL_FIXTURES"] != nil))
struct StuckTestFixtures {
    static let frozenLine = #line + 1
    @Test(.timeSession(frozenAt: TraitSessions.frozenAt, in: FixtureRun.sessions("TIMECTL_STALL_FIXTURES")))
    func sleepsOnAFrozenSession() async throws {
        try await Task.sleep(for: .milliseconds(2))
    }

    static let deadlockLine = #line + 1
    @Test(.timeSession(frozenAt: TraitSessions.frozenAt, autoAdvance: true, in: FixtureRun.sessions("TIMECTL_STALL_FIXTURES")))
    func waitsForAContinuationNothingResumes() async {
        await withCheckedContinuation { (_: CheckedContinuation<Void, Never>) in }
    }

    static let timeOutLine = #line + 1
    @Test(.timeSession(frozenAt: TraitSessions.frozenAt, in: FixtureRun.sessions("TIMECTL_STALL_FIXTURES"), realTimeLimit: .seconds(4), stallGrace: nil))
    func outlivesItsRealTimeLimit() async throws {
        try await Task.sleep(for: .milliseconds(3))
    }
}

@Suite("A test that can never finish says so within seconds, at its own line")
struct StuckTestRunTests {
    @Test("a sleep on a frozen session, a deadlock under auto-advance and a time-out each fail at the test's declaration, naming what waits")
    func stuckTestsFailAtTheirDeclaration() throws {
        let scratch = try makeScratchDirectory("timectl-stall-fixtures")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        var environment = ProcessInfo.processInfo.environment
        environment["TIMECTL_STALL_FIXTURES"] = scratch
        let result = try runProgram("/proc/self/exe", ["--testing-library", "swift-testing", "--filter", "StuckTestFixtures"],
                                    environment: environment, guardSeconds: 120)
        #expect(result.status == 1, "\(result)")
        let lines = result.stderr.split(separator: "\n").map(String.init)
        func issue(_ test: String, at line: Int) -> Bool {
            lines.contains { $0.hasPrefix("✘ Test \(test) recorded an issue at StuckTestTests.swift:\(line):") }
        }
        // Frozen, nothing to advance it: the 2 ms Task.sleep is named, the way out said, within seconds.
        #expect(issue("sleepsOnAFrozenSession()", at: StuckTestFixtures.frozenLine), "\(result)")
        #expect(result.stderr.contains("Task.sleep or ContinuousClock.sleep (libdispatch's timer) for 2ms (timerfd on CLOCK_BOOTTIME)"), "\(result)")
        #expect(result.stderr.contains("give the session `autoAdvance: true`, or a `rate:`"), "\(result)")
        let summary = lines.first { $0.hasPrefix("✘ Test sleepsOnAFrozenSession() failed after ") } ?? ""
        let words = summary.split(separator: " ")
        let took: Double = words.count > 5 ? Double(String(words[5])) ?? 999 : 999
        #expect(took < 5, "failed after \(took) seconds (guard: 5): \(result)")
        // Auto-advanced, nothing waits on time: a deadlock, with what each thread waits on.
        #expect(issue("waitsForAContinuationNothingResumes()", at: StuckTestFixtures.deadlockLine), "\(result)")
        #expect(result.stderr.contains("each waiting on another, and none on time"), "\(result)")
        // The runner's real-time limit, past it: at the declaration, with the pending waits.
        #expect(issue("outlivesItsRealTimeLimit()", at: StuckTestFixtures.timeOutLine), "\(result)")
        #expect(result.stderr.contains("did not end within 4.0 seconds of real time (the trait's realTimeLimit) and was killed. Its waits on the session's time:"),
                "\(result)")
        #expect(result.stderr.contains("for 3ms (timerfd on CLOCK_BOOTTIME)"), "\(result)")
        #expect(!lines.contains { $0.contains("recorded an issue") && $0.contains("TestCaseProcess.swift") }, "no issue at a line of TimeControlKitTesting: \(result)")
        #expect(try FixtureRun.sessionsIn(scratch).sessionNames().isEmpty)
    }

    @Test("a test whose other task advances the session, however slowly, is never failed as stuck",
          .timeSession(frozenAt: TraitSessions.frozenAt, in: TraitSessions.directory, stallGrace: .milliseconds(300)))
    func advancingFromAnotherTaskIsNotStuck() async throws {
        let session = try #require(TimeSession.current)
        let nap = Task { try await Task.sleep(for: .seconds(2)) }
        // Every thread blocked for longer than the grace between two verbs, again and again: 0.1 s of real time each.
        for _ in 0..<20 {
            _ = try? await session.waitForPendingWaits(count: 1_000, realTimeLimit: .milliseconds(100))
            try session.advance(by: .milliseconds(100))
        }
        try await nap.value
        #expect(Date() == TraitSessions.frozenAt.addingTimeInterval(2))
    }
}

extension FixtureRun {
    static func sessionsIn(_ scratch: String) -> SessionDirectory { SessionDirectory(path: scratch + "/sessions") }
}

@Suite("The trait's rate")
struct TraitRateTests {
    @Test("a task spinning on Task.yield() until a 5 s timeout cancels it ends, on a session auto-advanced at a rate",
          .timeSession(frozenAt: TraitSessions.frozenAt, autoAdvance: true, in: TraitSessions.directory, rate: 50))
    func spinnerEndsAtARate() async throws {
        let clock = ContinuousClock()
        let start = clock.now
        let spinner = Task { while !Task.isCancelled { await Task.yield() } }
        try await Task.sleep(for: .seconds(5))
        spinner.cancel()
        await spinner.value
        #expect(clock.now - start >= .seconds(5))
    }

    @Test("the session runs at the rate from the moment the test's code begins",
          .timeSession(frozenAt: TraitSessions.frozenAt, in: TraitSessions.directory, rate: 1000))
    func sessionRunsAtTheRate() throws {
        let start = Date()
        #expect(start >= TraitSessions.frozenAt && start.timeIntervalSince(TraitSessions.frozenAt) < 30, "\(start)")
        let realStart = TimeSessionTraitTests.realSeconds()
        while Date().timeIntervalSince(start) < 60 {}
        // 60 s of the session's time in about 60 ms of real time (a generous guard: the point is that it moves).
        #expect(TimeSessionTraitTests.realSeconds() - realStart < 10)
        #expect(TimeSession.current?.status().rateText == "1000")
    }
}

/// libdispatch's worker-pool monitor runs on real time, not on the session (docs/swift.md).
@Suite("libdispatch's own timers in a test on a session")
struct DispatchMonitorTests {
    @Test("under auto-advance an hour of Task.sleep is a handful of steps, not one per second",
          .timeSession(frozenAt: TraitSessions.frozenAt, in: TraitSessions.directory))
    func anHourIsAHandfulOfSteps() async throws {
        let session = try #require(TimeSession.current)
        let autoAdvance = try session.startAutoAdvance()
        let clock = ContinuousClock()
        let start = clock.now
        try await Task.sleep(for: .seconds(3600))
        #expect(clock.now - start == .seconds(3600))
        let report = autoAdvance.stop()
        // The hour, and a few of libdispatch's idle workers ending after 5 s: not 3,600 of its pool monitor's ticks.
        #expect(report.steps <= 10, "\(report)")
        #expect(!session.pendingWaits().contains { $0.kind == "timerfd" && $0.clock == "CLOCK_MONOTONIC" && $0.remainingNanoseconds <= 1_000_000_000 },
                "no 1 s timer of libdispatch's pending: \(session.pendingWaits())")
    }

    @Test("on a frozen session libdispatch still adds a worker when every worker is blocked with work queued",
          .timeSession(frozenAt: TraitSessions.frozenAt, in: TraitSessions.directory, stallGrace: .seconds(10)))
    func poolGrowsOnAFrozenSession() async throws {
        // As many blocked items as the pool has threads (one per CPU), then the one that releases them: it runs
        // only once the pool's monitor, every second of real time, has found every worker blocked and added one.
        let blocked = ProcessInfo.processInfo.activeProcessorCount
        let gate = DispatchSemaphore(value: 0)
        let group = DispatchGroup()
        for _ in 0..<blocked {
            DispatchQueue.global().async(group: group) { gate.wait() }
        }
        DispatchQueue.global().async(group: group) { for _ in 0..<blocked { gate.signal() } }
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in group.notify(queue: .global()) { done.resume() } }
        #expect(Date() == TraitSessions.frozenAt)
    }
}

/// A runner left or killed in the middle of a run (docs/swift.md, "A runner killed").
@Suite("What a killed test runner leaves")
struct KilledRunnerTests {
    @Test("the sessions and processes of a runner killed by SIGKILL are ended by the next temporary session made in that directory")
    func killedRunnersSessionsEndLater() throws {
        let scratch = try makeScratchDirectory("timectl-killed-runner")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        var environment = ProcessInfo.processInfo.environment
        environment["TIMECTL_ORPHAN_FIXTURES"] = scratch
        // The report directory of the case a killed runner had in flight is its own to remove: made here, it goes with the scratch.
        environment["TMPDIR"] = scratch
        let runner = try spawnProgram("/proc/self/exe", ["--testing-library", "swift-testing", "--filter", "OrphanFixtures/holdsItsSession"],
                                      environment: environment, output: scratch + "/out", errorOutput: scratch + "/out")
        let sleeperFile = scratch + "/sleeper.pid"
        let started = waitFor(seconds: 60) { FileManager.default.fileExists(atPath: sleeperFile) }
        kill(runner, SIGKILL)
        var status: Int32 = 0
        while waitpid(runner, &status, 0) < 0 && errno == EINTR {}
        try #require(started, "\((try? String(contentsOfFile: scratch + "/out", encoding: .utf8)) ?? "")")
        let sleeper = try #require(Int32(String(contentsOfFile: sleeperFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
        let sessions = FixtureRun.sessionsIn(scratch)
        #expect(try sessions.sessionNames().count == 1, "the killed runner's session is left")
        #expect(!TimeSessionTraitCleanupTests().hasEnded(sleeper, within: 0.2), "its sleeper still runs")
        let next = try TimeSession.temporary(in: sessions)
        #expect(try sessions.sessionNames() == [next.name])
        #expect(TimeSessionTraitCleanupTests().hasEnded(sleeper, within: 30), "sleep \(sleeper) is still running")
        next.end()
        if !TimeSessionTraitCleanupTests().hasEnded(sleeper, within: 0) { kill(sleeper, SIGKILL) }
    }

    @Test("a runner whose parent ended starts no new case: the case in flight ends, the others are cancelled, nothing is left")
    func orphanedRunnerStartsNoMoreCases() throws {
        let scratch = try makeScratchDirectory("timectl-orphaned-runner")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        var environment = ProcessInfo.processInfo.environment
        environment["TIMECTL_ORPHAN_FIXTURES"] = scratch
        // The report directory of the case a killed runner had in flight is its own to remove: made here, it goes with the scratch.
        environment["TMPDIR"] = scratch
        // A parent of the runner's own, as swift-test is; killing it orphans the runner (`timeout swift test`).
        let parent = try spawnProgram("/bin/sh", ["-c", "\"$0\" --testing-library swift-testing --filter OrphanFixtures/InOrder"
                                                  + " & echo $! >\"$1/runner.pid\"; wait",
                                                  try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"), scratch],
                                      environment: environment, output: scratch + "/out", errorOutput: scratch + "/out")
        let started = waitFor(seconds: 60) { FileManager.default.fileExists(atPath: scratch + "/first.started") }
        let runnerPID = Int32((try? String(contentsOfFile: scratch + "/runner.pid", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "")
        kill(parent, SIGKILL)
        var status: Int32 = 0
        while waitpid(parent, &status, 0) < 0 && errno == EINTR {}
        _ = FileManager.default.createFile(atPath: scratch + "/parent.killed", contents: nil)
        let runner = try #require(runnerPID)
        try #require(started, "\((try? String(contentsOfFile: scratch + "/out", encoding: .utf8)) ?? "")")
        let ended = TimeSessionTraitCleanupTests().hasEnded(runner, within: 60)
        if !ended { kill(runner, SIGKILL) }
        let output = (try? String(contentsOfFile: scratch + "/out", encoding: .utf8)) ?? ""
        #expect(ended, "the orphaned runner \(runner) still runs: \(output)")
        #expect(FileManager.default.fileExists(atPath: scratch + "/first.finished"), "the case in flight ran to its end: \(output)")
        #expect(!FileManager.default.fileExists(atPath: scratch + "/second.started"), "\(output)")
        #expect(!FileManager.default.fileExists(atPath: scratch + "/third.started"), "\(output)")
        #expect(output.contains("Not started: the process that started this test runner (swift-test) has ended"), "\(output)")
        #expect(try FixtureRun.sessionsIn(scratch).sessionNames().isEmpty, "\(output)")
    }

    /// Whether `condition` holds within `seconds` of real time.
    func waitFor(seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            usleep(10_000)
        }
        return condition()
    }
}

/// Run only by ``KilledRunnerTests`` (with `TIMECTL_ORPHAN_FIXTURES` set).
@Suite("Orphan fixtures", .enabled(if: ProcessInfo.processInfo.environment["TIMECTL_ORPHAN_FIXTURES"] != nil),
       .timeSession(frozenAt: TraitSessions.frozenAt, in: FixtureRun.sessions("TIMECTL_ORPHAN_FIXTURES"), stallGrace: nil))
struct OrphanFixtures {
    static func mark(_ name: String) {
        _ = FileManager.default.createFile(atPath: FixtureRun.directory("TIMECTL_ORPHAN_FIXTURES") + "/" + name, contents: nil)
    }

    static func exists(_ name: String) -> Bool {
        FileManager.default.fileExists(atPath: FixtureRun.directory("TIMECTL_ORPHAN_FIXTURES") + "/" + name)
    }

    /// Holds its session, with a process on it, until killed.
    @Test func holdsItsSession() async throws {
        let sleeper = try #require(TimeSession.current).spawn("sleep", ["86399.75"])
        try "\(sleeper.pid)\n".write(toFile: FixtureRun.directory("TIMECTL_ORPHAN_FIXTURES") + "/sleeper.pid", atomically: true, encoding: .utf8)
        try await Task.sleep(for: .seconds(3600))
    }

    @Suite(.serialized)
    struct InOrder {
        @Test func first() {
            OrphanFixtures.mark("first.started")
            // Waits (real time: a yield of at most 10 ms on the frozen session) until the runner's parent is gone.
            while !OrphanFixtures.exists("parent.killed") { usleep(5_000) }
            OrphanFixtures.mark("first.finished")
        }

        @Test func second() { OrphanFixtures.mark("second.started") }
        @Test func third() { OrphanFixtures.mark("third.started") }
    }
}
