import Foundation
import TimeControlKit
import TimeControlKitTesting
import TimeShimC
import XCTest

/// `withTimeSession { }`: an XCTest test's own code on a session of its own.
final class WithTimeSessionXCTests: XCTestCase {
    private let newYear2016 = Date(timeIntervalSince1970: 1_451_649_600)

    func testOwnDateIsTheSessionsAndMovesWithIt() throws {
        try withTimeSession(frozenAt: newYear2016) { session in
            for _ in 0..<50 {
                XCTAssertEqual(Date().timeIntervalSince1970, 1_451_649_600)
                sched_yield()
            }
            try session.advance(by: .seconds(7200))
            XCTAssertEqual(Date().timeIntervalSince1970, 1_451_656_800)
            XCTAssertEqual(TimeSession.current?.segmentPath, session.segmentPath)
        }
        // Back in the runner, on real time.
        XCTAssertEqual(Date().timeIntervalSince1970, realNow(), accuracy: 5)
    }

    func testEachCallHasItsOwnSession() throws {
        try withTimeSession(frozenAt: Date(timeIntervalSince1970: 1_000_000_000)) { _ in
            XCTAssertEqual(Date().timeIntervalSince1970, 1_000_000_000)
            XCTAssertTrue(Self.startedByTheRunner(), "the first call's process was started by another call's")
        }
        try withTimeSession(frozenAt: newYear2016) { _ in
            XCTAssertEqual(Date().timeIntervalSince1970, 1_451_649_600)
            XCTAssertTrue(Self.startedByTheRunner(), "the second call's process was started by another call's")
        }
    }

    /// Whether this process's parent is the runner, not a process started for a call (which names its test).
    private static func startedByTheRunner() -> Bool {
        guard let environment = FileManager.default.contents(atPath: "/proc/\(getppid())/environ") else { return false }
        return !environment.split(separator: 0).contains { $0.starts(with: Array("TIMECTL_TEST_ID=".utf8)) }
    }

    func testAutoAdvanceSkipsTheTestsOwnSleepsAndTimers() async throws {
        let began = realNow()
        try await withTimeSession(frozenAt: newYear2016, autoAdvance: true) { _ in
            let start = Date()
            try await Task.sleep(for: .seconds(60))
            XCTAssertEqual(Date().timeIntervalSince(start), 60, accuracy: 0.5)
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                DispatchQueue.global().asyncAfter(deadline: .now() + 30) { done.resume() }
            }
            XCTAssertEqual(Date().timeIntervalSince(start), 90, accuracy: 0.5)
            threadSleep(10)
            XCTAssertEqual(Date().timeIntervalSince(start), 100, accuracy: 0.5)
        }
        // A guard against the sleeps having run on real time, not a speed assertion.
        XCTAssertLessThan(realNow() - began, 60)
    }

    /// XCTest waits for an async test in 0.1 s slices of its run loop; they are no steps of the body's session.
    func testAutoAdvanceStepsOnlyForTheBodysOwnWaits() async throws {
        try await withTimeSession(frozenAt: newYear2016, autoAdvance: true) { session in
            let clock = ContinuousClock()
            let start = clock.now
            var delay = 1
            while delay <= 512 {
                try await Task.sleep(for: .seconds(delay))
                delay *= 2
            }
            XCTAssertEqual(clock.now - start, .seconds(1023))
            // Ten sleeps, and libdispatch's idle workers ending after 5 s: not one step per slice (about 10,000).
            let steps = try XCTUnwrap(session.status().scheduler?.steps)
            XCTAssertLessThanOrEqual(steps, 40)
        }
    }

    /// A body that can never end fails within seconds, at the call, naming what it waits for.
    func testAStuckBodyFailsWithinSecondsAtTheCall() throws {
        let began = realNow()
        let result = try runProgram(try testProgram(), ["TimeControlKitTests.WithTimeSessionFailureProbe/testStuck"],
                                    environment: ProcessInfo.processInfo.environment.merging([WithTimeSessionFailureProbe.variable: "1"]) { $1 },
                                    guardSeconds: 120)
        XCTAssertEqual(result.status, 1, "\(result)")
        let file = URL(fileURLWithPath: #filePath).path
        XCTAssertTrue(result.stdout.contains("\(file):\(WithTimeSessionFailureProbe.stuckLine): error: WithTimeSessionFailureProbe.testStuck : The test can never finish"),
                      "\(result)")
        XCTAssertTrue(result.stdout.contains("Thread.sleep, usleep or nanosleep for 20ms (sleep on CLOCK_MONOTONIC)"), "\(result)")
        XCTAssertLessThan(realNow() - began, 30, "a guard against a hang, not a speed check")
    }

    func testATestWithoutASessionSeesRealTime() {
        for _ in 0..<50 {
            XCTAssertEqual(Date().timeIntervalSince1970, realNow(), accuracy: 5)
            sched_yield()
        }
    }

    /// Failures inside the body come back to the runner at their lines, and
    /// fail the test there: run the probe below as a test program of its own.
    func testFailuresInsideAreTheTestsOwnAtTheirLines() throws {
        let result = try runProgram(try testProgram(), ["TimeControlKitTests.WithTimeSessionFailureProbe/testFailsInside"],
                                    environment: ProcessInfo.processInfo.environment.merging([WithTimeSessionFailureProbe.variable: "1"]) { $1 },
                                    guardSeconds: 120)
        XCTAssertEqual(result.status, 1, "\(result)")
        let file = URL(fileURLWithPath: #filePath).path
        XCTAssertTrue(result.stdout.contains("\(file):\(WithTimeSessionFailureProbe.failingLine): error: WithTimeSessionFailureProbe.testFailsInside : XCTAssertEqual failed: (\"1451649600.0\") is not equal to (\"0.0\") - inside"),
                      "\(result)")
        XCTAssertTrue(result.stdout.contains("Executed 1 test, with 1 failure"), "\(result)")
        XCTAssertTrue(result.stdout.contains("printed inside"), "what the body printed is passed on: \(result)")
    }

    /// The real wall clock, never the shim's.
    private func realNow() -> Double { Double(tc_real_ns(CLOCK_REALTIME)) / 1e9 }

    /// `Thread.sleep`, which Swift keeps out of async code.
    private func threadSleep(_ seconds: Double) { Thread.sleep(forTimeInterval: seconds) }

    private func testProgram() throws -> String {
        try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
    }
}

/// Fails on purpose inside `withTimeSession`: run only by the test above, as a program of its own.
final class WithTimeSessionFailureProbe: XCTestCase {
    static let variable = "TIMECTL_XCTEST_FAILURE_PROBE"
    static let failingLine = #line + 8

    func testFailsInside() throws {
        guard ProcessInfo.processInfo.environment[Self.variable] != nil else {
            throw XCTSkip("a fixture of testFailuresInsideAreTheTestsOwnAtTheirLines, run by it")
        }
        try withTimeSession(frozenAt: Date(timeIntervalSince1970: 1_451_649_600)) { _ in
            print("printed inside")
            XCTAssertEqual(Date().timeIntervalSince1970, 0, "inside")
        }
    }

    static let stuckLine = #line + 5
    func testStuck() throws {
        guard ProcessInfo.processInfo.environment[Self.variable] != nil else {
            throw XCTSkip("a fixture of testAStuckBodyFailsWithinSecondsAtTheCall, run by it")
        }
        try withTimeSession(frozenAt: Date(timeIntervalSince1970: 1_451_649_600)) { _ in
            Thread.sleep(forTimeInterval: 0.02)
        }
    }
}
