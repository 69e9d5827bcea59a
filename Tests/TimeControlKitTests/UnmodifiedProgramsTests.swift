import Foundation
import Testing
@testable import TimeControlKit

/// Real, unmodified programs attached with `timectl run` follow the session.
@Suite("Unmodified programs follow the session")
struct UnmodifiedProgramsTests {
    static let y2016 = "2016-01-01T12:00:00Z"
    static let y2016Seconds: Int64 = 1_451_649_600

    @Test("date: frozen, still frozen 2 real seconds later, ticked, set +1d")
    func dateFollowsFreezeTickAndSet() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        #expect(try sandbox.timectl("freeze", Self.y2016).status == 0)
        #expect(try sandbox.timectl("run", "--", "date", "-u", "+%s").stdout == "1451649600\n")
        sleep(2)
        #expect(try sandbox.timectl("run", "--", "date", "-u", "+%s").stdout == "1451649600\n")
        #expect(try sandbox.timectl("tick", "3").status == 0)
        #expect(try sandbox.timectl("run", "--", "date", "-u", "+%s").stdout == "1451649603\n")

        let monotonic = ["python3", "-c", "import time; print(time.monotonic_ns())"]
        let monotonicBefore = try sandbox.runAttached(session: "default", monotonic).stdout
        #expect(try sandbox.timectl("set", "+1d").status == 0)
        #expect(try sandbox.timectl("run", "--", "date", "-u", "+%s").stdout == "\(1_451_649_603 + 86_400)\n")
        #expect(try sandbox.runAttached(session: "default", monotonic).stdout == monotonicBefore,
                "set moves the wall clock only")
    }

    @Test("python3: time.time, time.monotonic and datetime.now")
    func pythonFollowsTheSession() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let session = try sandbox.session("py")
        try session.freeze(at: .absolute(nanosecondsSinceEpoch: Self.y2016Seconds * nanosecondsPerSecond))
        let script = ["python3", "-c", """
            import time, datetime
            print("time", time.time_ns())
            print("monotonic", time.monotonic_ns())
            print("datetime", datetime.datetime.now(datetime.timezone.utc).isoformat())
            """]
        let first = keyedValues(try sandbox.runAttached(session: "py", script).stdout)
        #expect(first["time"] == "1451649600000000000")
        #expect(first["datetime"] == "2016-01-01T12:00:00+00:00")
        #expect(first["monotonic"] == String(session.monotonicNanoseconds))

        try session.advance(by: .seconds(5))
        let second = keyedValues(try sandbox.runAttached(session: "py", script).stdout)
        #expect(second["time"] == "1451649605000000000")
        #expect(second["datetime"] == "2016-01-01T12:00:05+00:00")
        let moved = try #require(Int64(second["monotonic"] ?? "")) - (try #require(Int64(first["monotonic"] ?? "")))
        #expect(moved == 5 * nanosecondsPerSecond)
    }

    @Test("a C probe reading every clock id and every libc clock entry point")
    func everyClockEntryPoint() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let session = try sandbox.session("c")
        let wall = Self.y2016Seconds * nanosecondsPerSecond + 123_456_789
        try session.freeze(at: .absolute(nanosecondsSinceEpoch: wall))
        let probe = try CFixture.path("clock_probe")
        let values = keyedValues(try sandbox.runAttached(session: "c", [probe]).stdout)
        let monotonic = String(session.monotonicNanoseconds)
        let status = session.status()

        for name in ["CLOCK_REALTIME", "CLOCK_REALTIME_COARSE", "CLOCK_REALTIME_ALARM", "timespec_get",
                     "syscall_clock_gettime_realtime", "__clock_gettime"] {
            #expect(values[name] == String(wall), "\(name)")
        }
        for name in ["gettimeofday", "syscall_gettimeofday", "ntp_gettime"] {
            #expect(values[name] == String(wall / 1000 * 1000), "\(name) has microseconds")
        }
        #expect(values["ftime"] == String(wall / 1_000_000 * 1_000_000))
        #expect(values["time"] == String(Self.y2016Seconds * nanosecondsPerSecond))
        #expect(values["syscall_time"] == values["time"])
        for name in ["CLOCK_MONOTONIC", "CLOCK_MONOTONIC_COARSE", "syscall_clock_gettime_monotonic"] {
            #expect(values[name] == monotonic, "\(name)")
        }
        #expect(status.frozen)
        // TAI sits a whole number of seconds from the wall clock, as on the real system.
        let tai = try #require(Int64(values["CLOCK_TAI"] ?? ""))
        #expect((tai - wall) % nanosecondsPerSecond == 0)
        // BOOTTIME and MONOTONIC_RAW are frozen too: unchanged after real time passes.
        usleep(100_000)
        let again = keyedValues(try sandbox.runAttached(session: "c", [probe]).stdout)
        for name in ["CLOCK_BOOTTIME", "CLOCK_BOOTTIME_ALARM", "CLOCK_MONOTONIC_RAW", "CLOCK_TAI"] {
            #expect(again[name] == values[name], "\(name)")
        }
        // CPU-time clocks are real and pass through; an invalid clock fails as libc's does.
        for name in ["CLOCK_PROCESS_CPUTIME_ID", "CLOCK_THREAD_CPUTIME_ID", "pid_cpu_clock"] {
            let value = try #require(Int64(values[name] ?? ""), "\(name)")
            #expect(value > 0 && value < 60 * nanosecondsPerSecond, "\(name)")
        }
        #expect(values["invalid_clock_99"] == "error:\(EINVAL)")
        #expect(values["errno_after_reads"] == "12345", "successful reads leave errno alone")
    }

    @Test("a compiled Swift program: Date() and ContinuousClock.now")
    func swiftProgramFollowsTheSession() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let session = try sandbox.session("swift")
        try session.freeze(at: .absolute(nanosecondsSinceEpoch: Self.y2016Seconds * nanosecondsPerSecond))
        let first = keyedValues(try sandbox.runAttached(session: "swift", [Build.swiftProbe, "clocks"]).stdout)
        #expect(first["date"] == "1451649600000000000")
        try session.advance(by: .seconds(7))
        let second = keyedValues(try sandbox.runAttached(session: "swift", [Build.swiftProbe, "clocks"]).stdout)
        #expect(second["date"] == "1451649607000000000")
        let continuous = try #require(Int64(second["continuous"] ?? "")) - (try #require(Int64(first["continuous"] ?? "")))
        #expect(continuous == 7 * nanosecondsPerSecond)
    }

    @Test("a process that is not attached reads the real clock")
    func unattachedProcessesGetRealTime() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        var environment = sandbox.environment
        environment["LD_PRELOAD"] = Build.shim
        let before = Int64(Date().timeIntervalSince1970)
        let result = try runProgram("/bin/date", ["+%s"], environment: environment)
        let after = Int64(Date().timeIntervalSince1970.rounded(.up))
        let printed = try #require(Int64(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(printed >= before && printed <= after, "the real time, read between \(before) and \(after)")
    }

    @Test("run returns the child's exit status, and 128+N for signal N")
    func exitStatus() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        #expect(try sandbox.timectl("run", "--", "sh", "-c", "exit 7").status == 7)
        #expect(try sandbox.timectl("run", "--", "sh", "-c", "kill -TERM $$").status == 128 + SIGTERM)
        let missing = try sandbox.timectl("run", "--", "no-such-command-anywhere")
        #expect(missing.status == 127)
        #expect(missing.stderr == "timectl: command not found: no-such-command-anywhere\n")
    }

    @Test("run passes signals sent to timectl on to the child")
    func signalsAreForwarded() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let session = try sandbox.session("signals")
        let process = try sandbox.startAttached(session: "signals", ["sh", "-c", "trap 'exit 42' USR1; while :; do sleep 0.05; done"])
        // Wait until the shell is attached (it registers itself in the session), then give it time to set its trap.
        #expect(sandbox.waitForAttached(session) { $0.contains { $0.command == "sh" } }.contains { $0.command == "sh" })
        usleep(200_000)
        kill(process.processIdentifier, SIGUSR1)
        let deadline = Date().addingTimeInterval(30)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning {
            stop(process)
            Issue.record("timectl did not exit after its child got SIGUSR1")
            return
        }
        #expect(process.terminationStatus == 42)
    }

    @Test("run keeps an existing LD_PRELOAD after the shim")
    func existingPreloadIsKept() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let other = CFixture.directory + "/libempty.so"
        let source = CFixture.directory + "/empty.c"
        try "int timectl_test_empty;\n".write(toFile: source, atomically: true, encoding: .utf8)
        #expect(try runProgram("/usr/bin/env", ["cc", "-shared", "-fPIC", "-o", other, source], environment: sandbox.environment).status == 0)
        let result = try sandbox.timectl(["run", "--", "sh", "-c", "echo $LD_PRELOAD"], environment: ["LD_PRELOAD": other])
        #expect(result.stdout == "\(Build.shim):\(other)\n")
    }

    @Test("run refuses a program it cannot control (setuid to another user) before starting it",
          .enabled(if: geteuid() == 0, "only root can make a program setuid to another user"))
    func uncontrollableProgramsAreRefused() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let binary = sandbox.directory + "/setuid_date"
        try FileManager.default.copyItem(atPath: try CFixture.path("print_time"), toPath: binary)
        try #require(chown(binary, 65534, 65534) == 0 && chmod(binary, 0o4755) == 0, "errno \(errno)")
        let result = try sandbox.timectl("run", "--", binary)
        #expect(result.status == 125)
        #expect(result.stdout.isEmpty, "the program did not run")
        #expect(result.stderr.contains("setuid"))
        #expect(result.stderr.split(separator: "\n").count == 1)

        // Refused before anything changes: no session made, none frozen by --auto-advance.
        #expect(try sandbox.sessions.sessionNames().isEmpty)
        let session = try sandbox.session("kept")
        let autoAdvanced = try sandbox.timectl("--session", "kept", "run", "--auto-advance", "--", binary)
        #expect(autoAdvanced.status == 125)
        #expect(autoAdvanced.stdout.isEmpty)
        #expect(!session.status().frozen)
        #expect(session.status().verbsApplied == 0)
        #expect(session.schedulerProcess == nil)
        #expect(try sandbox.timectl("--session", "unmade", "run", "--", "no-such-command-here").status == 127)
        #expect(try sandbox.sessions.sessionNames() == ["kept"])
    }
}
