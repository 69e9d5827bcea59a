#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Testing
import TimeControlKit

/// Gives each test its own temporary `TimeSession`,
/// reachable as `TimeSession.current` while the test runs, and ends it —
/// every process it spawned or attached killed, its segment removed — when
/// the test ends, passed or failed.
///
/// On a `@Test`, each case of a parameterised test gets its own session; on
/// a `@Suite`, each test in it (and in its nested suites) does. Tests and
/// cases running in parallel never share one.
///
/// ```swift
/// @Test(.timeSession(frozenAt: Date(timeIntervalSince1970: 1_451_649_600)))
/// func reportIsDated() async throws {
///     let session = try #require(TimeSession.current)
///     let date = try session.spawn("date", ["+%s"])
///     _ = try await date.waitForExit()
///     #expect(date.standardOutput == "1451649600\n")
/// }
/// ```
public struct TimeSessionTrait: TestTrait, SuiteTrait, TestScoping {
    /// The wall time each session is frozen at; nil for a session at real time, running.
    public let frozenAt: Date?
    /// The directory the sessions are made in.
    public let directory: SessionDirectory

    /// Applies to every test of a suite, one session each.
    public var isRecursive: Bool { true }

    /// A session for each test case, none for a suite as a whole.
    public func scopeProvider(for test: Test, testCase: Test.Case?) -> TimeSessionTrait? {
        testCase == nil ? nil : self
    }

    /// Runs the test case with a session of its own as `TimeSession.current`, then ends the session.
    public func provideScope(for test: Test, testCase: Test.Case?,
                             performing function: @Sendable () async throws -> Void) async throws {
        let session = try TimeSession.temporary(frozenAt: frozenAt, in: directory)
        defer { session.end() }
        try await TimeSession.$current.withValue(session) {
            try await function()
        }
    }
}

extension Trait where Self == TimeSessionTrait {
    /// A private session for each test, frozen at `date`; with no date, at real time and running.
    /// - Parameters:
    ///   - date: The wall time the session is frozen at; nil leaves it running at real time.
    ///   - directory: Where the session's segment is made (by default as `timectl` finds it).
    public static func timeSession(frozenAt date: Date? = nil, in directory: SessionDirectory = SessionDirectory()) -> Self {
        TimeSessionTrait(frozenAt: date, directory: directory)
    }
}
