#if canImport(XCTest)
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import TimeControlKit
import XCTest

extension TimeSession {
    /// A temporary session for an XCTest test, ended — every process it
    /// spawned or attached killed, its segment removed — when the test
    /// ends, passed or failed (through `addTeardownBlock`). Call it in
    /// `setUp()` or in the test itself:
    ///
    /// ```swift
    /// override func setUpWithError() throws {
    ///     session = try TimeSession.temporary(frozenAt: someDate, for: self)
    /// }
    /// ```
    ///
    /// `TimeSession.current` stays nil in XCTest: keep the session returned.
    /// - Parameters:
    ///   - date: The wall time the session is frozen at; nil leaves it running at real time.
    ///   - testCase: The test case whose teardown ends the session.
    ///   - directory: Where the session's segment is made (by default as `timectl` finds it).
    public static func temporary(frozenAt date: Date? = nil, for testCase: XCTestCase,
                                 in directory: SessionDirectory = SessionDirectory()) throws -> TimeSession {
        let session = try temporary(frozenAt: date, in: directory)
        testCase.addTeardownBlock { session.end() }
        return session
    }
}
#endif
