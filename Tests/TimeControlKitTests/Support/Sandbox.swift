import Foundation
import Testing
@testable import TimeControlKit

/// A private session directory for one test, removed afterwards.
final class Sandbox: @unchecked Sendable {
    let directory: String
    let sessions: SessionDirectory

    init() throws {
        directory = try makeScratchDirectory("timectl-sessions")
        sessions = SessionDirectory(path: directory)
    }

    deinit {
        // What a test left running on its sessions (a sleeper whose timectl was stopped) goes too.
        for name in (try? sessions.sessionNames()) ?? [] {
            if let session = try? TimeSession.open(named: name, in: sessions) { killAttachedProcesses(of: session) }
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// The environment for processes of this test: its own session directory, nothing inherited from timectl.
    var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        for key in ["TIMECTL_SESSION", "TIMECTL_SEGMENT", "TIMECTL_SHIM", "TIMECTL_ON_ERROR", "LD_PRELOAD", "XDG_RUNTIME_DIR"] {
            environment[key] = nil
        }
        environment["TIMECTL_DIR"] = directory
        return environment
    }

    /// The same, as `KEY=VALUE` entries.
    var environmentEntries: [String] { environment.map { "\($0.key)=\($0.value)" } }

    /// Runs `timectl ARGS…`.
    @discardableResult
    func timectl(_ arguments: String..., environment extra: [String: String] = [:], guardSeconds: Double = 60) throws -> ProcessResult {
        try timectl(arguments, environment: extra, guardSeconds: guardSeconds)
    }

    func timectl(_ arguments: [String], environment extra: [String: String] = [:], guardSeconds: Double = 60) throws -> ProcessResult {
        try runProgram(Build.timectl, arguments, environment: environment.merging(extra) { $1 }, guardSeconds: guardSeconds)
    }

    /// Runs `timectl --session NAME run -- COMMAND…` and requires it to succeed.
    func runAttached(session: String, _ command: [String], guardSeconds: Double = 60) throws -> ProcessResult {
        let result = try timectl(["--session", session, "run", "--"] + command, guardSeconds: guardSeconds)
        #expect(result.status == 0, "\(command) under timectl: \(result)")
        return result
    }

    /// Starts `timectl --session NAME run -- COMMAND…` in the background.
    func startAttached(session: String, _ command: [String]) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Build.timectl)
        process.arguments = ["--session", session, "run", "--"] + command
        process.environment = environment
        try launch(process)
        return process
    }

    /// The session's attached processes once `condition` holds for them
    /// (polled, with a real-time guard against hangs).
    @discardableResult
    func waitForAttached(_ session: TimeSession, guardSeconds: Double = 10,
                         until condition: ([RunningProcess]) -> Bool) -> [RunningProcess] {
        let deadline = Date().addingTimeInterval(guardSeconds)
        var attached = session.attachedProcesses()
        while !condition(attached) && Date() < deadline {
            usleep(20_000)
            attached = session.attachedProcesses()
        }
        return attached
    }

    /// Whether process `pid` is gone, or a zombie, within `guardSeconds`
    /// (a process re-parented to init stays a zombie until init reaps it).
    func waitUntilGone(_ pid: Int32, guardSeconds: Double = 10) -> Bool {
        let deadline = Date().addingTimeInterval(guardSeconds)
        while ProcFS.isLive(pid: pid) {
            if Date() >= deadline { return false }
            usleep(5_000)
        }
        return true
    }

    /// Opens (or creates) a session in this sandbox through the library.
    func session(_ name: String) throws -> TimeSession {
        try TimeSession.openOrCreate(named: name, in: sessions)
    }
}
let nanosecondsPerSecond: Int64 = 1_000_000_000

extension Sandbox {
    /// 2016-01-01T12:00:00Z in ns since the epoch: where tests freeze their sessions.
    static let frozenStart: Int64 = 1_451_649_600 * nanosecondsPerSecond

    /// A new sandbox whose session `name` stands frozen at ``frozenStart``.
    static func frozenSession(_ name: String) throws -> (Sandbox, TimeSession) {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let session = try sandbox.session(name)
        try session.freeze(at: .absolute(nanosecondsSinceEpoch: frozenStart))
        return (sandbox, session)
    }
}
extension Sandbox {
    /// The session's pending waits once `condition` holds for them (real-time guard).
    @discardableResult
    func waitForWaits(_ session: TimeSession, guardSeconds: Double = 30,
                      until condition: ([PendingWait]) -> Bool) -> [PendingWait] {
        let deadline = Date().addingTimeInterval(guardSeconds)
        var waits = session.pendingWaits()
        while !condition(waits) && Date() < deadline {
            usleep(5_000)
            waits = session.pendingWaits()
        }
        return waits
    }
}
