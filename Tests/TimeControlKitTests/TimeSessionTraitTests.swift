import Foundation
import Synchronization
import Testing
import TimeControlKit
import TimeControlKitTesting

/// The trait's sessions live in the build directory, never in the user's.
enum TraitSessions {
    static let directory = SessionDirectory(path: Build.binDirectory + "/trait-test-sessions")
    static let frozenAt = Date(timeIntervalSince1970: 1_451_649_600)
}

@Suite("The .timeSession() trait", .timeSession(frozenAt: TraitSessions.frozenAt, in: TraitSessions.directory))
struct TimeSessionTraitTests {
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

    @Test("a failing test's session is removed and its processes killed")
    func endsTheSessionWhenTheTestFails() async throws {
        let sandbox = try Sandbox()
        let trait = TimeSessionTrait.timeSession(in: sandbox.sessions)
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
