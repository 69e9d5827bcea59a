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
        defer { killAttachedProcesses(of: session) }
        let result = try sandbox.timectl(["--session", "tree", "run", "--", "bash", "-c", "(sleep 100 &); sleep 1"])
        let attached = session.attachedProcesses()
        reaper.pids.formUnion(attached.map(\.pid))
        #expect(result.status == 0, "\(result)")
        let sleeper = try #require(attached.first { $0.command == "sleep" }, "attached: \(attached)")
        #expect(result.stderr == "timectl: pid \(sleeper.pid) (sleep 100) is still running attached to the session; it keeps running (end it with 'kill \(sleeper.pid)', or run with --end-leftovers)\n")
    }

    @Test("a process whose exit is under way when the command exits is not reported as left running: killed, or ending by itself", arguments: [
        // What the command killed just before it exited (SIGTERM, which the process does not handle, or SIGKILL).
        "sleep 60 & kill $!; exit 0", "sleep 60 & kill -9 $!; exit 0",
        // A helper that ends when the command's end closes its pipe (here a FIFO), as Erlang's erl_child_setup does after halt().
        "mkfifo fifo; cat fifo >/dev/null & exec 3>fifo; exit 0",
    ])
    func exitingProcessIsNotALeftover(script: String) throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        // The race was lost most of the time: 27 runs in 30 reported the killed sleep.
        for round in 1...20 {
            let result = try sandbox.timectl("--session", "exiting", "run", "--", "sh", "-c", "cd \"$0\" && rm -f fifo && " + script, sandbox.directory)
            #expect(result.status == 0, "round \(round): \(result)")
            #expect(result.stderr.isEmpty, "round \(round): \(result)")
            if !result.stderr.isEmpty { break }
        }
        let session = try sandbox.session("exiting")
        // A process may still be finishing its exit (its /proc entry outlives the end of its environment).
        let left = sandbox.waitForAttached(session) { $0.isEmpty }
        #expect(left.isEmpty, "\(left)")
    }

    @Test("Erlang's helpers, which exit once the VM has halted, are not reported as left running",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/erl"), "needs erl (erlang-base)"))
    func erlangHaltLeavesNothing() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        for round in 1...8 {
            let result = try sandbox.timectl(["--session", "erl", "run", "--", "erl", "-noshell", "-eval", "halt()."], guardSeconds: 120)
            #expect(result.status == 0, "round \(round): \(result)")
            #expect(result.stderr.isEmpty, "round \(round): \(result)")
            if !result.stderr.isEmpty { break }
        }
    }

    @Test("run --at: what the command leaves running ends with the private session, and is not reported as running on")
    func privateSessionLeftoverIsEnded() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let result = try sandbox.timectl("run", "--at", "2016-01-01T12:00:00Z", "--", "sh", "-c", "sleep 100 & echo $!")
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.isEmpty, "\(result)")
        let sleeper = try #require(Int32(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), "\(result)")
        defer { kill(sleeper, SIGKILL) }
        #expect(sandbox.waitUntilGone(sleeper))
        #expect(try sandbox.sessions.sessionNames().isEmpty)
    }

    /// The `.seg` files in the sandbox: a private session left behind is one of them.
    func segments(_ sandbox: Sandbox) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: sandbox.directory)) ?? []).filter { $0.hasSuffix(".seg") }
    }

    @Test("run --at: a stop signal that comes after the command's exit was seen does not stop timectl before it removes the private session")
    func lateSignalLeavesNoSession() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        // As GNU timeout does (SIGTERM to timectl, then to its whole group), made certain: the signal comes while timectl
        // ends what the command left (a helper that ignores SIGTERM and signals timectl, its parent's parent, 0.3 s later).
        for round in 1...3 {
            let result = try sandbox.timectl("run", "--at", "2016-01-01T12:00:00Z", "--", "sh", "-c",
                                             "(trap '' TERM; sleep 0.3; kill -TERM $PPID) & exit 7")
            #expect(result.status == 7, "round \(round): timectl must exit with the command's status, not die of the signal: \(result)")
            #expect(segments(sandbox).isEmpty, "round \(round): \(segments(sandbox))")
        }
    }

    @Test("run --at under GNU timeout: SIGTERM, or SIGKILL, to timectl and its command together leaves no session and no process",
          arguments: ["TERM", "KILL"])
    func timeoutLeavesNoSession(signal: String) throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let escaped = sandbox.directory + "/escaped"
        for round in 1...4 {
            unlink(escaped)
            // A process of the run that left timectl's process group: timeout's signal to the group misses it.
            let result = try runProgram("/usr/bin/timeout", ["-s", signal, "1", Build.timectl, "run", "--at", "2016-01-01T12:00:00Z", "--",
                                                             "sh", "-c", "setsid sleep 30 & echo $! > \(escaped); sleep 5"],
                                        environment: sandbox.environment)
            #expect(result.status == (signal == "TERM" ? 124 : 137), "round \(round): \(result)")
            let deadline = Date().addingTimeInterval(10)  // after a SIGKILL the guardian cleans up on its own
            while !segments(sandbox).isEmpty && Date() < deadline { usleep(10_000) }
            #expect(segments(sandbox).isEmpty, "round \(round): \(segments(sandbox))")
            let pid = try #require(Int32((try? String(contentsOfFile: escaped, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""))
            defer { kill(pid, SIGKILL) }
            #expect(sandbox.waitUntilGone(pid), "round \(round): the escaped sleep \(pid) is still running")
        }
    }

    @Test("--end-leftovers ends what the command leaves running", arguments: [[], ["--auto-advance"]])
    func leftoverIsEnded(options: [String]) throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let session = try sandbox.session("tree")
        defer { killAttachedProcesses(of: session) }
        let result = try sandbox.timectl(["--session", "tree", "run", "--end-leftovers"] + options + ["--", "bash", "-c", "(sleep 100 &); sleep 1"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.isEmpty)
        #expect(session.attachedProcesses().isEmpty)
    }

    @Test("under --auto-advance a leftover is ended by time or reported")
    func autoAdvanceLeftover() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let session = try sandbox.session("tree")
        defer { killAttachedProcesses(of: session) }
        let result = try sandbox.timectl(["--session", "tree", "run", "--auto-advance", "--", "bash", "-c", "(sleep 100 &); sleep 1"])
        #expect(result.status == 0, "\(result)")
        for process in session.attachedProcesses() {
            #expect(result.stderr.contains("pid \(process.pid) (sleep 100) is still running"), "\(result)")
        }
    }
}

/// SPEC §4: programs the shim cannot reach (setuid to another user: the
/// kernel drops LD_PRELOAD for them) are refused wherever they start — as
/// the command, or exec'd by an attached process — with one line naming the
/// program and why; `--allow-uncontrolled` runs them on real time with a
/// warning. Go programs, dynamic or static, and static C programs are
/// controlled (docs/go-and-static.md).
@Suite("Containment: uncontrolled programs are refused wherever they start")
struct UncontrolledProgramTests {
    enum Kind: String, CaseIterable { case goDynamic, goStatic, cStatic }
    static let controlled: [Kind] = [.goDynamic, .goStatic, .cStatic]

    /// The program, after checking that it is linked as its name says (so the test means what it says).
    func program(_ kind: Kind) throws -> String {
        let path: String
        switch kind {
        case .goDynamic: path = try GoFixture.path("go_clock", linking: .dynamic)
        case .goStatic: path = try GoFixture.path("go_clock", linking: .static)
        case .cStatic: path = try CFixture.path("print_time_static", source: "print_time", flags: ["-static"])
        }
        let header = try runProgram("/usr/bin/env", ["readelf", "-lW", path], environment: ProcessInfo.processInfo.environment)
        let dynamic = header.stdout.contains("INTERP")
        try #require(dynamic == (kind == .goDynamic), "\(path) is not linked as expected: \(header.stdout)")
        return path
    }

    static let setuidProblem = "setuid/setgid to another user or group"

    /// print_time, setuid to nobody: a program the kernel would start without LD_PRELOAD. Made by root only.
    func setuidProgram(_ sandbox: Sandbox) throws -> String {
        let source = try CFixture.path("print_time")
        let path = sandbox.directory + "/print_time_setuid"
        try FileManager.default.copyItem(atPath: source, toPath: path)
        try #require(chown(path, 65534, 65534) == 0 && chmod(path, 0o4755) == 0, "errno \(errno)")
        return path
    }

    @Test("refused as the command", .enabled(if: geteuid() == 0, "only root can make a program setuid to another user"))
    func refusedAsCommand() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        try expectRefusedAsCommand(sandbox, try setuidProgram(sandbox), problem: Self.setuidProblem)
    }

    /// `timectl run -- PATH` refuses the program: exit 125, nothing run, one line naming it, why and the opt-out.
    func expectRefusedAsCommand(_ sandbox: Sandbox, _ path: String, problem: String) throws {
        let result = try sandbox.timectl("run", "--", path)
        #expect(result.status == 125, "\(result)")
        #expect(result.stdout.isEmpty, "the program did not run")
        #expect(result.stderr.hasPrefix("timectl: cannot control \(path): \(path) is \(problem)"), "\(result)")
        #expect(result.stderr.contains("--allow-uncontrolled"), "\(result)")
        #expect(result.stderr.split(separator: "\n").count == 1, "\(result)")
    }

    @Test("refused when an attached shell execs it", .enabled(if: geteuid() == 0, "only root can make a program setuid to another user"))
    func refusedFromShell() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let path = try setuidProgram(sandbox)
        let result = try sandbox.timectl("run", "--", "sh", "-c", path)
        #expect(result.status == 126, "\(result)")
        #expect(result.stdout.isEmpty, "the program did not run")
        let lines = result.stderr.split(separator: "\n").map(String.init)
        #expect(lines.count == 2, "\(result)")  // the shim's line, then the shell's "Permission denied"
        #expect(lines.first?.hasPrefix("timectl: sh[") == true)
        #expect(lines.first?.contains("]: refusing to exec \(path): \(Self.setuidProblem)") == true, "\(result)")
        #expect(lines.first?.contains("TIMECTL_ALLOW_UNCONTROLLED=1") == true)
        #expect(lines.last?.contains("Permission denied") == true)
    }

    @Test("Go programs and static C programs run controlled: as the command, from a shell, posix_spawn'd and found through PATH",
          arguments: controlled)
    func controlledWhereverTheyStart(kind: Kind) throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let path = try program(kind)
        let directory = FilePaths.parent(of: path)
        let name = String(path.dropFirst(directory.count + 1))
        #expect(try sandbox.timectl("freeze", "@1451649600").status == 0)
        let commands: [[String]] = [
            [path], ["sh", "-c", path],
            ["python3", "-c", "import os, sys\npid = os.posix_spawn(sys.argv[1], [sys.argv[1]], os.environ)\nos.waitpid(pid, 0)", path],
            ["env", "PATH=\(directory):/usr/bin:/bin", name],
        ]
        for command in commands {
            let result = try sandbox.timectl(["run", "--"] + command)
            #expect(result.status == 0, "\(command): \(result)")
            #expect(result.stdout == "1451649600\n", "\(command): \(result)")
        }
    }

    /// Without cgo's runtime Go sets each thread's FS itself, so the shim's
    /// trap handler would have no libc thread state to run on (it crashed).
    @Test("a Go program linked dynamically without cgo (-buildmode=pie, CGO_ENABLED=0) is refused with the way out")
    func goWithoutCgoIsRefused() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let path = try GoFixture.path("go_clock", linking: .pieWithoutCgo)
        let header = try runProgram("/usr/bin/env", ["readelf", "-lW", path], environment: ProcessInfo.processInfo.environment)
        try #require(header.stdout.contains("INTERP"), "\(path) is not dynamically linked: \(header.stdout)")
        #expect(try sandbox.timectl("freeze", "@1451649600").status == 0)
        try expectRefusedAsCommand(sandbox, path, problem: "a Go program linked dynamically without cgo (-buildmode=pie or -linkmode=external), "
                                   + "whose threads the shim cannot enter; build it with CGO_ENABLED=0")
    }

    @Test("the dynamic loader run as a command is not taken for a static program")
    func dynamicLoaderAsCommand() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let loader = try #require(["/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"].first { FileManager.default.fileExists(atPath: $0) })
        #expect(try sandbox.timectl("freeze", "@1451649600").status == 0)
        let result = try sandbox.timectl("run", "--", "sh", "-c", "\(loader) /bin/date +%s")
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout == "1451649600\n", "\(result)")
    }

    /// `go run` builds a static program and starts it with a raw execve, which
    /// the shim traps in a Go program: it runs through the loader, controlled.
    /// The session runs (rate 1): the go tool's garbage collector can wait for
    /// ever on a frozen clock (docs/go-and-static.md, the bounded exception).
    @Test("go run: the go tool runs controlled, and so does the static program it builds and starts")
    func goRunIsControlled() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        _ = try program(.goStatic)  // the toolchain is there
        let cache = sandbox.directory + "/go-cache"
        let result = try sandbox.timectl(["run", "--at", "@1451649600", "--rate", "1", "--", "sh", "-c",
                                          "GOCACHE=\(cache) GOPATH=\(cache)/path GO111MODULE=off GOPROXY=off CGO_ENABLED=0 go run \"$0\"",
                                          Build.packageRoot + "/Tests/Fixtures/go_clock.go"],
                                         guardSeconds: 300)
        #expect(result.status == 0, "\(result)")
        let printed = try #require(Int(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), "\(result)")
        #expect(printed >= 1_451_649_600 && printed < 1_451_649_600 + 300, "the session's time, not the host's: \(result)")
    }

    @Test("--allow-uncontrolled runs them on real time with a warning", .enabled(if: geteuid() == 0, "only root can make a program setuid to another user"))
    func allowedWithWarning() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let path = try setuidProgram(sandbox)
        let problem = Self.setuidProblem
        #expect(try sandbox.timectl("freeze", "@1451649600").status == 0)
        let direct = try sandbox.timectl("run", "--allow-uncontrolled", "--", path)
        #expect(direct.status == 0, "\(direct)")
        #expect(direct.stderr.hasPrefix("timectl: warning: \(path) runs on real time: \(path) is \(problem)"), "\(direct)")
        let fromShell = try sandbox.timectl("run", "--allow-uncontrolled", "--", "sh", "-c", path)
        #expect(fromShell.status == 0, "\(fromShell)")
        #expect(fromShell.stderr.contains("]: warning: \(path) runs on real time: \(problem)"), "\(fromShell)")
        let viaVariable = try sandbox.timectl(["run", "--", "sh", "-c", path], environment: ["TIMECTL_ALLOW_UNCONTROLLED": "1"])
        #expect(viaVariable.status == 0, "\(viaVariable)")
        for result in [direct, fromShell, viaVariable] {
            // Real time, as warned: not the frozen session's 2016.
            let printed = try #require(Int(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), "\(result)")
            #expect(abs(printed - Int(Date().timeIntervalSince1970)) < 600, "\(result)")
        }
    }
}

/// Programs built with sanitizers run attached with no extra options: the
/// sanitizer runtime is preloaded before the shim (by `run`, and by the shim
/// at every exec), and the runtime's interceptors reach the shim.
@Suite("Containment: sanitizer-instrumented programs run attached")
struct SanitizerProgramTests {
    @Test("a sanitizer build reads the frozen session clock, as the command and from a shell", arguments: [
        ("gcc-asan", "gcc", "-fsanitize=address"), ("gcc-tsan", "gcc", "-fsanitize=thread"),
        ("gcc-ubsan", "gcc", "-fsanitize=undefined"), ("clang-asan", "clang", "-fsanitize=address"),
    ])
    func sanitizedProgramIsControlled(name: String, compiler: String, flag: String) throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let program = try CFixture.path("print_time_\(name)", source: "print_time", compiler: compiler, flags: [flag])
        #expect(try sandbox.timectl("freeze", "@1451649600").status == 0)
        let direct = try sandbox.timectl("run", "--", program)
        #expect(direct.status == 0, "\(direct)")
        #expect(direct.stdout == "1451649600\n", "\(direct)")
        let fromShell = try sandbox.timectl("run", "--", "sh", "-c", program)
        #expect(fromShell.status == 0, "\(fromShell)")
        #expect(fromShell.stdout == "1451649600\n", "\(fromShell)")
        let fromPython = try sandbox.timectl("run", "--", "python3", "-c", "import subprocess, sys; subprocess.run([sys.argv[1]])", program)
        #expect(fromPython.stdout == "1451649600\n", "\(fromPython)")
    }
}
