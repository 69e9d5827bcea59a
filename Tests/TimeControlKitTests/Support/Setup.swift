import Foundation
import Testing
@testable import TimeControlKit

// Setup that several suites did each in their own words: scratch
// directories, a session directory handed to another user, running as that
// user, and auto-advanced runs at the tests' usual instant.

/// A new empty directory `PREFIX-XXXXXX` in the temporary directory; the caller removes it.
func makeScratchDirectory(_ prefix: String) throws -> String {
    var template = Array((FileManager.default.temporaryDirectory.path + "/\(prefix)-XXXXXX").utf8CString)
    let path = template.withUnsafeMutableBufferPointer { buffer in mkdtemp(buffer.baseAddress!).map { String(cString: $0) } }
    return try #require(path)
}

/// Runs `executable` as user and group 65534 (nobody, an ordinary user with nothing of root's); this process must be root.
func runAsNobody(_ executable: String, _ arguments: [String], environment: [String: String]) throws -> ProcessResult {
    try runProgram("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "--", executable] + arguments,
                   environment: environment)
}

/// Kills what still runs attached to `session` (what a test left behind on purpose, once it has looked).
func killAttachedProcesses(of session: TimeSession) {
    for process in session.attachedProcesses() { kill(process.pid, SIGKILL) }
}

extension Sandbox {
    /// A session directory (mode 0700) of its own, `PREFIX-UUID` in the
    /// temporary directory rather than in a sandbox, for a test that gives it
    /// to another user; and a sandbox's environment with `TIMECTL_DIR`
    /// naming it. The caller removes it.
    static func standaloneSessionDirectory(_ prefix: String) throws -> (directory: String, environment: [String: String]) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false,
                                                attributes: [.posixPermissions: 0o700])
        var environment = try Sandbox().environment
        environment["TIMECTL_DIR"] = directory
        return (directory, environment)
    }

    /// `timectl run --at @1451649600 --auto-advance -- COMMAND…` (a temporary session at ``frozenStart``).
    func runAutoAdvanced(_ command: [String], guardSeconds: Double = 60) throws -> ProcessResult {
        try timectl(["run", "--at", "@1451649600", "--auto-advance", "--"] + command, guardSeconds: guardSeconds)
    }
}
