import Foundation
import Testing
@testable import TimeControlKit

/// Go programs on the session's timeline (issue 14, docs/go-and-static.md):
/// Go's runtime reads the clock through the vDSO and waits with raw futex,
/// epoll_pwait and nanosleep calls, never through libc.
///
/// A dynamically linked build (cgo) runs with the session's attachment
/// environment (`TimeSession.attachmentEnvironment()`) and loads the shim
/// itself; a static one (`CGO_ENABLED=0`) cannot, and runs under
/// `timectl run`, which starts it through timectl-static-loader.
@Suite("Go programs", .serialized)
struct GoProgramTests {
    static let linkings: [GoFixture.Linking] = [.dynamic, .static]

    /// Runs the probe attached to session `name` and waits for it.
    func runProbe(_ sandbox: Sandbox, _ name: String, _ linking: GoFixture.Linking, _ arguments: [String],
                  environment: [String: String], guardSeconds: Double = 60) throws -> ProcessResult {
        let probe = try GoFixture.path("GoProbe", linking: linking)
        if linking == .dynamic { return try runProgram(probe, arguments, environment: environment, guardSeconds: guardSeconds) }
        return try sandbox.timectl(["--session", name, "run", "--", probe] + arguments, guardSeconds: guardSeconds)
    }

    /// Starts the probe attached to session `name` in the background.
    func startProbe(_ sandbox: Sandbox, _ name: String, _ linking: GoFixture.Linking, _ arguments: [String],
                    environment: [String: String]) throws -> BackgroundProgram {
        let probe = try GoFixture.path("GoProbe", linking: linking)
        if linking == .dynamic { return try BackgroundProgram(executable: probe, arguments, environment: environment) }
        return try BackgroundProgram(sandbox, session: name, [probe] + arguments)
    }

    static let start: Int64 = 1_451_649_600
    static let second: Int64 = 1_000_000_000
    static let millisecond: Int64 = 1_000_000

    func frozenSession(_ name: String) throws -> (Sandbox, TimeSession, [String: String]) {
        let (sandbox, session) = try Sandbox.frozenSession(name)  // at Self.start
        let environment = sandbox.environment.merging(try session.attachmentEnvironment()) { $1 }
        return (sandbox, session, environment)
    }

    @Test("time.Now() in a Go program reads the frozen session", arguments: linkings)
    func now(linking: GoFixture.Linking) throws {
        let (sandbox, _, environment) = try frozenSession("go-now")
        defer { withExtendedLifetime(sandbox) {} }
        let result = try runProbe(sandbox, "go-now", linking, ["now"], environment: environment)
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout == "\(Self.start)\n", "\(result)")
    }

    @Test("time.Sleep(3s) waits for the session: still asleep 1.5 s later, woken by tick 3, time.Since says 3 s, the wall clock then reads +3 s",
          arguments: linkings)
    func sleepUntilTick(linking: GoFixture.Linking) throws {
        let (sandbox, session, environment) = try frozenSession("go-sleep")
        let run = try startProbe(sandbox, "go-sleep", linking, ["sleep", "3s"], environment: environment)
        #expect(run.line(startingWith: "start ") == "start \(Self.start)", "\(run.errorOutput)")
        // The program's own process (under timectl run, the static build is timectl's child): named after it.
        let command = String("GoProbe-\(linking.rawValue)".prefix(15))
        let waits = sandbox.waitForWaits(session) { waits in
            waits.contains { $0.command == command && $0.remainingNanoseconds == 3 * Self.second }
        }
        #expect(waits.contains { $0.command == command && $0.remainingNanoseconds == 3 * Self.second }, "pending waits: \(waits)")
        usleep(1_500_000)
        #expect(run.isRunning, "slept through a frozen session: \(run.output)")
        #expect(!run.lines.contains { $0.hasPrefix("slept") })

        let tick = try sandbox.timectl("--session", "go-sleep", "tick", "3")
        #expect(tick.status == 0, "\(tick)")
        #expect(run.exitStatus(guardSeconds: 30) == 0, "\(run.output) \(run.errorOutput)")
        #expect(run.line(startingWith: "slept ", guardSeconds: 1) == "slept \(3 * Self.second) \(Self.start + 3)")
        let after = try runProbe(sandbox, "go-sleep", linking, ["now"], environment: environment)
        #expect(after.stdout == "\(Self.start + 3)\n", "\(after)")
    }

    @Test("auto-advance: 100 × time.Sleep(36s), <-time.After(10s) and a 20 s context timeout take exactly 3630 s of virtual time",
          arguments: linkings)
    func autoAdvance(linking: GoFixture.Linking) throws {
        let (sandbox, session, environment) = try frozenSession("go-auto")
        let daemon = try BackgroundProgram(sandbox, timectl: ["--session", "go-auto", "daemon"])
        let deadline = Date().addingTimeInterval(30)
        while session.schedulerProcess == nil && Date() < deadline { usleep(10_000) }
        try #require(session.schedulerProcess != nil, "\(daemon.errorOutput)")
        let result = try runProbe(sandbox, "go-auto", linking, ["waits"], environment: environment, guardSeconds: 120)
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout == "elapsed 1h0m30s\n", "\(result)")
        // A C child of a Go program inherits the system call filter across exec, and still sleeps on the session.
        let child = try runProbe(sandbox, "go-auto", linking, ["exec", "sh", "-c", "sleep 5; date +%s"],
                                 environment: environment, guardSeconds: 60)
        #expect(child.status == 0, "\(child)")
        #expect(child.stdout == "\(Self.start + 3630 + 5)\n", "\(child)")
        let stop = try sandbox.timectl("--session", "go-auto", "daemon", "--stop")
        #expect(stop.status == 0, "\(stop)")
        #expect(daemon.exitStatus() == 0)
    }

    @Test("garbage collection and SIGURG preemption keep working while the runtime's waits are trapped (a running session at rate 100)",
          arguments: linkings)
    func collectorAndPreemption(linking: GoFixture.Linking) throws {
        let (sandbox, session, environment) = try frozenSession("go-churn")
        defer { withExtendedLifetime(sandbox) {} }
        try session.setRate(100)
        let result = try runProbe(sandbox, "go-churn", linking, ["churn"], environment: environment, guardSeconds: 120)
        #expect(result.status == 0, "\(result)")
        let elapsed = try #require(Int64(keyedValues(result.stdout)["elapsed_ns"] ?? ""), "\(result)")
        // At least the ten sequential 1 s sleeps (the allocating goroutines may take longer, ×100).
        #expect(elapsed >= 10 * Self.second, "\(result)")
    }

    /// What Tests/Fixtures/go_gc printed: its collections, the wall clock when its sleep began, and its `slept` line.
    func collectorRun(_ output: String) -> (collections: Int, sleepingWall: Int64, slept: String?) {
        let values = keyedValues(output)
        return (Int(values["collections"] ?? "") ?? -1, Int64(values["sleeping"] ?? "") ?? -1, values["slept"])
    }

    /// Issue 21: the collector's stop-the-world and forEachP wait for the other Ps 100 µs at a time and re-preempt
    /// only once nanotime() has passed that; the background sweeper, spinning until the collection releases it,
    /// missed the first request. On a standing clock both spun for ever (docs/starvation.md, rule 1's back-offs).
    @Test("a GC-heavy Go program (hundreds of collections) reaches its time.Sleep(2s) on a frozen session with no tick, waits there with the clock standing, and ends on tick 2 having slept exactly 2 s, three times",
          arguments: linkings)
    func collectorOnFrozenSession(linking: GoFixture.Linking) throws {
        let (sandbox, session, _) = try frozenSession("go-gc")
        defer { withExtendedLifetime(sandbox) {} }
        let program = try GoFixture.path("go_gc", linking: linking)
        let command = String("go_gc-\(linking.rawValue)".prefix(15))
        for _ in 1...3 {
            let started = ContinuousClock.now
            let run = try BackgroundProgram(sandbox, session: "go-gc", [program])
            let sleeping = run.line(startingWith: "sleeping ", guardSeconds: 60)
            let realElapsed = ContinuousClock.now - started
            try #require(sleeping != nil, "never reached its sleep: \(run.output) \(run.errorOutput)")
            let (collections, sleepingWall, _) = collectorRun(run.output)
            #expect(collections >= 50, "\(run.output)")
            // The session stood still; the program's own clocks moved only by its collections' timed-out waits for
            // a running goroutine, 100 µs each (docs/starvation.md). How many time out depends on how busy the
            // machine is (tens of milliseconds in all on a quiet one, 190 ms with both CPUs busy): a small part of
            // the real time the program took, where a clock left on real time would have moved by all of it.
            let sessionWall = session.wallClockNanoseconds
            let crept = sleepingWall - sessionWall
            let real = realElapsed.components.seconds * Self.second + realElapsed.components.attoseconds / 1_000_000_000
            #expect(crept >= 0 && crept * 4 <= real,
                    "the program's clock at its sleep: \(sleepingWall), the session's: \(sessionWall) (\(Double(crept) / 1e6) ms ahead after \(collections) collections and \(realElapsed) of real time)")
            usleep(500_000)
            #expect(run.isRunning, "slept through a frozen session: \(run.output)")
            let status = try decodeStatus(try sandbox.timectl("--session", "go-gc", "status", "--json"))
            // The netpoller waits for the earliest runtime timer: the sleep's, or the scavenger's before it.
            let waits = status.waits.filter { $0.command == command }
            #expect(!waits.isEmpty && waits.allSatisfy {
                $0.virtualClock == .monotonic && $0.remainingNanoseconds > 0 && $0.remainingNanoseconds <= 2 * Self.second
            }, "pending waits: \(status.waits)")
            #expect(status.wallClockNanoseconds == sessionWall, "the clock moved while the program slept")
            let tick = try sandbox.timectl("--session", "go-gc", "tick", "2")
            #expect(tick.status == 0, "\(tick)")
            #expect(run.exitStatus(guardSeconds: 30) == 0, "\(run.output) \(run.errorOutput)")
            #expect(collectorRun(run.output).slept == "\(2 * Self.second) \(sleepingWall / Self.second + 2)", "\(run.output)")
        }
        #expect(session.attachedProcesses().isEmpty)
    }

    @Test("under run --auto-advance a GC-heavy Go program ends, its time.Sleep(2s) measured as 2 s of virtual time (and no more than a collection's creeps), three times",
          arguments: linkings)
    func collectorAutoAdvanced(linking: GoFixture.Linking) throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        defer { withExtendedLifetime(sandbox) {} }
        let program = try GoFixture.path("go_gc", linking: linking)
        for _ in 1...3 {
            // Real time only guards against a hang.
            let result = try sandbox.timectl(["run", "--at", "@\(Self.start)", "--auto-advance", "--", program], guardSeconds: 60)
            #expect(result.status == 0, "\(result)")
            let (collections, sleepingWall, slept) = collectorRun(result.stdout)
            #expect(collections >= 50, "\(result)")
            // A collection still finishing as the sleep begins may time out a wait or two for a running goroutine,
            // each moving the process's clocks 10 µs (docs/starvation.md): the sleep measures 2 s, plus those.
            let measured = slept.flatMap { Int64($0.split(separator: " ").first ?? "") } ?? -1
            #expect(measured >= 2 * Self.second && measured <= 2 * Self.second + Self.millisecond, "\(result)")
            #expect(slept?.split(separator: " ").last == "\(sleepingWall / Self.second + 2)", "\(result)")
        }
    }

    @Test("a Go program's children started with os/exec stay attached, whether C or Go, dynamic or static", arguments: linkings)
    func execChildren(linking: GoFixture.Linking) throws {
        let (sandbox, _, environment) = try frozenSession("go-exec")
        defer { withExtendedLifetime(sandbox) {} }
        let date = try runProbe(sandbox, "go-exec", linking, ["exec", "date", "+%s"], environment: environment)
        #expect(date.status == 0, "\(date)")
        #expect(date.stdout == "\(Self.start)\n", "\(date)")
        for child in [GoFixture.Linking.dynamic, .static] {
            let nested = try runProbe(sandbox, "go-exec", linking, ["exec", try GoFixture.path("GoProbe", linking: child), "now"],
                                      environment: environment)
            #expect(nested.status == 0, "\(linking) → \(child): \(nested)")
            #expect(nested.stdout == "\(Self.start)\n", "\(linking) → \(child): \(nested)")
        }
        let staticC = try CFixture.path("print_time_static", source: "print_time", flags: ["-static"])
        let c = try runProbe(sandbox, "go-exec", linking, ["exec", staticC], environment: environment)
        #expect(c.stdout == "\(Self.start)\n", "\(c)")
    }

    /// What Tests/Fixtures/GoTimers's tests wait, each (`go test -v` prints them rounded to 10 ms).
    static let timerTests: [(name: String, seconds: Int)] = [
        ("TestAfterFuncOrder", 40), ("TestTickerCountsTicks", 35), ("TestSelectOnTimeAfter", 13),
        ("TestContextWithTimeout", 40), ("TestSleepsAgreeWithSince", 36), ("TestParallelSleepers", 20), ("TestTimerReset", 9),
    ]

    @Test("Go's own test of its timers (AfterFunc, tickers, select on time.After, contexts, sleeps) passes under run --auto-advance, every timer exact on the virtual clock",
          arguments: linkings)
    func goTestOfTimers(linking: GoFixture.Linking) throws {
        try Build.requireShim()
        let binary = try GoFixture.testBinary("GoTimers", linking: linking)
        let sandbox = try Sandbox()
        defer { withExtendedLifetime(sandbox) {} }
        // GOTIMERS_EXACT: every duration the tests measure must be exact to the nanosecond.
        let result = try sandbox.timectl(["run", "--at", "@\(Self.start)", "--auto-advance", "--", binary, "-test.v"],
                                         environment: ["GOTIMERS_EXACT": "1"], guardSeconds: 300)
        #expect(result.status == 0, "\(result)")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        for test in Self.timerTests {
            #expect(lines.contains("--- PASS: \(test.name) (\(test.seconds).00s)"), "\(test.name): \(result)")
        }
        #expect(lines.contains("PASS"), "\(result)")
        let total = Self.timerTests.reduce(0) { $0 + Int64($1.seconds) } * Self.second
        #expect(lines.last == "elapsed_ns \(total) expected_ns \(total)", "\(result)")
    }

    @Test("a static Go program's os.Executable() and filepath.EvalSymlinks(\"/proc/self/exe\") name the program, not the loader that runs it, and /proc/self/cmdline is its own")
    func executablePath() throws {
        let (sandbox, _, environment) = try frozenSession("go-exe")
        defer { withExtendedLifetime(sandbox) {} }
        let result = try runProbe(sandbox, "go-exe", .static, ["executable"], environment: environment)
        #expect(result.status == 0, "\(result)")
        let program = try GoFixture.path("GoProbe", linking: .static)
        #expect(result.lines == [program, program, "\(program)|executable"], "\(result)")
    }

    @Test("a static Go program that starts a static C program without the session gets the exec refused with one line; let through (TIMECTL_ALLOW_UNCONTROLLED=1), the child dies of SIGSYS at its first timed wait")
    func unattachedStaticChild() throws {
        let (sandbox, _, _) = try frozenSession("go-unattached")
        defer { withExtendedLifetime(sandbox) {} }
        let program = try GoFixture.path("GoProbe", linking: .static)
        let child = try CFixture.path("wait_probe_static", source: "wait_probe", flags: ["-static"])
        let run = ["--session", "go-unattached", "run", "--"]
        let refused = try sandbox.timectl(run + [program, "exec-without-session", child, "nanosleep-eintr", "1"])
        #expect(refused.status == 1, "\(refused)")
        let lines = refused.stderr.split(separator: "\n").map(String.init)
        #expect(lines.count == 2 && lines[0].contains("refusing to exec \(child): started without the session")
                    && lines[0].hasSuffix("(or set TIMECTL_ALLOW_UNCONTROLLED=1 to start it anyway)")
                    && lines[1] == "fork/exec \(child): permission denied", "\(refused)")

        let allowed = try sandbox.timectl(run + ["env", "TIMECTL_ALLOW_UNCONTROLLED=1", program, "exec-without-session", child,
                                                 "nanosleep-eintr", "1"])
        #expect(allowed.status == 1, "\(allowed)")
        #expect(allowed.stderr.contains("warning: starting \(child): started without the session"), "\(allowed)")
        #expect(allowed.stderr.contains("signal: bad system call"), "\(allowed)")

        // A dynamically linked program makes its system calls from libc, away from the Go program's code: it runs.
        let dynamic = try sandbox.timectl(run + [program, "exec-without-session", "/bin/sleep", "0"])
        #expect(dynamic.status == 0 && dynamic.stderr.isEmpty, "\(dynamic)")
    }

    @Test("a static Go program that runs itself again through /proc/self/exe (os/exec) runs controlled, with and without the capabilities that let the loader make /proc/self/exe the program",
          arguments: [false, true])
    func reexecutesItself(withoutCapabilities: Bool) throws {
        let (sandbox, _, _) = try frozenSession("go-reexec")
        defer { withExtendedLifetime(sandbox) {} }
        let program = try GoFixture.path("GoProbe", linking: .static)
        var command = [program, "exec", "/proc/self/exe", "now"]
        if withoutCapabilities && StaticProgramTests.maySetExecutable {
            command = ["setpriv", "--bounding-set=-all", "--inh-caps=-all"] + command
        }
        let result = try sandbox.timectl(["--session", "go-reexec", "run", "--"] + command)
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout == "\(Self.start)\n", "\(result)")
    }
}
