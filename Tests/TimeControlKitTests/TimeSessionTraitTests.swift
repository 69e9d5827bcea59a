import Foundation
import Synchronization
import Testing
import TimeControlKit
import TimeControlKitTesting
import TimeShimC

/// The trait's sessions live in the build directory, never in the user's.
enum TraitSessions {
    static let directory = SessionDirectory(path: Build.binDirectory + "/trait-test-sessions")
    static let frozenAt = Date(timeIntervalSince1970: 1_451_649_600)
    /// Where ``TraitFixtures`` make theirs: nothing else does, so it must be empty after them.
    static let fixtureDirectory = SessionDirectory(path: Build.binDirectory + "/trait-fixture-sessions")
}

@Suite("The .timeSession() trait", .timeSession(frozenAt: TraitSessions.frozenAt, in: TraitSessions.directory))
struct TimeSessionTraitTests {
    /// Seconds of real time (read as TimeControlKit reads it: real even in a process on a session).
    static func realSeconds() -> Double { Double(tc_real_ns(CLOCK_MONOTONIC)) / 1e9 }

    @Test("each case of a parameterised test, running in parallel, sees only its own frozen time", arguments: 0..<6)
    func parallelCasesHaveTheirOwnTime(offset: Int) async throws {
        let session = try #require(TimeSession.current)
        try session.advance(by: .seconds(offset * 1000))
        // Every case advances by its own amount before its process reads the
        // clock: with one shared session, the readings would add up.
        let date = try session.spawn("date", ["+%s"])
        #expect(try await date.waitForExit() == .exited(0))
        #expect(date.standardOutput == "\(1_451_649_600 + offset * 1000)\n")
        #expect(TimeSession.current?.status().frozen == true)
    }

    @Test("a child task sees the test's session")
    func childTasksSeeTheSession() async throws {
        let session = try #require(TimeSession.current)
        let seen = await Task { TimeSession.current }.value
        #expect(seen === session)
    }
}

@Suite("Without the trait")
struct NoTimeSessionTraitTests {
    @Test("TimeSession.current is nil")
    func currentIsNil() {
        #expect(TimeSession.current == nil)
    }
}

@Suite("The trait's clean-up")
struct TimeSessionTraitCleanupTests {
    struct Failure: Error {}

    @Test("a failing test's session is removed and its processes killed (the test in the runner's process)")
    func endsTheSessionWhenTheTestFails() async throws {
        let sandbox = try Sandbox()
        let trait = TimeSessionTrait.timeSession(isolation: .runnerProcess, in: sandbox.sessions)
        let seen = Mutex<(segment: String, pid: Int32)?>(nil)
        await #expect(throws: Failure.self) {
            try await trait.provideScope(for: try #require(Test.current), testCase: Test.Case.current) {
                let session = try #require(TimeSession.current)
                #expect(session.status().frozen == false)  // .timeSession(): real time, running
                let sleeper = try session.spawn("sleep", ["1000"])
                seen.withLock { $0 = (session.segmentPath, sleeper.pid) }
                throw Failure()
            }
        }
        let (segment, pid) = try #require(seen.withLock { $0 })
        #expect(!FileManager.default.fileExists(atPath: segment))
        #expect(try sandbox.sessions.sessionNames().isEmpty)
        #expect(hasEnded(pid, within: 30), "sleep \(pid) is still running")
        #expect(TimeSession.current == nil)
    }

    /// Whether `pid` is gone or a zombie (killed, not yet reaped) within `seconds` of real time.
    func hasEnded(_ pid: Int32, within seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        repeat {
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return true }
            if stat[stat.index(close, offsetBy: 2)] == "Z" { return true }
            usleep(10_000)
        } while Date() < deadline
        return false
    }
}

/// The test's own code — Foundation's `Date()`, clocks, `Task.sleep`, dispatch — is on the session:
/// each case runs in a process of its own, attached to its session.
@Suite("The trait puts the test's own code on its session")
struct TraitOwnCodeTests {
    @Test("Date() in the test reads its case's session", .timeSession(frozenAt: TraitSessions.frozenAt, in: TraitSessions.directory),
          arguments: [0, 7200])
    func dateFollowsTheSession(offset: Int) throws {
        try TimeSession.current!.advance(by: .seconds(offset))
        #expect(Date().timeIntervalSince1970 == 1_451_649_600 + Double(offset))
        #expect(TimeSession.current?.date == Date())
    }

    @Test("a parallel test has its own timeline", .timeSession(frozenAt: Date(timeIntervalSince1970: 1_000_000_000), in: TraitSessions.directory))
    func parallelTimeline() async {
        for _ in 0..<50 {
            #expect(Date().timeIntervalSince1970 == 1_000_000_000)
            await Task.yield()
        }
    }

    @Test("a test without the trait sees real time")
    func realTimeWithoutTheTrait() async {
        for _ in 0..<50 {
            let now = Date().timeIntervalSince1970
            #expect(now > 1_700_000_000 && abs(now - Double(time(nil))) < 2)
            await Task.yield()
        }
    }

    @Test("with auto-advance, the test's Task.sleep and asyncAfter skip ahead",
          .timeSession(frozenAt: TraitSessions.frozenAt, autoAdvance: true, in: TraitSessions.directory))
    func autoAdvanceInProcess() async throws {
        let clock = ContinuousClock()
        let start = clock.now
        let startDate = Date()
        try await Task.sleep(for: .seconds(60))
        #expect(clock.now - start == .seconds(60))
        #expect(Date().timeIntervalSince(startDate) == 60)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().asyncAfter(deadline: .now() + 30) { continuation.resume() }
        }
        let elapsed = clock.now - start
        #expect(elapsed >= .seconds(90) && elapsed < .seconds(90.01), "\(elapsed)")
        #expect(Date().timeIntervalSince(startDate) >= 90)
    }
}

/// Every family of clock and wait the test's own code may use, on its session.
@Suite("The test's own clocks and waits follow its session")
struct TraitWaitFamiliesTests {
    /// Measures `body` on the session's monotonic and wall clocks, both as the test's own code reads them.
    static func measure(_ body: () async throws -> Void) async rethrows -> (monotonic: Double, wall: Double) {
        let clock = ContinuousClock(), suspending = SuspendingClock()
        let (start, suspendingStart, date) = (clock.now, suspending.now, Date())
        try await body()
        let elapsed = clock.now - start
        #expect(suspending.now - suspendingStart == elapsed, "SuspendingClock and ContinuousClock agree")
        return (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18, Date().timeIntervalSince(date))
    }

    @Test("under auto-advance each wait lasts exactly its virtual length, at once",
          .timeSession(frozenAt: TraitSessions.frozenAt, autoAdvance: true, in: TraitSessions.directory))
    func everyFamilyUnderAutoAdvance() async throws {
        let realStart = TimeSessionTraitTests.realSeconds()
        var measured: [String: Double] = [:]
        measured["Task.sleep"] = try await Self.measure { try await Task.sleep(for: .seconds(7)) }.monotonic
        measured["SuspendingClock.sleep"] = try await Self.measure { try await SuspendingClock().sleep(for: .seconds(3)) }.monotonic
        measured["Thread.sleep"] = await Self.measure {
            await withCheckedContinuation { done in Thread.detachNewThread { Thread.sleep(forTimeInterval: 4); done.resume() } }
        }.monotonic
        measured["usleep"] = await Self.measure {
            await withCheckedContinuation { done in Thread.detachNewThread { usleep(2_500_000); done.resume() } }
        }.monotonic
        measured["asyncAfter"] = await Self.measure {
            await withCheckedContinuation { done in DispatchQueue.global().asyncAfter(deadline: .now() + 30) { done.resume() } }
        }.monotonic
        measured["DispatchSourceTimer"] = await Self.measure {
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                let timer = DispatchSource.makeTimerSource(queue: .global())
                timer.schedule(deadline: .now() + 6)
                timer.setEventHandler { timer.cancel(); done.resume() }
                timer.resume()
            }
        }.monotonic
        // When the timer fires, not when the run loop returns (run(mode:before:) runs on to its limit after a timer).
        let clock = ContinuousClock()
        let timerStart = clock.now
        let firedAfter = await withCheckedContinuation { (done: CheckedContinuation<Duration, Never>) in
            Thread.detachNewThread {
                let firedAt = Mutex<ContinuousClock.Instant?>(nil)
                _ = Timer.scheduledTimer(withTimeInterval: 5, repeats: false) { _ in firedAt.withLock { $0 = clock.now } }
                while firedAt.withLock({ $0 }) == nil { _ = RunLoop.current.run(mode: .default, before: Date().addingTimeInterval(1)) }
                done.resume(returning: firedAt.withLock { $0! } - timerStart)
            }
        }
        measured["Timer on a RunLoop"] = Double(firedAfter.components.seconds) + Double(firedAfter.components.attoseconds) / 1e18
        measured["DispatchSemaphore timeout"] = await Self.measure {
            await withCheckedContinuation { done in
                Thread.detachNewThread { _ = DispatchSemaphore(value: 0).wait(timeout: .now() + 8); done.resume() }
            }
        }.monotonic
        measured["NSCondition.wait(until:)"] = await Self.measure {
            await withCheckedContinuation { done in
                Thread.detachNewThread {
                    let condition = NSCondition()
                    condition.lock()
                    _ = condition.wait(until: Date().addingTimeInterval(9))
                    condition.unlock()
                    done.resume()
                }
            }
        }.monotonic
        let expected: [String: Double] = ["Task.sleep": 7, "SuspendingClock.sleep": 3, "Thread.sleep": 4, "usleep": 2.5, "asyncAfter": 30,
                                          "DispatchSourceTimer": 6, "Timer on a RunLoop": 5, "DispatchSemaphore timeout": 8,
                                          "NSCondition.wait(until:)": 9]
        for (name, seconds) in expected {
            let got = try #require(measured[name])
            // Exactly the wait's length (a timer's deadline may be set a few µs after the clock was first read).
            #expect(got >= seconds && got < seconds + 0.001, "\(name): \(got) s of virtual time, expected \(seconds)")
        }
        #expect(TimeSessionTraitTests.realSeconds() - realStart < 5, "74.5 s of virtual waits took seconds of real time")
    }

    @Test("under auto-advance the test's own waits and its processes' waits skip ahead together, in order",
          .timeSession(frozenAt: TraitSessions.frozenAt, autoAdvance: true, in: TraitSessions.directory))
    func ownAndSpawnedWaitsTogether() async throws {
        let session = try #require(TimeSession.current)
        let worker = try session.spawn("sh", ["-c", "sleep 30; date +%s"])
        try await Task.sleep(for: .seconds(10))
        #expect(Date() == TraitSessions.frozenAt.addingTimeInterval(10))
        #expect(worker.isRunning, "the worker sleeps on until +30 s")
        #expect(try await worker.waitForExit() == .exited(0))
        #expect(worker.standardOutput == "1451649630\n")
        #expect(Date() == TraitSessions.frozenAt.addingTimeInterval(30))
    }

    @Test("on a frozen session the test's own sleep waits for the session to be advanced",
          .timeSession(frozenAt: TraitSessions.frozenAt, in: TraitSessions.directory))
    func frozenSleepWaitsForAdvance() async throws {
        let session = try #require(TimeSession.current)
        let nap = Task { try await Task.sleep(for: .seconds(600)) }
        // The runtime's own timers (libdispatch's) are pending too: wait for this 10-minute one.
        try await session.waitForPendingWaits(where: { $0.remainingNanoseconds == 600_000_000_000 && $0.kind == "timerfd" })
        #expect(Date() == TraitSessions.frozenAt)
        try session.advance(by: .seconds(600))
        try await nap.value
        #expect(Date() == TraitSessions.frozenAt.addingTimeInterval(600))
    }

    @Test("in the test's own process, eventually and stepForward wait for the test's own work before each step",
          .timeSession(frozenAt: TraitSessions.frozenAt, in: TraitSessions.directory))
    func harnessStepsWaitForTheTestsOwnThreads() async throws {
        let session = try #require(TimeSession.current)
        let fired = Mutex<Date?>(nil)
        DispatchQueue.global().asyncAfter(deadline: .now() + 3) {
            Self.spin(milliseconds: 50)   // work before the result: a step taken meanwhile would be one too many
            fired.withLock { $0 = Date() }
        }
        try await session.eventually("the reminder fired", within: .seconds(5)) { fired.withLock { $0 } != nil }
        #expect(fired.withLock { $0 } == TraitSessions.frozenAt.addingTimeInterval(3))
        #expect(Date() == TraitSessions.frozenAt.addingTimeInterval(3), "not a step further")

        // A task that sleeps 2 s and reads the clock, twice: stepping by 10 s shows it +2 s, then +4 s.
        let seen = Task { () -> [Double] in
            var seen: [Double] = []
            for _ in 0..<2 {
                try await Task.sleep(for: .seconds(2))
                seen.append(Date().timeIntervalSince(TraitSessions.frozenAt))
            }
            return seen
        }
        try await session.waitForPendingWaits(where: { $0.kind == "timerfd" && $0.remainingNanoseconds == 2_000_000_000 })
        try await session.stepForward(by: .seconds(10))
        #expect(try await seen.value == [5, 7])
        #expect(Date() == TraitSessions.frozenAt.addingTimeInterval(13))
    }

    @Test("a scheduler started in the test's own process steps only when the test's own threads wait",
          .timeSession(frozenAt: TraitSessions.frozenAt, in: TraitSessions.directory))
    func autoAdvanceStartedInTheTest() async throws {
        let session = try #require(TimeSession.current)
        let autoAdvance = try session.startAutoAdvance()
        let clock = ContinuousClock()
        let start = clock.now
        try await Task.sleep(for: .seconds(45))
        #expect(clock.now - start == .seconds(45))
        Self.spin(milliseconds: 100)   // busy: no step while it runs
        #expect(clock.now - start == .seconds(45))
        let report = autoAdvance.stop()
        #expect(report.virtualNanoseconds == 45_000_000_000 && autoAdvance.failure == nil, "\(report)")
    }

    /// Keeps the calling thread busy for `milliseconds` of real time.
    static func spin(milliseconds: Int64) {
        let end = tc_real_ns(CLOCK_MONOTONIC) + milliseconds * 1_000_000
        while tc_real_ns(CLOCK_MONOTONIC) < end {}
    }

    @Test("a clock read with clock_gettime and time() is the session's",
          .timeSession(frozenAt: TraitSessions.frozenAt, in: TraitSessions.directory))
    func libcClocks() throws {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        #expect(now.tv_sec == 1_451_649_600 && now.tv_nsec == 0)
        #expect(time(nil) == 1_451_649_600)
        var monotonic = timespec(), later = timespec()
        clock_gettime(CLOCK_MONOTONIC, &monotonic)
        usleep(5_000)  // at most 10 ms: on a frozen session with no scheduler, a yield of real time (docs/starvation.md)
        clock_gettime(CLOCK_MONOTONIC, &later)
        #expect(monotonic.tv_sec == later.tv_sec && monotonic.tv_nsec == later.tv_nsec)
    }
}

/// Tests that fail on purpose, run only by ``TraitFixtureRunTests`` (which starts this test program again with
/// `TIMECTL_TRAIT_FIXTURES` set) to see what a failing test in its own process reports, and what it leaves behind.
@Suite("Trait fixtures (fail on purpose)", .enabled(if: ProcessInfo.processInfo.environment["TIMECTL_TRAIT_FIXTURES"] != nil,
                                                   "fixtures that fail on purpose, run only by the trait's own tests"),
       .timeSession(frozenAt: TraitSessions.frozenAt, in: TraitSessions.fixtureDirectory))
struct TraitFixtures {
    @Test(arguments: ["first", "second"])
    func failsInItsOwnProcess(word: String) throws {
        print("fixture stdout \(word) \(Int(Date().timeIntervalSince1970))")
        FileHandle.standardError.write(Data("fixture stderr \(word)\n".utf8))
        let sleeper = try TimeSession.current!.spawn("sleep", ["86399.5"])
        try "\(sleeper.pid)\n".write(toFile: ProcessInfo.processInfo.environment["TIMECTL_TRAIT_FIXTURES"]! + "/\(word).pid", atomically: true, encoding: .utf8)
        #expect(Date().timeIntervalSince1970 == 0, "fixture expectation \(word)")
    }

    @Test func crashes() {
        print("about to crash")
        Self.crash()
    }

    /// The crash's own line (a frame of this file in the crashed thread).
    static func crash() { fatalError("fixture crash") }
    static let crashLine = #line - 1

    @Test func throwsAnError() throws {
        struct Broken: Error {}
        throw Broken()
    }

    @Test func requiresAValue() throws {
        let missing: Int? = nil
        _ = try #require(missing, "fixture require")
    }
}

@Suite("A test in its own process: what a failure reports, and what it leaves behind")
struct TraitFixtureRunTests {
    @Test("failures, errors and crashes in the test's own process are the case's issues, at their source lines; its output is passed on; its processes and session are gone")
    func failingFixtures() throws {
        let scratch = try makeScratchDirectory("timectl-fixtures")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        var environment = ProcessInfo.processInfo.environment
        environment["TIMECTL_TRAIT_FIXTURES"] = scratch
        let result = try runProgram("/proc/self/exe", ["--testing-library", "swift-testing", "--filter", "TraitFixtures"],
                                    environment: environment, guardSeconds: 120)
        #expect(result.status == 1, "\(result)")
        for word in ["first", "second"] {
            #expect(result.stdout.contains("fixture stdout \(word) 1451649600\n"), "\(result)")
            #expect(result.stderr.contains("fixture stderr \(word)\n"), "\(result)")
            // The parent's report: the case, the expectation's own line, its message.
            #expect(result.stderr.contains("Test failsInItsOwnProcess(word:) recorded an issue with 1 argument word → \"\(word)\" at TimeSessionTraitTests.swift:"), "\(result)")
            #expect(result.stderr.contains("fixture expectation \(word)"), "\(result)")
            let pid = try #require(Int32(String(contentsOfFile: scratch + "/\(word).pid", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
            #expect(TimeSessionTraitCleanupTests().hasEnded(pid, within: 30), "the \(word) case's sleep \(pid) is still running")
        }
        // Each issue reads as it does without the trait: its kind's own first line, on the line that names the case.
        let lines = result.stderr.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.contains("Test failsInItsOwnProcess(word:) recorded an issue with 1 argument word → \"first\" at TimeSessionTraitTests.swift:")
            && $0.hasSuffix(": Expectation failed: (Date().timeIntervalSince1970 → 1451649600.0) == (0 → 0.0)") }, "\(result)")
        #expect(lines.contains { $0.contains("Test throwsAnError() recorded an issue at TimeSessionTraitTests.swift:") && $0.hasSuffix(": Caught error: Broken()") },
                "\(result)")
        #expect(lines.contains { $0.contains("Test requiresAValue() recorded an issue at TimeSessionTraitTests.swift:") && $0.hasSuffix(": Expectation failed: missing → nil") },
                "\(result)")
        #expect(lines.contains("↳ fixture require"), "\(result)")
        #expect(lines.filter { $0.hasSuffix(": Issue recorded") }.count == 1, "the crash's alone: \(result)")
        // The crash: at the crashing line of this file, with the runtime's message and the frame, and a whole backtrace.
        #expect(result.stdout.contains("about to crash"), "\(result)")
        #expect(lines.contains { $0.hasPrefix("✘ Test crashes() recorded an issue at TimeSessionTraitTests.swift:\(TraitFixtures.crashLine):") }, "\(result)")
        #expect(result.stderr.contains("crashed (killed by signal 4): Fatal error: fixture crash"), "\(result)")
        #expect(result.stderr.contains("TimeSessionTraitTests.swift:\(TraitFixtures.crashLine):"), "\(result)")
        #expect(result.stderr.contains("Backtracing from") && result.stderr.contains("done ***"), "the backtrace was made: \(result)")
        #expect(!result.stderr.contains("failed to suspend thread"), "every thread was suspended for the backtrace: \(result)")
        #expect(!lines.contains { $0.contains("recorded an issue") && $0.contains("TestCaseProcess.swift") }, "no issue at a line of TimeControlKitTesting: \(result)")
        #expect(result.stderr.contains("Test run with 4 tests in 1 suite failed"), "\(result)")
        #expect(try TraitSessions.fixtureDirectory.sessionNames().isEmpty)
    }
}
