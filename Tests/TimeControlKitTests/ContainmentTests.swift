import Foundation
import Testing
@testable import TimeControlKit

/// SPEC §4: nothing is left behind. Stopping `timectl run` ends the tree it
/// started, killing timectl does too (through its guardian), and what a
/// command leaves running when it exits is reported or ended.
@Suite("Containment: no process is left behind", .serialized)
struct LeftoverProcessTests {
    /// Kills whatever the test saw attached, so that a failure leaves nothing running.
    final class Reaper: @unchecked Sendable {
        var pids: Set<Int32> = []
        deinit { for pid in pids { kill(pid, SIGKILL) } }
    }

    /// Runs `timectl ARGUMENTS…` to its end with output to files, through a
    /// plain posix_spawn: Foundation's Process does not see its child exit
    /// while a process it left behind holds a descriptor Foundation gave it.
    func runLeavingProcesses(_ sandbox: Sandbox, _ arguments: [String], guardSeconds: Double = 60) throws -> ProcessResult {
        let scratch = try #require(mkdtemp(strdup(FileManager.default.temporaryDirectory.path + "/timectl-run-XXXXXX")).map { String(cString: $0) })
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, scratch + "/out", O_WRONLY | O_CREAT, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, scratch + "/err", O_WRONLY | O_CREAT, 0o600)
        let argv = ([Build.timectl] + arguments).map { strdup($0) } + [nil]
        let envp = sandbox.environmentEntries.map { strdup($0) } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        try #require(posix_spawn(&pid, Build.timectl, &actions, nil, argv, envp) == 0)
        let finished = hasExited(pid, within: guardSeconds)
        if !finished { kill(pid, SIGKILL) }
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        let read = { (name: String) in (try? String(contentsOfFile: scratch + "/" + name, encoding: .utf8)) ?? "" }
        return ProcessResult(status: Spawn.exitStatus(status), stdout: read("out"), stderr: read("err"), timedOut: !finished)
    }

    /// `timectl run -- sh -c 'sleep 100 & sleep 100 & wait'`, once sh and both sleeps are attached.
    func startTree(_ sandbox: Sandbox, _ session: TimeSession, reaper: Reaper) throws -> Process {
        let process = try sandbox.startAttached(session: "tree", ["sh", "-c", "sleep 100 & sleep 100 & wait"])
        let attached = sandbox.waitForAttached(session) { $0.filter { $0.command == "sleep" }.count == 2 }
        reaper.pids.formUnion(attached.map(\.pid))
        try #require(attached.filter { $0.command == "sleep" }.count == 2, "attached: \(attached)")
        return process
    }

    @Test("a stop signal to timectl run ends the whole tree", arguments: [SIGTERM, SIGINT, SIGHUP])
    func stopSignalEndsTree(signal: Int32) throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let session = try sandbox.session("tree")
        let reaper = Reaper()
        let process = try startTree(sandbox, session, reaper: reaper)
        defer { stop(process) }
        kill(process.processIdentifier, signal)
        #expect(hasExited(process.processIdentifier, within: 30))
        let left = sandbox.waitForAttached(session, guardSeconds: 10) { $0.isEmpty }
        #expect(left.isEmpty, "still attached after signal \(signal): \(left)")
        #expect(try sandbox.timectl("--session", "tree", "status").stdout.contains("processes   none"))
    }

    @Test("when timectl is killed, its guardian kills the tree")
    func killedTimectlLeavesNothing() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let session = try sandbox.session("tree")
        let reaper = Reaper()
        let process = try startTree(sandbox, session, reaper: reaper)
        defer { stop(process) }
        kill(process.processIdentifier, SIGKILL)
        let left = sandbox.waitForAttached(session, guardSeconds: 10) { $0.isEmpty }
        #expect(left.isEmpty, "still attached after SIGKILL of timectl: \(left)")
    }

    @Test("a process left running when the command exits is reported, and keeps running")
    func leftoverIsReported() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let session = try sandbox.session("tree")
        let reaper = Reaper()
        defer { for process in session.attachedProcesses() { kill(process.pid, SIGKILL) } }
        let result = try runLeavingProcesses(sandbox, ["--session", "tree", "run", "--", "bash", "-c", "(sleep 100 &); sleep 1"])
        let attached = session.attachedProcesses()
        reaper.pids.formUnion(attached.map(\.pid))
        #expect(result.status == 0, "\(result)")
        let sleeper = try #require(attached.first { $0.command == "sleep" }, "attached: \(attached)")
        #expect(result.stderr == "timectl: pid \(sleeper.pid) (sleep 100) is still running attached to the session; it keeps running (end it with 'kill \(sleeper.pid)', or run with --end-leftovers)\n")
    }

    @Test("--end-leftovers ends what the command leaves running", arguments: [[], ["--auto-advance"]])
    func leftoverIsEnded(options: [String]) throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let session = try sandbox.session("tree")
        defer { for process in session.attachedProcesses() { kill(process.pid, SIGKILL) } }
        let result = try runLeavingProcesses(sandbox, ["--session", "tree", "run", "--end-leftovers"] + options + ["--", "bash", "-c", "(sleep 100 &); sleep 1"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.isEmpty)
        #expect(session.attachedProcesses().isEmpty)
    }

    @Test("under --auto-advance a leftover is ended by time or reported")
    func autoAdvanceLeftover() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let session = try sandbox.session("tree")
        defer { for process in session.attachedProcesses() { kill(process.pid, SIGKILL) } }
        let result = try runLeavingProcesses(sandbox, ["--session", "tree", "run", "--auto-advance", "--", "bash", "-c", "(sleep 100 &); sleep 1"])
        #expect(result.status == 0, "\(result)")
        for process in session.attachedProcesses() {
            #expect(result.stderr.contains("pid \(process.pid) (sleep 100) is still running"), "\(result)")
        }
    }
}
