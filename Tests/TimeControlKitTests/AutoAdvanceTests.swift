import Foundation
import Testing
@_spi(CommandLine) @testable import TimeControlKit
import TimeShimC

/// The session scheduler (SPEC §8): `run --auto-advance`, `daemon`,
/// `tick --step`, `run-pending`, their library forms, and the loop guards.
/// Every assertion is on virtual time; real time only guards against hangs.
/// Serialized: these tests block on real processes, and in parallel they would take
/// every thread of the small cooperative pool from the asynchronous tests.
@Suite("Auto-advance: the session scheduler", .serialized)
struct AutoAdvanceTests {
    static let second: Int64 = 1_000_000_000
    static let millisecond: Int64 = 1_000_000
    static let start = Sandbox.frozenStart

    /// Lines of `text` that are whole numbers (`date +%s%N`).
    func stamps(_ text: String) -> [Int64] {
        text.split(separator: "\n").compactMap { Int64($0) }
    }

    @Test("run --auto-advance: 100 sleeps of 0.1 s are 10 s of virtual time, and the report says so")
    func shellLoop() throws {
        let (sandbox, _) = try Sandbox.frozenSession("loop")
        let result = try sandbox.timectl("--session", "loop", "run", "--auto-advance", "--report", "--",
                                         "sh", "-c", "date +%s%N; for i in $(seq 100); do sleep 0.1; done; date +%s%N")
        #expect(result.status == 0, "\(result)")
        #expect(stamps(result.stdout) == [Self.start, Self.start + 10 * Self.second])
        #expect(result.stderr.hasPrefix("timectl: auto-advance: 100 steps, 10s of virtual time in "), "\(result.stderr)")
        #expect(result.stderr.contains("× real speed)"))
    }

    @Test("run --auto-advance freezes a running session first, so the run is exactly repeatable")
    func freezesFirst() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let script = "date +%s%N; sleep 2; date +%s%N"
        let first = try sandbox.timectl("--session", "fresh", "run", "--auto-advance", "--", "sh", "-c", script)
        let times = stamps(first.stdout)
        #expect(times.count == 2 && times[1] - times[0] == 2 * Self.second, "\(first)")
        #expect(try !sandbox.session("fresh").status().frozen, "it runs again afterwards, as it did before")
        // --keep-rate leaves it running: real time passes between the steps too.
        try sandbox.session("running").resume()
        let kept = try sandbox.timectl("--session", "running", "run", "--auto-advance", "--keep-rate", "--", "sh", "-c", script)
        let keptTimes = stamps(kept.stdout)
        #expect(keptTimes.count == 2 && keptTimes[1] - keptTimes[0] > 2 * Self.second, "\(kept)")
        #expect(try !sandbox.session("running").status().frozen)
    }

    @Test("two cooperating processes: the reader gets the writer's data at +5 s, never its 10 s timeout")
    func cooperatingProcesses() throws {
        let (sandbox, _) = try Sandbox.frozenSession("fifo")
        let fifo = sandbox.directory + "/channel"
        #expect(mkfifo(fifo, 0o600) == 0)
        let reader = """
            import os, select, sys, time
            fd = os.open(sys.argv[1], os.O_RDWR)
            start = time.monotonic_ns()
            poller = select.poll(); poller.register(fd, select.POLLIN)
            events = poller.poll(10000)
            print("reader", os.read(fd, 100).decode().strip() if events else "timed out", time.monotonic_ns() - start, flush=True)
            """
        let result = try sandbox.timectl("--session", "fifo", "run", "--auto-advance", "--", "sh", "-c",
                                         "python3 -c \"$0\" \"$1\" & sleep 5; echo hello > \"$1\"; wait", reader, fifo)
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout == "reader hello \(5 * Self.second)\n")
    }

    @Test("Swift Task.sleep loops and Python asyncio sleeps complete in virtual order, at their deadlines (asyncio: within its 1 ms rounding)")
    func runtimesInOrder() throws {
        let (sandbox, _) = try Sandbox.frozenSession("order")
        let swift = try sandbox.timectl("--session", "order", "run", "--auto-advance", "--", Build.swiftProbe, "task-loops", "3", "2", "5")
        #expect(swift.status == 0, "\(swift)")
        #expect(swift.lines == [
            "task 2 lap 1 at \(2 * Self.second)", "task 2 lap 2 at \(4 * Self.second)", "task 5 lap 1 at \(5 * Self.second)",
            "task 2 lap 3 at \(6 * Self.second)", "task 5 lap 2 at \(10 * Self.second)", "task 5 lap 3 at \(15 * Self.second)",
        ])
        let python = try sandbox.timectl("--session", "order", "run", "--auto-advance", "--", "python3", "-c", """
            import asyncio, time
            start = time.monotonic_ns()
            async def sleeper(name, seconds):
                await asyncio.sleep(seconds)
                print(name, time.monotonic_ns() - start, flush=True)
            async def main():
                await asyncio.gather(sleeper("c", 30), sleeper("a", 10), sleeper("b", 20), sleeper("d", 45))
            asyncio.run(main())
            """)
        #expect(python.status == 0, "\(python)")
        // asyncio computes each epoll timeout from a float clock (`when - loop.time()`) and rounds it up to whole
        // milliseconds (selectors.EpollSelector), as on a real kernel: a sleeper wakes no earlier than its
        // deadline and at most 1 ms after it. That, and the order, is all asyncio guarantees.
        #expect(python.lines.map { $0.prefix(1) } == ["a", "b", "c", "d"], "\(python)")
        for (line, seconds) in zip(python.lines, [10, 20, 30, 45] as [Int64]) {
            let elapsed = Int64(line.split(separator: " ").last ?? "") ?? -1
            #expect(elapsed >= seconds * Self.second && elapsed <= seconds * Self.second + Self.millisecond, "\(line)")
        }
    }

    @Test("a thread that a step woke and that then ends does not hold up the scheduler: its process's next waits are stepped to")
    func wokenThreadEnds() throws {
        let (sandbox, _) = try Sandbox.frozenSession("ending")
        // Each worker's sleep is a step that wakes it (the scheduler's first suspect), and it ends at once.
        let script = """
            import threading, time
            start = time.monotonic_ns()
            for _ in range(3):
                worker = threading.Thread(target=time.sleep, args=(0.01,))
                worker.start()
                worker.join()
                time.sleep(1)
            print(time.monotonic_ns() - start, flush=True)
            """
        let result = try sandbox.timectl("--session", "ending", "run", "--auto-advance", "--", "python3", "-c", script,
                                         guardSeconds: 30)
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout == "\(3 * (Self.second + 10 * Self.millisecond))\n")
    }

    @Test("a process spinning on the clock is never advanced past: it is not quiescent (it sees only its own creep)")
    func spinnerHoldsTimeStill() throws {
        let (sandbox, _) = try Sandbox.frozenSession("spin")
        let spinner = """
            import time
            start = time.monotonic_ns()
            for _ in range(1_500_000): time.monotonic_ns()
            print("spun", time.monotonic_ns() - start, flush=True)
            """
        let result = try sandbox.timectl("--session", "spin", "run", "--auto-advance", "--", "sh", "-c",
                                         "python3 -c \"$0\" & sleep 10; echo slept; wait", spinner)
        #expect(result.status == 0, "\(result)")
        // Had the scheduler advanced while the spinner ran, the spinner would have seen the 10 s. What it sees is
        // only its own creep (docs/starvation.md): reading one value over and over moves its own clocks by
        // 10 ns a reading at most, so 1.5 million readings see 15 ms at most.
        #expect(result.lines.count == 2 && result.lines.last == "slept", "\(result)")
        let spun = Int64(result.lines.first?.split(separator: " ").last ?? "") ?? -1
        #expect(result.lines.first?.hasPrefix("spun ") == true && spun >= 0 && spun <= 15 * Self.millisecond, "\(result)")
    }

    @Test("the loop guard stops a program that re-arms a 0 s timer for ever, and names it")
    func zeroTimerLoopGuard() throws {
        let (sandbox, session) = try Sandbox.frozenSession("zero")
        let probe = try CFixture.path("wait_probe")
        let result = try sandbox.timectl("--session", "zero", "run", "--auto-advance", "--", probe, "rearm-zero-timer")
        #expect(result.status == 123, "\(result)")
        let line = result.stderr.split(separator: "\n").last.map(String.init) ?? ""
        #expect(line.hasPrefix("timectl: pid "), "\(result.stderr)")
        #expect(line.contains("(wait_probe) began "))
        #expect(line.contains("waits that were already due while virtual time stood still"))
        #expect(line.contains("the loop guard stopped it"))
        #expect(session.attachedProcesses().isEmpty, "the program was stopped")
        #expect(session.status().scheduler == nil, "and the scheduler is gone")
    }

    @Test("--max-steps stops the run's own processes at once, exits 123 with one line, and reports none of them as left running")
    func maxStepsStop() throws {
        let (sandbox, session) = try Sandbox.frozenSession("limit")
        // Another run's process on the same session, waiting for a signal (no deadline the scheduler could step to):
        // the stop is not for it.
        let other = try BackgroundProgram(sandbox, session: "limit", ["python3", "-c", "import signal; signal.pause()"])
        try #require(sandbox.waitForAttached(session) { $0.map(\.command) == ["python3"] }.count == 1)
        let started = Date()
        let result = try sandbox.timectl("--session", "limit", "run", "--auto-advance", "--max-steps", "3", "--",
                                         "sh", "-c", "echo $$; sleep 60 & echo $!; while :; do sleep 1; done")
        let took = Date().timeIntervalSince(started)
        #expect(result.status == 123, "\(result)")
        let lines = result.stderr.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 2 && lines.last == "", "one line, and no 'still running' report: \(result.stderr)")
        #expect(result.stderr.hasPrefix("timectl: gave up after 3 steps to the next deadline (the step limit) without the processes running out of waits; the wait that kept coming back: sleep (last pid "), "\(result.stderr)")
        #expect(result.stderr.hasSuffix("): sleep on CLOCK_MONOTONIC, 3 times\n"), "\(result.stderr)")
        #expect(session.wallClockNanoseconds == Self.start + 3 * Self.second, "exactly 3 steps of 1 s")
        // The shell and its sleeps are gone (or zombies waiting for init), not left on the frozen session.
        for pid in result.lines.compactMap(Int32.init) {
            #expect(sandbox.waitUntilGone(pid), "pid \(pid) of the stopped run is still running")
        }
        #expect(other.isRunning, "a process of another run is left alone")
        #expect(session.attachedProcesses().map(\.command) == ["python3"], "\(session.attachedProcesses())")
        // It used to wait 2 s for processes that had already exited; a guard, not a measurement.
        #expect(took < 2, "the stop took \(took) s")
    }

    @Test("beside an attached process that only waits for a signal, run --auto-advance steps its command and exits with its status")
    func idleNeighbourIsNoDeadlock() throws {
        let (sandbox, session) = try Sandbox.frozenSession("neighbour")
        let neighbour = try BackgroundProgram(sandbox, session: "neighbour", ["python3", "-c", "import signal; signal.pause()"])
        try #require(sandbox.waitForAttached(session) { $0.map(\.command) == ["python3"] }.count == 1)
        // Before the command started and after it exited, the neighbour alone looked deadlocked: the scheduler gave
        // up before the command existed (which then hung on the frozen session), or the run exited 122 (5 runs in 40 here).
        for round in 1...20 {
            let before = session.wallClockNanoseconds
            let result = try sandbox.timectl(["--session", "neighbour", "run", "--auto-advance", "--", "sh", "-c", "sleep 5; date +%s%N"],
                                             guardSeconds: 30)
            #expect(result.status == 0 && result.stderr.isEmpty, "round \(round): \(result)")
            #expect(stamps(result.stdout) == [before + 5 * Self.second], "round \(round): \(result)")
            if result.status != 0 { break }
        }
        #expect(neighbour.isRunning)
    }

    @Test("after run --auto-advance a named session runs again as it did before: its rate, its stopped wall; a frozen one stays frozen")
    func sessionRunsAgainAfterwards() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        // Created running by run itself (the default session's case).
        let first = try sandbox.timectl("--session", "after", "run", "--auto-advance", "--", "sleep", "86400")
        #expect(first.status == 0 && first.stderr.isEmpty, "\(first)")
        let session = try sandbox.session("after")
        var status = session.status()
        #expect(!status.frozen && !status.wallFrozen && status.rateText == "1", "\(status)")
        #expect(status.elapsedNanoseconds >= 86_400 * Self.second, "where the run left it: a day ahead")
        // So a plain run's sleep takes its real time again instead of waiting for ever.
        let plain = try sandbox.timectl(["--session", "after", "run", "--", "sleep", "0.2"], guardSeconds: 30)
        #expect(plain.status == 0 && !plain.timedOut, "\(plain)")

        try session.setRate(2)
        #expect(try sandbox.timectl("--session", "after", "run", "--auto-advance", "--", "sleep", "10").status == 0)
        status = session.status()
        #expect(!status.frozen && status.rateText == "2", "\(status)")

        // A wall stopped by freeze --wall stays stopped, exactly as far ahead as the run went.
        try session.freezeWall(at: .absolute(nanosecondsSinceEpoch: Self.start))
        #expect(try sandbox.timectl("--session", "after", "run", "--auto-advance", "--", "sleep", "10").status == 0)
        status = session.status()
        #expect(!status.frozen && status.wallFrozen && status.rateText == "2", "\(status)")
        #expect(session.wallClockNanoseconds == Self.start + 10 * Self.second)

        // A stop by the step limit puts it back too.
        try session.resume()
        let stopped = try sandbox.timectl("--session", "after", "run", "--auto-advance", "--max-steps", "2", "--",
                                          "sh", "-c", "while :; do sleep 1; done")
        #expect(stopped.status == 123, "\(stopped)")
        status = session.status()
        #expect(!status.frozen && status.rateText == "1", "\(status)")

        // Frozen before, frozen after.
        try session.freeze(at: .absolute(nanosecondsSinceEpoch: Self.start))
        #expect(try sandbox.timectl("--session", "after", "run", "--auto-advance", "--", "sleep", "10").status == 0)
        #expect(session.status().frozen)
        #expect(session.wallClockNanoseconds == Self.start + 10 * Self.second)
    }

    @Test("run --at AT --auto-advance: the first reading is AT exactly, on a private session and on a named one")
    func startsExactlyAtAT() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let script = "date +%s.%N; sleep 1.5; date +%s.%N"
        let expected = "1451649600.000000000\n1451649601.500000000\n"
        let temporary = try sandbox.timectl("run", "--at", "2016-01-01T12:00:00Z", "--auto-advance", "--", "sh", "-c", script)
        #expect(temporary.status == 0, "\(temporary)")
        #expect(temporary.stdout == expected)
        #expect(try sandbox.sessions.sessionNames().isEmpty, "the private session is removed")
        let named = try sandbox.timectl("--session", "dated", "run", "--at", "2016-01-01T12:00:00Z", "--auto-advance", "--", "sh", "-c", script)
        #expect(named.status == 0, "\(named)")
        #expect(named.stdout == expected)
        let status = try sandbox.session("dated").status()
        #expect(!status.frozen && status.rateText == "1", "afterwards it runs, as --at set it: \(status)")
    }

    @Test("tick --step stops at each pending deadline in order; a plain tick jumps the whole way")
    func tickStep() throws {
        let script = "sleep 3; date +%s%N; sleep 3; date +%s%N; sleep 100"
        let (sandbox, session) = try Sandbox.frozenSession("step")
        let stepped = try BackgroundProgram(sandbox, session: "step", ["sh", "-c", script])
        sandbox.waitForWaits(session) { $0.contains { $0.kind == "sleep" } }
        let tick = try sandbox.timectl("--session", "step", "tick", "10", "--step")
        #expect(tick.status == 0, "\(tick)")
        #expect(tick.stdout == "+10s in 2 steps; wall clock now 2016-01-01T12:00:10Z\n", "\(tick)")
        // The program wrote both lines before the tick returned (its last sleep is pending, below), but
        // they reach this process's reader thread a moment later.
        _ = stepped.line(startingWith: String(Self.start + 6 * Self.second))
        #expect(stamps(stepped.output) == [Self.start + 3 * Self.second, Self.start + 6 * Self.second])
        #expect(session.wallClockNanoseconds == Self.start + 10 * Self.second)
        // tick --step settles at the end: the last sleep is already pending, 96 s to go.
        #expect(session.pendingWaits().map(\.remainingNanoseconds) == [96 * Self.second])

        let (plainSandbox, plainSession) = try Sandbox.frozenSession("plain")
        let plain = try BackgroundProgram(plainSandbox, session: "plain", ["sh", "-c", script])
        plainSandbox.waitForWaits(plainSession) { $0.contains { $0.kind == "sleep" } }
        #expect(try plainSandbox.timectl("--session", "plain", "tick", "10").status == 0)
        #expect(plain.line(startingWith: "1") == String(Self.start + 10 * Self.second), "the sleeper sees the whole tick")
        let pending = plainSandbox.waitForWaits(plainSession) { !$0.isEmpty }
        #expect(pending.map(\.remainingNanoseconds) == [3 * Self.second])
    }

    @Test("run-pending advances until nothing waits")
    func runPending() throws {
        let (sandbox, session) = try Sandbox.frozenSession("pending")
        let run = try BackgroundProgram(sandbox, session: "pending", ["sh", "-c", "sleep 2; sleep 3; date +%s%N"])
        sandbox.waitForWaits(session) { $0.contains { $0.kind == "sleep" } }
        let result = try sandbox.timectl("--session", "pending", "run-pending")
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout == "2 steps, 5s of virtual time; nothing pending\n")
        #expect(run.exitStatus() == 0)
        #expect(stamps(run.output) == [Self.start + 5 * Self.second])
    }

    @Test("run-pending's step guard stops a program that re-arms its timer for ever, naming the wait")
    func runPendingStepGuard() throws {
        let (sandbox, session) = try Sandbox.frozenSession("busy")
        let busy = try BackgroundProgram(sandbox, session: "busy", ["python3", "-c", "import time\nwhile True: time.sleep(0.001)"])
        let pid = sandbox.waitForWaits(session) { $0.contains { $0.kind == "sleep" } }.first?.pid ?? 0
        let before = session.monotonicNanoseconds
        let result = try sandbox.timectl("--session", "busy", "run-pending", "--max-steps", "50")
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr == "timectl: gave up after 50 steps to the next deadline (the step limit) without running out of pending waits; the wait that kept coming back: python3 (last pid \(pid)): sleep on CLOCK_MONOTONIC, 50 times\n")
        #expect(session.monotonicNanoseconds - before == 50 * 1_000_000, "exactly 50 steps of 1 ms")
        #expect(busy.isRunning)
    }

    @Test("the step guard names a shell loop's wait by its command: each round is a new process")
    func stepGuardNamesShellLoops() throws {
        let (sandbox, session) = try Sandbox.frozenSession("loop-guard")
        let loop = try BackgroundProgram(sandbox, session: "loop-guard", ["sh", "-c", "while :; do sleep 1; done"])
        sandbox.waitForWaits(session) { $0.contains { $0.kind == "sleep" } }
        let result = try sandbox.timectl("--session", "loop-guard", "run-pending", "--max-steps", "5")
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.hasPrefix("timectl: gave up after 5 steps to the next deadline (the step limit) without running out of pending waits; the wait that kept coming back: sleep (last pid "), "\(result.stderr)")
        #expect(result.stderr.hasSuffix("): sleep on CLOCK_MONOTONIC, 5 times\n"), "\(result.stderr)")
        #expect(loop.isRunning)
    }

    @Test("timectl daemon advances a session driven from shells, shows in status, allows one scheduler, and stops cleanly")
    func daemon() throws {
        let (sandbox, session) = try Sandbox.frozenSession("shared")
        let daemon = try BackgroundProgram(sandbox, timectl: ["--session", "shared", "daemon"])
        let deadline = Date().addingTimeInterval(30)
        while session.schedulerProcess == nil && Date() < deadline { usleep(10_000) }
        let scheduler = try #require(session.schedulerProcess)
        #expect(scheduler.pid == daemon.process.processIdentifier)

        let worker = try sandbox.timectl("--session", "shared", "run", "--", "sh", "-c", "sleep 30; date +%s%N")
        #expect(worker.status == 0, "\(worker)")
        #expect(stamps(worker.stdout) == [Self.start + 30 * Self.second])
        let status = try sandbox.timectl("--session", "shared", "status")
        #expect(status.stdout.contains("scheduler   auto-advance by pid \(scheduler.pid) (timectl, daemon), 1 step so far\n"), "\(status)")

        let second = try sandbox.timectl("--session", "shared", "daemon")
        #expect(second.status == 1)
        #expect(second.stderr == "timectl: session 'shared' already has an auto-advance scheduler (pid \(scheduler.pid), daemon); stop it first ('timectl daemon --stop --session shared')\n")
        let alsoRun = try sandbox.timectl("--session", "shared", "run", "--auto-advance", "--", "true")
        #expect(alsoRun.status == 125)

        let stop = try sandbox.timectl("--session", "shared", "daemon", "--stop")
        #expect(stop.status == 0, "\(stop)")
        #expect(daemon.exitStatus() == 0)
        #expect(daemon.errorOutput.hasPrefix("timectl: daemon for session 'shared' stopped: 1 step, 30s of virtual time in "), "\(daemon.errorOutput)")
        #expect(session.schedulerProcess == nil)
        #expect(try sandbox.timectl("--session", "shared", "status").stdout.contains("scheduler   none"))
        let again = try sandbox.timectl("--session", "shared", "daemon", "--stop")
        #expect(again.status == 1)
        #expect(again.stderr == "timectl: session 'shared' has no scheduler running\n")
    }

    @Test("a session that ran before timectl daemon runs again once the daemon stops, from where it left the clocks")
    func daemonGivesBackARunningSession() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let session = try sandbox.session("shells")
        #expect(!session.isFrozen)
        let daemon = try BackgroundProgram(sandbox, timectl: ["--session", "shells", "daemon"])
        let deadline = Date().addingTimeInterval(30)
        while session.schedulerProcess == nil && Date() < deadline { usleep(10_000) }
        #expect(session.schedulerProcess != nil)
        #expect(session.isFrozen, "the daemon freezes the session while it runs")
        let before = session.monotonicNanoseconds
        let worker = try sandbox.timectl("--session", "shells", "run", "--", "sleep", "3600")
        #expect(worker.status == 0, "\(worker)")
        let stop = try sandbox.timectl("--session", "shells", "daemon", "--stop")
        #expect(stop.status == 0, "\(stop)")
        #expect(daemon.exitStatus() == 0)
        #expect(!session.isFrozen, "\(daemon.errorOutput)")
        #expect(session.pace.rate == .realTime)
        #expect(session.monotonicNanoseconds - before >= 3_600_000_000_000, "from where the daemon left the clocks: an hour on")
        let first = session.monotonicNanoseconds
        usleep(20_000)
        #expect(session.monotonicNanoseconds > first, "the session's clocks run again")
    }

    @Test("daemon --stop signals only a daemon: a command's scheduler is refused, and its command runs on")
    func stopOnlyStopsDaemons() throws {
        let (sandbox, session) = try Sandbox.frozenSession("owned")
        let fifo = sandbox.directory + "/go"
        #expect(mkfifo(fifo, 0o600) == 0)
        let run = try BackgroundProgram(sandbox, timectl: ["--session", "owned", "run", "--auto-advance", "--",
                                                     "sh", "-c", "read line < \"$0\"; date +%s%N", fifo])
        let deadline = Date().addingTimeInterval(30)
        while session.schedulerProcess == nil && Date() < deadline { usleep(10_000) }
        let scheduler = try #require(session.scheduler)
        #expect(scheduler.process.pid == run.process.processIdentifier)
        #expect(scheduler.kind == .command)
        #expect(session.status().scheduler?.kind == .command)

        let stop = try sandbox.timectl("--session", "owned", "daemon", "--stop")
        #expect(stop.status == 1)
        #expect(stop.stderr == "timectl: session 'owned' is auto-advanced by pid \(scheduler.process.pid), a command's run (timectl run --auto-advance or replay), which ends when the command exits; --stop stops only a 'timectl daemon'\n")
        let second = try sandbox.timectl("--session", "owned", "daemon")
        #expect(second.stderr == "timectl: session 'owned' already has an auto-advance scheduler (pid \(scheduler.process.pid), command); it ends when its command exits\n")
        #expect(run.isRunning)
        try "go\n".write(toFile: fifo, atomically: false, encoding: .utf8)
        #expect(run.exitStatus() == 0)
        // The shell waited on a FIFO that this test (outside the session) feeds: an outside wait, during which
        // the session runs at real speed instead of jumping (so not exactly at the start, but no jump either).
        let stamp = try #require(stamps(run.output).first, "\(run.output)")
        #expect(stamp >= Self.start && stamp < Self.start + 60 * nanosecondsPerSecond, "\(stamp)")
        #expect(session.schedulerProcess == nil)
    }

    @Test("a claim left by a scheduler that died, its pid now another process's, is neither trusted nor signalled")
    func staleClaim() throws {
        let (sandbox, session) = try Sandbox.frozenSession("stale")
        // A live process that is no scheduler, standing in for one that took a dead scheduler's pid.
        let bystander = Process()
        bystander.executableURL = URL(fileURLWithPath: "/bin/sleep")
        bystander.arguments = ["600"]
        try launch(bystander)
        defer {
            kill(bystander.processIdentifier, SIGKILL)  // SIGTERM may be blocked: Foundation passes on the spawning thread's mask
            bystander.waitUntilExit()
        }
        let pid = bystander.processIdentifier
        let started = UInt64(try #require(ProcFS.startTicks(of: pid)))
        #expect(session.mapping.claimScheduler(pid: pid, started: started + 1, kind: .daemon) == 0)

        #expect(session.schedulerProcess == nil)
        #expect(try sandbox.timectl("--session", "stale", "status").stdout.contains("scheduler   none"))
        let stopped = try sandbox.timectl("--session", "stale", "daemon", "--stop")
        #expect(stopped.stderr == "timectl: session 'stale' has no scheduler running\n")
        let run = try sandbox.timectl("--session", "stale", "run", "--auto-advance", "--", "sh", "-c", "sleep 5; date +%s%N")
        #expect(run.status == 0, "\(run)")
        #expect(stamps(run.stdout) == [Self.start + 5 * Self.second])
        #expect(bystander.isRunning)
    }

    /// The counters live in the segment, written by whichever process steps
    /// or applies a verb: another process reads the same numbers.
    @Test("status in another process reads the scheduler's steps and the verbs applied")
    func countersSeenFromAnotherProcess() async throws {
        let (sandbox, session) = try Sandbox.frozenSession("counted")
        let before = session.status().verbsApplied
        let autoAdvance = try session.startAutoAdvance()
        let sleeper = try session.spawn("sh", ["-c", "sleep 1; sleep 2; sleep 3"])
        #expect(try await sleeper.waitForExit() == .exited(0))
        let shown = try decodeStatus(try sandbox.timectl("--session", "counted", "status", "--json"))
        #expect(shown.scheduler?.steps == 3)
        #expect(shown.scheduler?.pid == getpid())
        #expect(shown.verbsApplied == before + 4, "the freeze that starts auto-advance, and one verb per step")
        #expect(session.status().scheduler?.steps == 3)
        #expect(autoAdvance.stop().steps == 3)
        #expect(try decodeStatus(try sandbox.timectl("--session", "counted", "status", "--json")).scheduler == nil)
    }

    @Test("the library: startAutoAdvance, stepForward(by:) and runUntilIdle()")
    func library() async throws {
        try Build.requireShim()
        let origin = Date(timeIntervalSince1970: 1_451_649_600)
        let session = try TimeSession.temporary(frozenAt: origin)

        let autoAdvance = try session.startAutoAdvance()
        #expect(throws: TimeControlError.self) { try session.startAutoAdvance() }
        let sleeper = try session.spawn("sh", ["-c", "sleep 60; date -u +%s"])
        #expect(try await sleeper.waitForExit() == .exited(0))
        #expect(sleeper.standardOutput == "1451649660\n")
        let report = autoAdvance.stop()
        #expect(report.steps == 1)
        #expect(report.virtualNanoseconds == 60 * Self.second)
        #expect(autoAdvance.failure == nil)
        #expect(session.schedulerProcess == nil)

        let stepper = try session.spawn("sh", ["-c", "sleep 3; date -u +%s; sleep 3; date -u +%s"])
        try await session.waitForPendingWaits(count: 1) { $0.pid != getpid() }
        let stepped = try await session.stepForward(by: .seconds(10))
        #expect(stepped.steps == 2)
        #expect(stepped.elapsed == .seconds(10))
        #expect(try await stepper.waitForExit() == .exited(0))
        #expect(stepper.standardOutput == "1451649663\n1451649666\n")

        let idler = try session.spawn("sh", ["-c", "sleep 2; sleep 3; date -u +%s"])
        try await session.waitForPendingWaits(count: 1)
        let idle = try await session.runUntilIdle()
        #expect(idle.steps == 2)
        #expect(idle.elapsed == .seconds(5))
        #expect(try await idler.waitForExit() == .exited(0))
        #expect(idler.standardOutput == "1451649675\n")
    }

    @Test("bad scheduler options get one line, exit 64, and change nothing", arguments: [
        (["run", "--keep-rate", "--", "true"], "--keep-rate only applies with --auto-advance"),
        (["run", "--report", "--", "true"], "--report only applies with --auto-advance"),
        (["run", "--auto-advance", "--max-steps", "0", "--", "true"], "--max-steps must be a whole number of at least 1, got 0"),
        (["tick", "3", "--step", "--to-next"], "give either --step or --to-next, not both"),
        (["tick", "--step"], "expected exactly one DURATION"),
        (["tick", "3", "--max-steps", "5"], "--max-steps only applies with --step"),
        (["run-pending", "--max-steps", "0"], "--max-steps must be a whole number of at least 1, got 0"),
        (["daemon", "--stop", "--keep-rate"], "--keep-rate does not apply with --stop"),
    ])
    func badOptions(arguments: [String], message: String) throws {
        let (sandbox, session) = try Sandbox.frozenSession("strict")
        let before = session.status()
        let result = try sandbox.timectl(["--session", "strict"] + arguments)
        #expect(result.status == 64, "\(result)")
        #expect(result.stderr.hasPrefix("timectl: "), "\(result.stderr)")
        #expect(result.stderr.contains(message), "\(result.stderr)")
        #expect(result.stderr.split(separator: "\n").count == 1)
        #expect(session.status().verbsApplied == before.verbsApplied)
        #expect(session.wallClockNanoseconds == Self.start)
    }
}
