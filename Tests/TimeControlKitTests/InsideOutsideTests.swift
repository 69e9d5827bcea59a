import Foundation
import Testing
@testable import TimeControlKit

/// Auto-advance tells the session from the world outside it (SPEC §8):
/// a wait on something outside holds the jumps (time runs at real speed
/// meanwhile), waits between attached processes do not, and a session that
/// can never move again is reported as a deadlock.
@Suite("Auto-advance: inside and outside the session, and deadlocks")
struct InsideOutsideTests {
    static func fixture(_ name: String) -> String { Build.packageRoot + "/Tests/Fixtures/python/" + name }

    /// An HTTP server outside every session, with the port it listens on.
    final class OutsideServer {
        let process: BackgroundProgram
        let port: String

        init(_ argument: String) throws {
            process = try BackgroundProgram(executable: "/usr/bin/env", ["python3", InsideOutsideTests.fixture("slow_server.py"), argument],
                                      environment: ProcessInfo.processInfo.environment)
            port = try #require(process.line(startingWith: "1", "2", "3", "4", "5", "6", "7", "8", "9"), "no port: \(process.errorOutput)")
        }
    }

    /// `timectl run --auto-advance -- COMMAND`, and the real seconds it took.
    static func autoAdvanced(_ sandbox: Sandbox, _ command: [String]) throws -> (ProcessResult, Double) {
        let start = Date()
        let result = try sandbox.runAutoAdvanced(command, guardSeconds: 120)
        return (result, Date().timeIntervalSince(start))
    }

    @Test("a client asking a server outside the session (0.3 s of real work) with a 5 s timeout gets its answer, three runs of three")
    func outsideServerAnswers() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let server = try OutsideServer("0.3")
        for _ in 0..<3 {
            let (result, _) = try Self.autoAdvanced(sandbox, ["python3", Self.fixture("http_client.py"), server.port, "5"])
            #expect(result.status == 0 && result.lines.first?.hasPrefix("got answer after ") == true, "\(result)")
        }
    }

    @Test("against a server outside that accepts and never answers, a 2 s client timeout fires after 2 s of virtual time and as much real time: never at once")
    func outsideSilenceTimesOut() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let server = try OutsideServer("--silent")
        let (result, real) = try Self.autoAdvanced(sandbox, ["python3", Self.fixture("http_client.py"), server.port, "2"])
        let line = result.lines.first ?? ""
        #expect(line.hasPrefix("failed: TimeoutError after 2.0"), "\(result)")
        #expect(real >= 2.0, "the timeout fired after \(real) s of real time")
    }

    @Test("with both ends attached (the server started inside the run), the request is answered and a following sleep 30 is skipped")
    func bothEndsInside() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let script = """
            python3 "$1" 0.3 > port & server=$!
            while [ ! -s port ]; do sleep 0.01; done
            python3 "$2" "$(cat port)" 5
            before=$(date +%s); sleep 30; after=$(date +%s)
            echo "slept $((after - before))"
            kill $server; wait
            """
        let directory = sandbox.directory
        let (result, real) = try Self.autoAdvanced(sandbox, ["sh", "-c", "cd \"\(directory)\" || exit 1\n" + script, "sh",
                                                             Self.fixture("slow_server.py"), Self.fixture("http_client.py")])
        #expect(result.status == 0, "\(result)")
        #expect(result.lines.first?.hasPrefix("got answer after ") == true && result.lines.last == "slept 30", "\(result)")
        #expect(real < 20, "the virtual 30 s took \(real) s of real time: a jump was held")
    }

    @Test("two Python threads taking two locks in opposite orders: run --auto-advance reports the deadlock, names the blocked threads and exits 122")
    func deadlockReported() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let (result, real) = try Self.autoAdvanced(sandbox, ["python3", Self.fixture("two_locks.py")])
        #expect(result.status == 122, "\(result)")
        #expect(result.stderr.contains("deadlock: every thread of the session is blocked inside it"), "\(result)")
        let named = result.stderr.split(separator: "\n").filter { $0.contains(" python3: inside: futex") }
        #expect(named.count == 3, "the main thread and the two lockers: \(result.stderr)")
        #expect(!result.stdout.contains("not deadlocked"), "\(result)")
        #expect(real < 60, "\(real) s")
    }

    @Test("timectl daemon prints a deadlock of the processes it watches once, and goes on advancing the session")
    func daemonReportsDeadlock() throws {
        let (sandbox, session) = try Sandbox.frozenSession("stuck")
        let daemon = try BackgroundProgram(sandbox, timectl: ["--session", "stuck", "daemon"])
        let deadline = Date().addingTimeInterval(30)
        while session.schedulerProcess == nil && Date() < deadline { usleep(10_000) }
        let locked = try BackgroundProgram(sandbox, session: "stuck", ["python3", Self.fixture("two_locks.py")])
        while !daemon.errorOutput.contains("deadlock") && Date() < deadline { usleep(10_000) }
        #expect(daemon.errorOutput.contains("timectl: deadlock: every thread of the session is blocked inside it"), "\(daemon.errorOutput)")
        #expect(daemon.errorOutput.components(separatedBy: "deadlock:").count == 2, "reported once: \(daemon.errorOutput)")
        #expect(daemon.process.isRunning && locked.process.isRunning)
        locked.process.terminate()
        #expect(locked.exitStatus() != nil)
        // Still advancing: a sleep of a new process is stepped over.
        let worker = try sandbox.timectl("--session", "stuck", "run", "--", "sh", "-c", "sleep 30; echo woke")
        #expect(worker.status == 0 && worker.lines == ["woke"], "\(worker)")
        #expect(try sandbox.timectl("--session", "stuck", "daemon", "--stop").status == 0)
        #expect(daemon.exitStatus() == 0)
    }

    @Test("a test's auto-advance keeps a deadlock of the processes it spawned in AutoAdvance.stuck, naming their threads, and goes on")
    func harnessKeepsDeadlock() async throws {
        let (sandbox, session) = try Sandbox.frozenSession("harness-stuck")
        defer { withExtendedLifetime(sandbox) {} }
        let autoAdvance = try session.startAutoAdvance()
        let locked = try session.spawn("/usr/bin/env", ["python3", Self.fixture("two_locks.py")])
        let deadline = Date().addingTimeInterval(30)
        while autoAdvance.stuck == nil && Date() < deadline { try await Task.sleep(for: .milliseconds(10)) }
        guard case .deadlock(let threads)? = autoAdvance.stuck else {
            Issue.record("no deadlock kept: \(String(describing: autoAdvance.stuck)); \(session.status().blocked); \(locked.standardError)")
            return
        }
        #expect(threads.count == 3 && threads.allSatisfy { $0.command == "python3" && $0.side == .inside }, "\(threads)")
        #expect(autoAdvance.isRunning && autoAdvance.failure == nil)
        locked.kill()
        _ = try await locked.waitForExit()
        autoAdvance.stop()
    }

    @Test("a pipe fed from outside the run is an outside wait: 'read x' gets hello, the following sleep 60 is skipped, and no deadlock is reported")
    func pipeFromOutside() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let line = "(sleep 1; echo hello) | \"$0\" run --auto-advance -- sh -c 'read x; sleep 60; echo $x'"
        let result = try runProgram("/bin/sh", ["-c", line, Build.timectl], environment: sandbox.environment, guardSeconds: 60)
        #expect(result.status == 0 && result.lines == ["hello"], "\(result)")
        #expect(!result.stderr.contains("deadlock"), "\(result)")
    }

    @Test("status shows each blocked thread, what it waits on and on which side: a read of a pipe held outside, a shell waiting for its child")
    func statusShowsSides() throws {
        let (sandbox, _) = try Sandbox.frozenSession("sides")
        let feeder = Pipe()
        let run = Process()
        run.executableURL = URL(fileURLWithPath: Build.timectl)
        run.arguments = ["--session", "sides", "run", "--", "sh", "-c", "cat > /dev/null; echo done"]
        run.environment = sandbox.environment
        run.standardInput = feeder
        try launch(run)
        defer {
            try? feeder.fileHandleForWriting.close()
            stop(run)
        }
        var blocked: [BlockedThread] = []
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            blocked = try decodeStatus(try sandbox.timectl("--session", "sides", "status", "--json")).blocked
            if blocked.contains(where: { $0.command == "cat" }) && blocked.contains(where: { $0.command == "sh" }) { break }
            usleep(20_000)
        }
        let cat = try #require(blocked.first { $0.command == "cat" }, "\(blocked)")
        #expect(cat.side == .outside && cat.waitsOn.hasPrefix("read on pipe:[") && cat.waitsOn.contains("not attached"), "\(cat)")
        let shell = try #require(blocked.first { $0.command == "sh" }, "\(blocked)")
        #expect(shell.side == .inside && shell.waitsOn.hasPrefix("wait4"), "\(shell)")
        let text = try sandbox.timectl("--session", "sides", "status")
        #expect(text.stdout.contains("cat: outside: read on pipe:["), "\(text)")
    }
}
