import Foundation
import Testing
@testable import TimeControlKit

// Setup that several suites did each in their own words: scratch
// directories and auto-advanced runs at the tests' usual instant (acting as
// another user is in OtherUser.swift).

/// A new empty directory `PREFIX-XXXXXX` (mode 0700) in `base`, by default the temporary directory; the caller removes it.
func makeScratchDirectory(_ prefix: String, in base: String = FileManager.default.temporaryDirectory.path) throws -> String {
    var template = Array((base + "/\(prefix)-XXXXXX").utf8CString)
    let path = template.withUnsafeMutableBufferPointer { buffer in mkdtemp(buffer.baseAddress!).map { String(cString: $0) } }
    return try #require(path)
}

/// Kills what still runs attached to `session` (what a test left behind on purpose, once it has looked).
func killAttachedProcesses(of session: TimeSession) {
    for process in session.attachedProcesses() { kill(process.pid, SIGKILL) }
}

extension Sandbox {
    /// `timectl run --at @1451649600 --auto-advance -- COMMAND…` (a temporary session at ``frozenStart``).
    func runAutoAdvanced(_ command: [String], guardSeconds: Double = 60) throws -> ProcessResult {
        try timectl(["run", "--at", "@1451649600", "--auto-advance", "--"] + command, guardSeconds: guardSeconds)
    }
}
