import Foundation
import Testing
@testable import TimeControlKit

/// libfaketime's users change one path (SPEC §13, issue 35): `LD_PRELOAD=…/libTimeShim.so`
/// with their FAKETIME settings as they were, and `timectl faketime` for the wrapper.
@Suite("libfaketime's environment, honoured by the shim")
struct FaketimeEnvironmentTests {
    /// Runs COMMAND with the shim preloaded and libfaketime's `variables`, as a libfaketime user would.
    static func run(_ sandbox: Sandbox, _ variables: [String: String], _ command: [String],
                    guardSeconds: Double = 60) throws -> ProcessResult {
        try runProgram("/usr/bin/env", command, environment: environment(sandbox, variables), guardSeconds: guardSeconds)
    }

    static func environment(_ sandbox: Sandbox, _ variables: [String: String]) -> [String: String] {
        var environment = sandbox.environment
        for key in environment.keys where key.hasPrefix("FAKE") || key == "DONT_FAKE_MONOTONIC" || key == "NO_FAKE_STAT" {
            environment[key] = nil
        }
        environment["LD_PRELOAD"] = Build.shim
        return environment.merging(variables) { $1 }
    }

    /// The clock files a process tree left in the session directory (none, once it has exited).
    static func leftovers(_ sandbox: Sandbox) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: sandbox.directory)) ?? []).filter { $0.contains("faketime") }
    }

    static let start2016: Int64 = 1_451_649_600

    @Test("FAKETIME='@2016-01-01 12:00:00' date -u +%s prints 1451649600; the absolute form stands still there")
    func startAt() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let running = try Self.run(sandbox, ["FAKETIME": "@2016-01-01 12:00:00"], ["date", "-u", "+%s"])
        #expect(running.status == 0, "\(running)")
        #expect(running.lines == ["1451649600"])
        let frozen = try Self.run(sandbox, ["FAKETIME": "2016-01-01 12:00:00"], ["sh", "-c", "date -u +%s.%N; sleep 0.2; date -u +%s.%N"])
        #expect(frozen.lines == ["1451649600.000000000", "1451649600.000000000"], "\(frozen)")
        #expect(Self.leftovers(sandbox).isEmpty)
    }

    @Test("Go programs: one linked with cgo reads 2016, a static one started through sh -c too")
    func goPrograms() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let setting = ["FAKETIME": "@2016-01-01 12:00:00"]
        let dynamic = try Self.run(sandbox, setting, [try GoFixture.path("go_clock", linking: .dynamic)])
        let staticProgram = try GoFixture.path("go_clock", linking: .static)
        let throughShell = try Self.run(sandbox, setting, ["sh", "-c", staticProgram])
        for result in [dynamic, throughShell] {
            #expect(result.status == 0, "\(result)")
            let seconds = try #require(result.lines.first.flatMap { Int64($0) }, "\(result)")
            #expect(seconds >= Self.start2016 && seconds < Self.start2016 + 60, "\(result)")
        }
        // Started by a process that has no shim (here, env started from the test), a static program cannot be: docs say so.
        var environment = Self.environment(sandbox, setting)
        environment["LD_PRELOAD"] = nil
        let direct = try runProgram(staticProgram, [], environment: environment)
        #expect((Int64(direct.lines.first ?? "") ?? 0) > 1_700_000_000, "a static program no shim started runs on real time: \(direct)")
        #expect(Self.leftovers(sandbox).isEmpty)
    }

    @Test("FAKETIME='+1d x2': a day ahead, at twice the speed of real time (read from /proc/uptime), sleeps included")
    func offsetAndRate() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let before = Int64(Date().timeIntervalSince1970)
        let result = try Self.run(sandbox, ["FAKETIME": "+1d x2"], ["python3", "-c", """
            import time
            def uptime(): return float(open('/proc/uptime').read().split()[0])
            u, t, m = uptime(), time.time(), time.monotonic()
            time.sleep(2)
            print(int(t), (time.time() - t) / (uptime() - u), time.monotonic() - m)
            """])
        let after = Int64(Date().timeIntervalSince1970)
        #expect(result.status == 0, "\(result)")
        let fields = result.stdout.split(whereSeparator: \.isWhitespace)
        try #require(fields.count == 3, "\(result)")
        let started = try #require(Int64(fields[0]))
        // The offset counts from the tree's start; by the first reading it has run at twice the speed for a moment.
        #expect(started >= before + 86_400 && started <= after + 86_400 + 2 * (after - before) + 2, "\(started) vs \(before + 86_400)")
        let ratio = try #require(Double(fields[1]))
        #expect(ratio > 1.8 && ratio < 2.25, "virtual over real time: \(ratio)")
        #expect((Double(fields[2]) ?? 0) >= 2, "the sleep lasted 2 virtual seconds: \(result)")
        #expect(Self.leftovers(sandbox).isEmpty)
    }

    @Test("a timestamp file changed while the process runs moves it (FAKETIME_NO_CACHE=1)")
    func timestampFileMoves() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let file = sandbox.directory + "-faketimerc"
        defer { try? FileManager.default.removeItem(atPath: file) }
        try "@2010-01-01 00:00:00\n".write(toFile: file, atomically: true, encoding: .utf8)
        var environment = Self.environment(sandbox, ["FAKETIME_TIMESTAMP_FILE": file, "FAKETIME_NO_CACHE": "1"])
        environment["PYTHONUNBUFFERED"] = "1"
        let program = try BackgroundProgram(executable: "/usr/bin/python3", ["-c", """
            import time
            seen = None
            for _ in range(4000):
                year = time.gmtime().tm_year
                if year != seen: print(year); seen = year
                if year == 2020: break
                time.sleep(0.01)
            """], environment: environment)
        #expect(program.line(startingWith: "2010") != nil, "\(program.output) \(program.errorOutput)")
        try "# moved by the test\n@2020-01-01 00:00:00\n".write(toFile: file, atomically: true, encoding: .utf8)
        #expect(program.line(startingWith: "2020") != nil, "\(program.output) \(program.errorOutput)")
        #expect(program.exitStatus() == 0)
        #expect(program.lines == ["2010", "2020"])
        #expect(Self.leftovers(sandbox).isEmpty)
    }

    @Test("FAKETIME_XRESET: a new rate from the timestamp file goes on from the current time instead of jumping")
    func smoothRateChange() throws {
        try Build.requireShim()
        for smooth in [false, true] {
            let sandbox = try Sandbox()
            let file = sandbox.directory + "-faketimerc"
            defer { try? FileManager.default.removeItem(atPath: file) }
            try "+0 x1\n".write(toFile: file, atomically: true, encoding: .utf8)
            var variables = ["FAKETIME_TIMESTAMP_FILE": file, "FAKETIME_NO_CACHE": "1"]
            if smooth { variables["FAKETIME_XRESET"] = "1" }
            var environment = Self.environment(sandbox, variables)
            environment["PYTHONUNBUFFERED"] = "1"
            // The program reads the file itself to know when it changed; its next clock reading is then the new setting's.
            let program = try BackgroundProgram(executable: "/usr/bin/python3", ["-c", """
                import sys, time
                start = time.time(); print("ready")
                while "x100" not in open(sys.argv[1]).read(): time.sleep(0.001)
                print("moved", time.time() - start)
                """, file], environment: environment)
            #expect(program.line(startingWith: "ready") != nil, "\(program.errorOutput)")
            usleep(500_000)
            try "+0 x100\n".write(toFile: file, atomically: true, encoding: .utf8)
            let moved = try #require(program.line(startingWith: "moved"), "\(program.output) \(program.errorOutput)")
            let seconds = try #require(Double(moved.split(separator: " ").last ?? ""))
            // Half a second in at rate 1: with XRESET the clock goes on from there; without, it is 100 × that since the start.
            if smooth { #expect(seconds >= 0.4 && seconds < 20, "\(moved)") } else { #expect(seconds > 40, "\(moved)") }
            #expect(program.exitStatus() == 0)
        }
    }

    @Test("FAKETIME='%' starts at FAKETIME_FOLLOW_FILE's mtime")
    func followFile() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let file = sandbox.directory + "-followed"
        defer { try? FileManager.default.removeItem(atPath: file) }
        try "x".write(toFile: file, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 1_262_304_000)], ofItemAtPath: file)
        let result = try Self.run(sandbox, ["FAKETIME": "%", "FAKETIME_FOLLOW_FILE": file], ["date", "-u", "+%s"])
        let seconds = try #require(Int64(result.lines.first ?? ""), "\(result)")
        #expect(seconds >= 1_262_304_000 && seconds < 1_262_304_060, "\(result)")
        let missing = try Self.run(sandbox, ["FAKETIME": "%"], ["date"])
        #expect(missing.status == 120 && missing.stderr.contains("FAKETIME_FOLLOW_FILE"), "\(missing)")
    }

    @Test("an absolute FAKETIME stands still while waits take their length: timed waits time out, timers fire")
    func frozenClockWaits() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let program = try CFixture.path("faketime_timetest", flags: ["-lrt"])
        let result = try Self.run(sandbox, ["FAKETIME": "2016-01-01 12:00:00"], [program])
        #expect(result.status == 0, "\(result)")
        let values = keyedValues(result.stdout)
        // libfaketime's timetest: both condition waits end with ETIMEDOUT on a clock that does not move.
        #expect(values["cond_realtime"] == "ETIMEDOUT 0", "\(result.stdout)")
        #expect(values["cond_monotonic"] == "ETIMEDOUT 0", "\(result.stdout)")
        for name in ["time", "time_null", "ftime", "gettimeofday", "clock_gettime"] {
            #expect(values[name] == "\(Self.start2016)", "\(name): \(result.stdout)")
        }
        #expect(values["overrun_periodic"] == "3", "\(result.stdout)")
        #expect(values["overrun_one_shot"] == "0", "\(result.stdout)")
    }

    @Test("the JVM: Thread.sleep on a running fake clock; on a standing one with FAKETIME_DONT_FAKE_MONOTONIC, as libfaketime asks")
    func javaSleeps() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let classes = try JavaFixtures.classpath()
        for setting in [["FAKETIME": "@2016-01-01 12:00:00"], ["FAKETIME": "2016-01-01 12:00:00", "FAKETIME_DONT_FAKE_MONOTONIC": "1"]] {
            let nap = try Self.run(sandbox, setting, ["java", "-cp", classes, "Nap", "500"], guardSeconds: 120)
            #expect(nap.status == 0, "\(setting): \(nap)")
            #expect((Int64(nap.lines.last ?? "") ?? 0) >= 500_000_000, "System.nanoTime saw the sleep pass: \(setting): \(nap)")
            let now = try Self.run(sandbox, setting, ["java", "-cp", classes, "Now"], guardSeconds: 120)
            #expect(now.lines.last?.hasPrefix("2016-01-01T12:00:00") == true, "\(setting): \(now)")
        }
        #expect(Self.leftovers(sandbox).isEmpty)
    }

    @Test("setting the clock moves the tree's fake clock, never the host's")
    func settingTheClock() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let result = try guardingHostClock {
            try Self.run(sandbox, ["FAKETIME": "-1d"], ["sh", "-c", "date -s @1000000000 >/dev/null && date -u +%s"])
        }
        #expect(result.status == 0, "\(result)")
        let seconds = try #require(Int64(result.lines.last ?? ""), "\(result)")
        #expect(seconds >= 1_000_000_000 && seconds < 1_000_000_060, "the child after date -s: \(result)")
        #expect(Self.leftovers(sandbox).isEmpty)
    }

    @Test("'@' starts again in every process; with FAKETIME_DONT_RESET the tree shares one clock")
    func restartPerProcess() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let script = ["sh", "-c", "date -u +%s; sleep 1.2; date -u +%s"]
        let restarting = try Self.run(sandbox, ["FAKETIME": "@2000-01-01 00:00:00"], script)
        #expect(restarting.lines == ["946684800", "946684800"], "\(restarting)")
        let shared = try Self.run(sandbox, ["FAKETIME": "@2000-01-01 00:00:00", "FAKETIME_DONT_RESET": "1"], script)
        let values = shared.lines.compactMap { Int64($0) }
        try #require(values.count == 2, "\(shared)")
        #expect(values[0] >= 946_684_800 && values[1] >= values[0] + 1, "\(shared)")
        #expect(Self.leftovers(sandbox).isEmpty)
    }

    @Test("a command given other settings inside a tree starts a clock of its own; the same settings join the tree's")
    func nestedSettings() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let result = try Self.run(sandbox, ["FAKETIME": "@2000-01-01 00:00:00 i2"],
                                  ["sh", "-c", "FAKETIME='2016-01-01 12:00:00' date -u +%s; date -u +%s; date -u +%s"])
        let values = result.lines.compactMap { Int64($0) }
        try #require(values.count == 3, "\(result)")
        #expect(values[0] == Self.start2016, "\(result)")
        #expect(values[2] == values[1] + 2 && values[1] < 946_684_800 + 100, "\(result)")
        #expect(Self.leftovers(sandbox).isEmpty)
    }

    @Test("'i2': every reading, in every process of the tree, moves the clock two seconds on")
    func increments() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let result = try Self.run(sandbox, ["FAKETIME": "@2000-01-01 00:00:00 i2"], ["sh", "-c", "date -u +%s; date -u +%s; date -u +%s"])
        let values = result.lines.compactMap { Int64($0) }
        try #require(values.count == 3, "\(result)")
        #expect(values[1] == values[0] + 2 && values[2] == values[1] + 2, "\(result)")
        #expect(values[0] >= 946_684_800 && values[0] < 946_684_800 + 100, "\(result)")
        #expect(Self.leftovers(sandbox).isEmpty)
    }

    @Test("a setuid program a process on FAKETIME starts is refused, as under a session", .enabled(if: geteuid() == 0, "only root can make a program setuid to another user"))
    func setuidRefused() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let path = try UncontrolledProgramTests().setuidProgram(sandbox)
        let result = try Self.run(sandbox, ["FAKETIME": "-1d"], ["sh", "-c", path])
        #expect(result.status == 126 && result.stdout.isEmpty, "\(result)")
        #expect(result.stderr.contains("refusing to exec \(path): \(UncontrolledProgramTests.setuidProblem)"), "\(result)")
        let allowed = try Self.run(sandbox, ["FAKETIME": "-1d", "TIMECTL_ALLOW_UNCONTROLLED": "1"], ["sh", "-c", path])
        #expect(allowed.status == 0 && (Int64(allowed.lines.first ?? "") ?? 0) > 1_700_000_000, "real time, with a warning: \(allowed)")
    }

    @Test("FAKETIME_FMT=%s reads FAKETIME as seconds since the epoch, as libfaketime's walking-one test does")
    func formatSeconds() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let result = try Self.run(sandbox, ["FAKETIME": "1073741824", "FAKETIME_FMT": "%s"], ["date", "+%s"])
        #expect(result.lines == ["1073741824"], "\(result)")
    }

    @Test("start and stop conditions: real time outside them, faked inside")
    func startAndStop() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let reader = try CFixture.path("print_time")
        let afterCalls = try Self.run(sandbox, ["FAKETIME": "@2000-01-01 00:00:00", "FAKETIME_START_AFTER_NUMCALLS": "2"],
                                      ["python3", "-c", "import time; print(int(time.time()))"])
        #expect((Int64(afterCalls.lines.first ?? "") ?? 0) < 1_000_000_000, "faked after its first readings: \(afterCalls)")
        let stopped = try Self.run(sandbox, ["FAKETIME": "@2000-01-01 00:00:00", "FAKETIME_STOP_AFTER_NUMCALLS": "0"], [reader])
        #expect((Int64(stopped.lines.first ?? "") ?? 0) > 1_700_000_000, "real from the first reading: \(stopped)")
        // Seconds count from the tree's start: the first reading (ms after it) is real, one 3 s later faked.
        let later = try Self.run(sandbox, ["FAKETIME": "-10y", "FAKETIME_START_AFTER_SECONDS": "2"],
                                 ["sh", "-c", "\"$0\"; sleep 3; \"$0\"", reader])
        let values = later.lines.compactMap { Int64($0) }
        try #require(values.count == 2, "\(later)")
        #expect(values[0] > 1_700_000_000 && values[1] < values[0] - 9 * 365 * 86_400, "\(later)")
        #expect(Self.leftovers(sandbox).isEmpty)
    }

    @Test("FAKETIME_SKIP_CMDS and FAKETIME_ONLY_CMDS choose programs by name")
    func commandLists() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let setting = "@2000-01-01 00:00:00"
        let skipped = try Self.run(sandbox, ["FAKETIME": setting, "FAKETIME_SKIP_CMDS": "date"], ["sh", "-c", "date -u +%Y; python3 -c 'import time; print(time.gmtime().tm_year)'"])
        #expect(skipped.lines.count == 2 && skipped.lines[0] != "2000" && skipped.lines[1] == "2000", "\(skipped)")
        let only = try Self.run(sandbox, ["FAKETIME": setting, "FAKETIME_ONLY_CMDS": "date"], ["sh", "-c", "date -u +%Y; python3 -c 'import time; print(time.gmtime().tm_year)'"])
        #expect(only.lines.count == 2 && only.lines[0] == "2000" && only.lines[1] != "2000", "\(only)")
        let both = try Self.run(sandbox, ["FAKETIME": setting, "FAKETIME_ONLY_CMDS": "date", "FAKETIME_SKIP_CMDS": "sh"], ["date"])
        #expect(both.status == 120 && both.stderr.contains("FAKETIME_SKIP_CMDS and FAKETIME_ONLY_CMDS"), "\(both)")
    }

    @Test("DONT_FAKE_MONOTONIC leaves the monotonic clocks real while the wall clock stands still")
    func monotonicLeftReal() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        for name in ["FAKETIME_DONT_FAKE_MONOTONIC", "DONT_FAKE_MONOTONIC"] {
            let result = try Self.run(sandbox, ["FAKETIME": "2014-07-21 09:00:00", name: "1"], ["python3", "-c", """
                import time
                m, w = time.monotonic(), time.time()
                time.sleep(0.3)
                print(int(w), int(time.time()), time.monotonic() - m >= 0.3, abs(time.monotonic() - time.clock_gettime(time.CLOCK_BOOTTIME)) < 1e6)
                """])
            #expect(result.lines == ["1405933200 1405933200 True True"], "\(name): \(result)")
        }
    }

    @Test("file times follow the offset (libfaketime's FAKE_STAT); NO_FAKE_STAT leaves them real")
    func fileTimes() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let file = sandbox.directory + "-file"
        defer { try? FileManager.default.removeItem(atPath: file) }
        try "x".write(toFile: file, atomically: true, encoding: .utf8)
        let real = try runProgram("/usr/bin/stat", ["-c", "%Y", file], environment: sandbox.environment)
        let realSeconds = try #require(Int64(real.lines.first ?? ""))
        let shifted = try Self.run(sandbox, ["FAKETIME": "-10d"], ["stat", "-c", "%Y", file])
        #expect(Int64(shifted.lines.first ?? "") == realSeconds - 864_000, "\(shifted) vs \(realSeconds)")
        let plain = try Self.run(sandbox, ["FAKETIME": "-10d", "NO_FAKE_STAT": "1"], ["stat", "-c", "%Y", file])
        #expect(Int64(plain.lines.first ?? "") == realSeconds, "\(plain)")
    }

    @Test("variables timectl does not implement are refused in one line naming them, exit 120", arguments: [
        ("FAKERANDOM_SEED", "0x12345678DEADBEEF"), ("FAKETIME_FAKEPID", "1"), ("FAKETIME_SPAWN_TARGET", "/bin/true"),
        ("FAKETIME_SAVE_FILE", "/tmp/x"), ("FAKETIME_LOAD_FILE", "/tmp/x"), ("FAKETIME_UPDATE_TIMESTAMP_FILE", "1"),
    ])
    func refused(name: String, value: String) throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let result = try Self.run(sandbox, ["FAKETIME": "-1d", name: value], ["date"])
        #expect(result.status == 120, "\(result)")
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.split(separator: "\n").count == 1 && result.stderr.contains(name), "\(result.stderr)")
    }

    @Test("bad FAKETIME values are refused in one line", arguments: ["garbage", "+", "@2020-13-45 99:00:00", "+1d x0", "+1d x-2", "+1d i-1"])
    func badValues(value: String) throws {
        try Build.requireShim()
        let result = try Self.run(try Sandbox(), ["FAKETIME": value], ["date"])
        #expect(result.status == 120, "\(result)")
        #expect(result.stderr.split(separator: "\n").count == 1 && result.stderr.contains("FAKETIME '\(value)'"), "\(result.stderr)")
    }

    @Test("a session wins over FAKETIME; without either variable the shim leaves the process on real time")
    func sessionWins() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        #expect(try sandbox.timectl("freeze", "@1451649600").status == 0)
        let attached = try sandbox.timectl(["run", "--", "date", "+%s"], environment: ["FAKETIME": "@2000-01-01 00:00:00"])
        #expect(attached.lines == ["1451649600"], "\(attached)")
        let before = Int64(Date().timeIntervalSince1970)
        let plain = try Self.run(sandbox, [:], ["date", "+%s"])
        #expect((Int64(plain.lines.first ?? "") ?? 0) >= before, "\(plain)")
    }

    @Test("the session directory follows one rule (the core's), for the library and for the shim's clocks")
    func sessionDirectoryRule() throws {
        #expect(SessionDirectory(environment: { $0 == "TIMECTL_DIR" ? "/x/y" : "/run/user/7" }).path == "/x/y")
        #expect(SessionDirectory(environment: { $0 == "XDG_RUNTIME_DIR" ? "/run/user/7" : nil }).path == "/run/user/7/timectl")
        #expect(SessionDirectory(environment: { $0 == "TIMECTL_DIR" ? "" : nil }).path == "/dev/shm/timectl-\(geteuid())")
        // The shim puts a tree's clock there while the tree runs: here $XDG_RUNTIME_DIR/timectl.
        try Build.requireShim()
        let sandbox = try Sandbox()
        var environment = Self.environment(sandbox, ["FAKETIME": "-1d", "XDG_RUNTIME_DIR": sandbox.directory])
        environment["TIMECTL_DIR"] = nil
        let result = try runProgram("/bin/sh", ["-c", "ls \"$XDG_RUNTIME_DIR/timectl\""], environment: environment)
        #expect(result.lines.count == 1 && result.lines[0].hasPrefix("faketime-") && result.lines[0].hasSuffix(".faketime"), "\(result)")
    }

    // MARK: timectl faketime

    @Test("timectl faketime takes faketime's command line: a date -d timestamp, -f, --exclude-monotonic, -m")
    func wrapper() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let plain = try sandbox.timectl("faketime", "2008-12-24 08:15:42", "date", "-u", "+%s")
        #expect(plain.status == 0, "\(plain)")
        let seconds = try #require(Int64(plain.lines.first ?? ""), "\(plain)")
        #expect(seconds >= 1_230_106_542 && seconds < 1_230_106_542 + 60, "starts there and runs: \(plain)")
        let direct = try sandbox.timectl("faketime", "-f", "2008-12-24 08:15:42", "sh", "-c", "date -u +%s; sleep 0.1; date -u +%s")
        #expect(direct.lines == ["1230106542", "1230106542"], "\(direct)")
        let negative = try sandbox.timectl("faketime", "-m", "-f", "-10d", "date", "+%s")
        let now = Int64(Date().timeIntervalSince1970)
        #expect(abs((Int64(negative.lines.first ?? "") ?? 0) - (now - 864_000)) < 120, "\(negative)")
        let monotonic = try sandbox.timectl("faketime", "--exclude-monotonic", "-f", "2014-07-21 09:00:00", "python3", "-c",
                                            "import time; m = time.monotonic(); time.sleep(0.2); print(int(time.time()), time.monotonic() - m >= 0.2)")
        #expect(monotonic.lines == ["1405933200 True"], "\(monotonic)")
        // libfaketime's timetest under `faketime --exclude-monotonic`: the wall-clock condition wait times out after a second.
        let timetest = try sandbox.timectl("faketime", "--exclude-monotonic", "-f", "2016-01-01 12:00:00",
                                           try CFixture.path("faketime_timetest", flags: ["-lrt"]))
        let values = keyedValues(timetest.stdout)
        for name in ["cond_realtime", "cond_monotonic"] {
            let fields = values[name]?.split(separator: " ") ?? []
            #expect(fields.first == "ETIMEDOUT" && (Int64(fields.last ?? "") ?? 0) >= 1_000_000_000, "\(name): \(timetest)")
        }
        #expect(values["time"] == "1451649600", "\(timetest)")
        #expect(try sandbox.timectl("faketime", "-f", "@2016-01-01 12:00:00", "false").status == 1)
        #expect(Self.leftovers(sandbox).isEmpty)
        #expect(try sandbox.sessions.sessionNames().isEmpty)
    }

    @Test("timectl faketime refuses bad input in one line, exit 64", arguments: [
        (["faketime", "-f", "garbage", "date"], "FAKETIME 'garbage'"),
        (["faketime", "no such date", "date"], "was not recognised by 'date -d'"),
        (["faketime", "-p", "1", "-f", "-1d", "date"], "FAKETIME_FAKEPID"),
        (["faketime", "-f", "-1d"], "expected 'timectl faketime"),
        (["faketime", "--date-prog", "/nonexistent", "today", "date"], "cannot run '/nonexistent -d'"),
    ])
    func wrapperRefusals(arguments: [String], mentions: String) throws {
        let sandbox = try Sandbox()
        let result = try sandbox.timectl(arguments)
        #expect(result.status == 64, "\(result)")
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.split(separator: "\n").count == 1 && result.stderr.contains(mentions), "\(result.stderr)")
    }
}
