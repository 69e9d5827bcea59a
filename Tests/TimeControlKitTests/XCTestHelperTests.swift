import Foundation
import TimeControlKit
import TimeControlKitTesting
import XCTest

/// `TimeSession.temporary(frozenAt:for:)`: XCTest's equivalent of the trait.
final class TemporarySessionXCTests: XCTestCase {
    private var sandbox: Sandbox!
    private var session: TimeSession!
    private var segment: String?

    override func setUpWithError() throws {
        sandbox = try Sandbox()
        session = try TimeSession.temporary(frozenAt: Date(timeIntervalSince1970: 1_451_649_600), for: self, in: sandbox.sessions)
        segment = session.segmentPath
    }

    func testSpawnedProcessSeesTheFrozenTimeAndTheSessionEndsWithTheTest() async throws {
        XCTAssertNil(TimeSession.current)
        try session.advance(by: .seconds(5))
        let date = try session.spawn("date", ["+%s"])
        let exit = try await date.waitForExit()
        XCTAssertEqual(exit, .exited(0))
        XCTAssertEqual(date.standardOutput, "1451649605\n")
    }

    // Runs after the teardown blocks (XCTest's order): the session is gone by now.
    override func tearDownWithError() throws {
        let segment = try XCTUnwrap(segment)
        XCTAssertFalse(FileManager.default.fileExists(atPath: segment), "\(segment) is still there")
        XCTAssertEqual(try sandbox.sessions.sessionNames(), [])
        session = nil
        sandbox = nil
    }
}
