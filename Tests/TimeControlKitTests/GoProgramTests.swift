import Foundation
import Testing
@testable import TimeControlKit

/// Dynamically linked Go programs on the session's timeline (issue 14 part 1,
/// docs/go-and-static.md): Go's runtime reads the clock through the vDSO and
/// waits with raw futex, epoll_pwait and nanosleep calls, never through libc.
///
/// The program runs with the session's attachment environment
/// (`TimeSession.attachmentEnvironment()`), not under `timectl run`, which
/// refuses Go programs until its program-kind check (issue 11) consults
/// `tc_shim_controls_go()`.
@Suite("Go programs", .serialized)
struct GoProgramTests {
    static let start: Int64 = 1_451_649_600
    static let second: Int64 = 1_000_000_000

    func frozenSession(_ name: String) throws -> (Sandbox, TimeSession, [String: String]) {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let session = try sandbox.session(name)
        try session.freeze(at: .absolute(nanosecondsSinceEpoch: Self.start * Self.second))
        let environment = sandbox.environment.merging(try session.attachmentEnvironment()) { $1 }
        return (sandbox, session, environment)
    }

    @Test("time.Now() in a dynamically linked Go program reads the frozen session")
    func now() throws {
        let (sandbox, _, environment) = try frozenSession("go-now")
        defer { withExtendedLifetime(sandbox) {} }
        let probe = try GoFixture.path("GoProbe")
        let result = try runProgram(probe, ["now"], environment: environment)
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout == "\(Self.start)\n", "\(result)")
    }

    @Test("time.Sleep(3s) waits for the session: still asleep 1.5 s later, woken by tick 3, time.Since says 3 s, the wall clock then reads +3 s")
    func sleepUntilTick() throws {
        let (sandbox, session, environment) = try frozenSession("go-sleep")
        let probe = try GoFixture.path("GoProbe")
        let run = try AttachedRun(executable: probe, ["sleep", "3s"], environment: environment)
        #expect(run.line(startingWith: "start ") == "start \(Self.start)", "\(run.errorOutput)")
        let pid = run.process.processIdentifier
        let waits = sandbox.waitForWaits(session) { waits in
            waits.contains { $0.pid == pid && $0.remainingNanoseconds == 3 * Self.second }
        }
        #expect(waits.contains { $0.pid == pid && $0.remainingNanoseconds == 3 * Self.second }, "pending waits: \(waits)")
        usleep(1_500_000)
        #expect(run.isRunning, "slept through a frozen session: \(run.output)")
        #expect(!run.lines.contains { $0.hasPrefix("slept") })

        let tick = try sandbox.timectl("--session", "go-sleep", "tick", "3")
        #expect(tick.status == 0, "\(tick)")
        #expect(run.exitStatus(guardSeconds: 30) == 0, "\(run.output) \(run.errorOutput)")
        #expect(run.line(startingWith: "slept ", guardSeconds: 1) == "slept \(3 * Self.second) \(Self.start + 3)")
        let after = try runProgram(probe, ["now"], environment: environment)
        #expect(after.stdout == "\(Self.start + 3)\n", "\(after)")
    }

    @Test("auto-advance: 100 × time.Sleep(36s), <-time.After(10s) and a 20 s context timeout take exactly 3630 s of virtual time")
    func autoAdvance() throws {
        let (sandbox, session, environment) = try frozenSession("go-auto")
        let probe = try GoFixture.path("GoProbe")
        let daemon = try AttachedRun(sandbox, timectl: ["--session", "go-auto", "daemon"])
        let deadline = Date().addingTimeInterval(30)
        while session.schedulerProcess == nil && Date() < deadline { usleep(10_000) }
        try #require(session.schedulerProcess != nil, "\(daemon.errorOutput)")
        let result = try runProgram(probe, ["waits"], environment: environment, guardSeconds: 120)
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout == "elapsed 1h0m30s\n", "\(result)")
        // A C child of a Go program inherits the system call filter across exec, and still sleeps on the session.
        let child = try runProgram(probe, ["exec", "sh", "-c", "sleep 5; date +%s"], environment: environment,
                                   guardSeconds: 60)
        #expect(child.status == 0, "\(child)")
        #expect(child.stdout == "\(Self.start + 3630 + 5)\n", "\(child)")
        let stop = try sandbox.timectl("--session", "go-auto", "daemon", "--stop")
        #expect(stop.status == 0, "\(stop)")
        #expect(daemon.exitStatus() == 0)
    }

    @Test("garbage collection and SIGURG preemption keep working while the runtime's waits are trapped (a running session at rate 100)")
    func collectorAndPreemption() throws {
        let (sandbox, session, environment) = try frozenSession("go-churn")
        defer { withExtendedLifetime(sandbox) {} }
        try session.setRate(100)
        let probe = try GoFixture.path("GoProbe")
        let result = try runProgram(probe, ["churn"], environment: environment, guardSeconds: 120)
        #expect(result.status == 0, "\(result)")
        let elapsed = try #require(Int64(keyedValues(result.stdout)["elapsed_ns"] ?? ""), "\(result)")
        // At least the ten sequential 1 s sleeps (the allocating goroutines may take longer, ×100).
        #expect(elapsed >= 10 * Self.second, "\(result)")
    }

    @Test("a Go program's children started with os/exec stay attached, whether C or Go")
    func execChildren() throws {
        let (sandbox, _, environment) = try frozenSession("go-exec")
        defer { withExtendedLifetime(sandbox) {} }
        let probe = try GoFixture.path("GoProbe")
        let date = try runProgram(probe, ["exec", "date", "+%s"], environment: environment)
        #expect(date.status == 0, "\(date)")
        #expect(date.stdout == "\(Self.start)\n", "\(date)")
        let nested = try runProgram(probe, ["exec", probe, "now"], environment: environment)
        #expect(nested.status == 0, "\(nested)")
        #expect(nested.stdout == "\(Self.start)\n", "\(nested)")
    }
}
