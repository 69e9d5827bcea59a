import Foundation
import Testing
@testable import TimeControlKit

/// A controlled program that sets the clock moves its session's wall clock,
/// exactly as `timectl set` does, and never the host's (SPEC §2). Every test
/// runs inside `guardingHostClock`: as root (CI), a regression would
/// otherwise move the test machine's clock.
@Suite("Setting the clock moves the session, never the host")
struct ClockSettingTests {
    static let frozenAt = "@1500000000"
    static let target = "2000000000.25"

    /// Freezes a fresh session at `frozenAt`, so that relative steps land exactly.
    func frozenSession(_ sandbox: Sandbox, _ name: String) throws {
        let frozen = try sandbox.timectl("--session", name, "freeze", Self.frozenAt)
        try #require(frozen.status == 0, "\(frozen)")
    }

    func wallClock(_ sandbox: Sandbox, _ session: String) throws -> String {
        try sandbox.runAttached(session: session, ["date", "-u", "+%s.%N"]).stdout
    }

    @Test("each entry point sets the session's wall clock; date in the session shows it; monotonic clocks stay",
          arguments: ["clock_settime", "settimeofday", "stime", "adjtimex", "ntp_adjtime", "clock_adjtime", "adjtime",
                      "syscall_clock_settime", "syscall_settimeofday", "syscall_adjtimex", "syscall_clock_adjtime"])
    func entryPointSetsTheSession(method: String) throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let setClock = try CFixture.path("set_clock")
        try frozenSession(sandbox, "s")
        try guardingHostClock { () throws in
            let set = try sandbox.runAttached(session: "s", [setClock, method, Self.target])
            let values = keyedValues(set.stdout)
            #expect(set.lines.contains("ok"), "\(method): \(set)")
            let monotonic = try #require(values["monotonic"]).split(separator: " ")
            #expect(monotonic.count == 2 && monotonic[0] == monotonic[1], "\(method) moved the monotonic clock: \(set.stdout)")
            if method == "adjtime" { #expect(values["outstanding"] == "0.000000", "no slew is left outstanding") }
            // stime sets whole seconds.
            let expected = method == "stime" ? "2000000000.000000000\n" : "2000000000.250000000\n"
            #expect(try wallClock(sandbox, "s") == expected, "\(method)")
        }
    }

    @Test("a slew (adjtimex ADJ_OFFSET) is one immediate step of the session, clamped to ±0.5 s as the kernel clamps it")
    func slewIsAnImmediateStep() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let setClock = try CFixture.path("set_clock")
        try frozenSession(sandbox, "s")
        try guardingHostClock { () throws in
            #expect(try sandbox.runAttached(session: "s", [setClock, "slew", "1500000000.25"]).lines.first == "ok")
            #expect(try wallClock(sandbox, "s") == "1500000000.250000000\n")
            #expect(try sandbox.runAttached(session: "s", [setClock, "slew", "1500000009"]).lines.first == "ok")
            #expect(try wallClock(sandbox, "s") == "1500000000.750000000\n")
        }
    }

    @Test("date -s under timectl run sets the session's wall clock")
    func dateDashS() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        try frozenSession(sandbox, "s")
        try guardingHostClock { () throws in
            let set = try sandbox.runAttached(session: "s", ["date", "-u", "-s", "@2000000000", "+%s"])
            #expect(set.stdout == "2000000000\n", "\(set)")
            #expect(try sandbox.runAttached(session: "s", ["date", "+%s"]).stdout == "2000000000\n")
            let status = try sandbox.timectl("--session", "s", "status", "--json")
            #expect(status.stdout.contains("\"frozen\" : true"), "setting the clock leaves a frozen session frozen: \(status.stdout)")
        }
    }

    @Test("a running session keeps running from the instant set, in every process")
    func runningSessionRunsOnFromTheSetInstant() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let setClock = try CFixture.path("set_clock")
        try guardingHostClock { () throws in
            let script = "\(setClock) clock_settime 2000000000 >/dev/null && date +%s"
            let set = try sandbox.runAttached(session: "r", ["sh", "-c", script])
            let seconds = try #require(Int64(set.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
            #expect(seconds >= 2_000_000_000 && seconds < 2_000_000_060, "\(set)")
            let later = try #require(Int64(try sandbox.runAttached(session: "r", ["date", "+%s"]).stdout
                .trimmingCharacters(in: .whitespacesAndNewlines)))
            #expect(later >= seconds && later < 2_000_000_060)
        }
    }

    @Test("a process already running sees the clock another one set; its monotonic clock does not jump")
    func everyProcessSeesTheSet() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let setClock = try CFixture.path("set_clock")
        try frozenSession(sandbox, "s")
        let session = try sandbox.session("s")
        try guardingHostClock { () throws in
            let sleeper = try BackgroundProgram(sandbox, session: "s", ["python3", "-c", """
                import time
                m = time.monotonic_ns(); time.sleep(5); print(int(time.time()), time.monotonic_ns() - m)
                """])
            #expect(!sandbox.waitForWaits(session) { !$0.isEmpty }.isEmpty, "the sleeper waits")
            #expect(try sandbox.runAttached(session: "s", [setClock, "clock_settime", "2000000000"]).lines.first == "ok")
            #expect(try sandbox.timectl("--session", "s", "tick", "5").status == 0)
            #expect(sleeper.exitStatus() == 0)
            #expect(sleeper.output == "2000000005 5000000000\n", "\(sleeper.output) \(sleeper.errorOutput)")
        }
    }

    @Test("a process whose session was removed sets the timeline it still has, not the host's clock")
    func removedSession() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        try frozenSession(sandbox, "s")
        try guardingHostClock { () throws in
            let script = """
                import subprocess, time
                subprocess.run(["\(Build.timectl)", "session", "remove", "--force", "s"], check=True)
                time.clock_settime(time.CLOCK_REALTIME, 2000000000.25)
                print(time.time_ns())
                """
            let run = try sandbox.runAttached(session: "s", ["python3", "-c", script])
            let value = try #require(Int64(run.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), "\(run)")
            #expect(value >= 2_000_000_000_250_000_000 - 1_000 && value < 2_000_000_060 * nanosecondsPerSecond, "\(run)")
            #expect(try sandbox.session("s").date.timeIntervalSince1970 < 1_900_000_000, "a new session of that name is at real time")
        }
    }

    @Test("refusals: monotonic clocks EINVAL, the kernel's NTP state and time zone EPERM; the session stays put")
    func refusals() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let setClock = try CFixture.path("set_clock")
        try frozenSession(sandbox, "s")
        try guardingHostClock { () throws in
            for (method, answer) in [("monotonic", "error EINVAL"), ("frequency", "error EPERM"), ("nano", "error EPERM"),
                                     ("timezone", "error EPERM")] {
                let refused = try sandbox.runAttached(session: "s", [setClock, method, Self.target])
                #expect(refused.lines.first == answer, "\(method): \(refused)")
            }
            #expect(try wallClock(sandbox, "s") == "1500000000.000000000\n")
        }
    }

    @Test("read-only adjtimex works and reports the session's time")
    func readOnlyAdjtimex() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let setClock = try CFixture.path("set_clock")
        try frozenSession(sandbox, "s")
        try guardingHostClock { () throws in
            let read = try sandbox.runAttached(session: "s", [setClock, "read", "0"])
            let fields = try #require(keyedValues(read.stdout)["read"]).split(separator: " ")
            #expect(fields.count == 2 && Int(fields[0]).map { (0...5).contains($0) } == true, "a clock state: \(read)")
            #expect(fields.last == "1500000000")
        }
    }

    @Test("an unprivileged user sets its own session's clock", .enabled(if: OtherUser.unavailable == nil, "needs root to act as another user (CI runs as root)"))
    func unprivilegedUser() throws {
        try Build.requireShim()
        let nobody = try OtherUser()
        let setClock = try nobody.copy(try CFixture.path("set_clock"))
        var environment = try Sandbox().environment
        environment["TIMECTL_DIR"] = try nobody.ownDirectory("sessions")
        func asNobody(_ arguments: [String]) throws -> ProcessResult {
            try nobody.run(nobody.timectl, arguments, environment: environment)
        }
        try guardingHostClock { () throws in
            #expect(try asNobody(["--session", "n", "freeze", Self.frozenAt]).status == 0)
            let set = try asNobody(["--session", "n", "run", "--", setClock, "clock_settime", Self.target])
            #expect(set.lines.first == "ok", "\(set)")
            #expect(try asNobody(["--session", "n", "run", "--", "date", "+%s.%N"]).stdout == "2000000000.250000000\n")
        }
    }

    @Test("a recording records the setting; trace show and stats list it; replay runs it without divergence")
    func recordedAndReplayed() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let setClock = try CFixture.path("set_clock")
        let trace = sandbox.directory + "/set.trace"
        try guardingHostClock { () throws in
            let recorded = try sandbox.timectl("record", "--trace", trace, "--", setClock, "clock_settime", Self.target)
            #expect(recorded.status == 0 && recorded.lines.first == "ok", "\(recorded)")
            let events = try Trace(contentsOf: trace).processes.flatMap { $0.threads.flatMap(\.events) }
            #expect(events.contains(.wallClockSet(call: .clockSettime, nanoseconds: 2_000_000_000_250_000_000)), "\(events)")
            let show = try sandbox.timectl("trace", "show", trace)
            #expect(show.stdout.contains("clock_settime(CLOCK_REALTIME) set the wall clock to 2033-05-18T03:33:20.25"), "\(show)")
            let json = try sandbox.timectl("trace", "show", "--json", trace)
            #expect(json.stdout.contains("\"set-wall-clock\""), "\(json)")
            #expect(try sandbox.timectl("trace", "stats", trace).stdout.contains("clock sets  1\n"))
            let replayed = try sandbox.timectl("replay", trace)
            #expect(replayed.status == 0 && replayed.lines.first == "ok", "\(replayed)")
            #expect(!replayed.stderr.contains("diverge"), "\(replayed)")

            // The time a read-only adjtimex returns is a reading like any other.
            let readTrace = sandbox.directory + "/read.trace"
            let read = try sandbox.timectl("record", "--trace", readTrace, "--", setClock, "read", "0")
            let readSeconds = try #require(keyedValues(read.stdout)["read"]?.split(separator: " ").last.flatMap { Int64($0) }, "\(read)")
            let readings = try Trace(contentsOf: readTrace).processes.flatMap { $0.threads.flatMap(\.events) }
            #expect(readings.contains { event in
                if case .reading(.adjtimex, 0, let value) = event { return value / nanosecondsPerSecond == readSeconds }
                return false
            }, "\(readings)")
        }
    }

    // Programs that make the system calls themselves — a static C program's libc, Go's syscall package — have
    // them trapped (docs/go-and-static.md) and answered by the same rules. A year ahead of the frozen session.
    static let yearAhead = "1531536000.25"

    func staticSetClock() throws -> String {
        let path = try CFixture.path("set_clock_static", source: "set_clock", flags: ["-static", "-DSET_CLOCK_STATIC"])
        let header = try runProgram("/usr/bin/env", ["readelf", "-lW", path], environment: ProcessInfo.processInfo.environment)
        try #require(!header.stdout.contains("INTERP"), "\(path) is not static: \(header.stdout)")
        return path
    }

    @Test("a static C program's raw system calls set the session's wall clock, never the host's", arguments: [
        ("clock_settime", yearAhead), ("settimeofday", yearAhead), ("adjtimex", yearAhead), ("ntp_adjtime", yearAhead),
        ("clock_adjtime", yearAhead), ("syscall_clock_settime", yearAhead), ("syscall_settimeofday", yearAhead),
        ("syscall_adjtimex", yearAhead), ("syscall_clock_adjtime", yearAhead),
        // glibc's own adjtime refuses a delta over 2145 s before any system call.
        ("adjtime", "1500000100.25"),
    ])
    func staticProgramSetsTheSession(method: String, target: String) throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let setClock = try staticSetClock()
        try frozenSession(sandbox, "s")
        try guardingHostClock { () throws in
            let set = try sandbox.runAttached(session: "s", [setClock, method, target])
            #expect(set.lines.contains("ok"), "\(method): \(set)")
            let monotonic = try #require(keyedValues(set.stdout)["monotonic"]).split(separator: " ")
            #expect(monotonic.count == 2 && monotonic[0] == monotonic[1], "\(method) moved the monotonic clock: \(set.stdout)")
            if method == "adjtime" { #expect(keyedValues(set.stdout)["outstanding"] == "0.000000", "no slew is left outstanding") }
            #expect(try wallClock(sandbox, "s") == target + "0000000\n", "\(method)")
        }
    }

    @Test("a static C program: monotonic clocks EINVAL, NTP state and time zone EPERM, read-only adjtimex reads the session")
    func staticProgramRefusalsAndRead() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let setClock = try staticSetClock()
        try frozenSession(sandbox, "s")
        try guardingHostClock { () throws in
            for (method, answer) in [("monotonic", "error EINVAL"), ("frequency", "error EPERM"), ("nano", "error EPERM"),
                                     ("timezone", "error EPERM")] {
                let refused = try sandbox.runAttached(session: "s", [setClock, method, Self.yearAhead])
                #expect(refused.lines.first == answer, "\(method): \(refused)")
            }
            let read = try sandbox.runAttached(session: "s", [setClock, "read", "0"])
            #expect(keyedValues(read.stdout)["read"]?.split(separator: " ").last == "1500000000", "\(read)")
            #expect(try wallClock(sandbox, "s") == "1500000000.000000000\n")
        }
    }

    @Test("a Go program's raw system calls (syscall.Settimeofday, clock_settime, adjtimex, clock_adjtime) set the session, never the host",
          arguments: [GoFixture.Linking.dynamic, .static])
    func goProgramSetsTheSession(linking: GoFixture.Linking) throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let setClock = try GoFixture.path("go_set_clock", linking: linking)
        try guardingHostClock { () throws in
            for method in ["settimeofday", "clock_settime", "adjtimex", "clock_adjtime"] {
                try frozenSession(sandbox, "s")
                let set = try sandbox.runAttached(session: "s", [setClock, method, Self.yearAhead])
                #expect(set.lines.first == "ok", "\(method): \(set)")
                #expect(keyedValues(set.stdout)["now"] == "1531536000250000000", "time.Now() after \(method): \(set)")
                #expect(try wallClock(sandbox, "s") == "1531536000.250000000\n", "\(method)")
            }
            try frozenSession(sandbox, "s")
            let read = try sandbox.runAttached(session: "s", [setClock, "read", "0"])
            #expect(keyedValues(read.stdout)["read"]?.split(separator: " ").last == "1500000000", "\(read)")
            let nano = try sandbox.runAttached(session: "s", [setClock, "nano", "0"])
            #expect(nano.lines.first == "error EPERM", "the kernel's NTP state is not the program's to change: \(nano)")
            #expect(try wallClock(sandbox, "s") == "1500000000.000000000\n")
        }
    }

    @Test("CPython's test_time passes with the clock a year ahead (its test_clock_settime sets CLOCK_REALTIME)")
    func cpythonTestTime() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        // The Debian python3 needs libpython3.X-testsuite for its test package (.ci/run installs it).
        let python = try #require(["python3", "/usr/bin/python3"].first { candidate in
            (try? runProgram("/usr/bin/env", [candidate, "-c", "import test.test_time"], environment: sandbox.environment).status) == 0
        }, "no python3 here has test.test_time: install libpython3.X-testsuite")
        #expect(try sandbox.timectl("--session", "y", "set", "+365d").status == 0)
        try guardingHostClock { () throws in
            let run = try sandbox.runAttached(session: "y", [python, "-m", "test", "test_time"], guardSeconds: 300)
            #expect(run.stdout.contains("Tests result: SUCCESS"), "\(run)")
        }
    }
}
