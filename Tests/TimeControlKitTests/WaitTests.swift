import Foundation
import Testing
@testable import TimeControlKit
import TimeShimC

/// Waits, sleeps and timers of unmodified programs follow the virtual
/// timeline (SPEC §3): under a frozen session they end exactly when ticks
/// pass their deadline — not before — or at once when what they wait for happens.
@Suite("Waits, sleeps and timers")
struct WaitTests {
    static let second: Int64 = 1_000_000_000

    /// After a tick that falls short of the deadline, the wait must still be
    /// pending: give the program a moment to (wrongly) return, then look.
    func expectStillWaiting(_ run: BackgroundProgram, _ sandbox: Sandbox, _ session: TimeSession, kind: String,
                            clock: String? = nil, remaining: Int64, sourceLocation: SourceLocation = #_sourceLocation) {
        usleep(300_000)
        #expect(run.isRunning, "returned before its deadline: \(run.output)", sourceLocation: sourceLocation)
        let waits = session.pendingWaits().filter { $0.kind == kind && (clock == nil || $0.clock == clock) }
        #expect(waits.map(\.remainingNanoseconds) == [remaining], "\(waits)", sourceLocation: sourceLocation)
    }

    @Test("sleep 3: still asleep 1.5 real seconds later and after tick 2; done after tick 3")
    func coreutilsSleep() throws {
        let (sandbox, session) = try Sandbox.frozenSession("sleep")
        let run = try BackgroundProgram(sandbox, session: "sleep", ["sleep", "3"])
        let waits = sandbox.waitForWaits(session) { !$0.isEmpty }
        #expect(waits.map(\.kind) == ["sleep"])
        #expect(waits.map(\.command) == ["sleep"])
        #expect(waits.map(\.clock) == ["CLOCK_MONOTONIC"])
        usleep(1_500_000)
        #expect(run.isRunning, "a frozen clock does not let real time end the sleep")
        try session.advance(by: .seconds(2))
        expectStillWaiting(run, sandbox, session, kind: "sleep", remaining: Self.second)
        try session.advance(by: .seconds(1))
        #expect(run.exitStatus() == 0)
        #expect(session.pendingWaits().isEmpty)
    }

    @Test("timeout 5 sleep 100 exits with 124 after tick 5, not before")
    func coreutilsTimeout() throws {
        let (sandbox, session) = try Sandbox.frozenSession("timeout")
        let run = try BackgroundProgram(sandbox, session: "timeout", ["timeout", "5", "sleep", "100"])
        sandbox.waitForWaits(session) { waits in waits.contains { $0.kind == "timer" } && waits.contains { $0.kind == "sleep" } }
        try session.advance(by: .seconds(4))
        expectStillWaiting(run, sandbox, session, kind: "timer", remaining: Self.second)
        try session.advance(by: .seconds(1))
        #expect(run.exitStatus() == 124)
    }

    @Test("Swift: Task.sleep(for: .seconds(60)) wakes at +60 s, not at +30 s")
    func swiftTaskSleep() throws {
        let (sandbox, session) = try Sandbox.frozenSession("task")
        let run = try BackgroundProgram(sandbox, session: "task", [Build.swiftProbe, "task-sleep", "60"])
        // ContinuousClock is CLOCK_BOOTTIME; libdispatch also keeps a monotonic timer of its own.
        sandbox.waitForWaits(session) { $0.contains { $0.kind == "timerfd" && $0.clock == "CLOCK_BOOTTIME" } }
        try session.advance(by: .seconds(30))
        expectStillWaiting(run, sandbox, session, kind: "timerfd", clock: "CLOCK_BOOTTIME", remaining: 30 * Self.second)
        try session.advance(by: .seconds(30))
        #expect(run.line(startingWith: "slept") == "slept \(60 * Self.second)")
        #expect(run.exitStatus() == 0)
    }

    @Test("Swift: DispatchQueue.main.asyncAfter(deadline: .now() + 30) fires at +30 s")
    func swiftAsyncAfter() throws {
        let (sandbox, session) = try Sandbox.frozenSession("dispatch")
        let run = try BackgroundProgram(sandbox, session: "dispatch", [Build.swiftProbe, "dispatch-after", "30"])
        sandbox.waitForWaits(session) { $0.contains { $0.kind == "timerfd" && $0.remainingNanoseconds == 30 * Self.second } }
        try session.advance(by: .seconds(29))
        usleep(300_000)
        #expect(run.isRunning, "fired before its deadline: \(run.output)")
        try session.advance(by: .seconds(1))
        #expect(run.line(startingWith: "fired") == "fired \(30 * Self.second)")
        #expect(run.exitStatus() == 0)
    }

    @Test("Python: time.sleep(10) and asyncio.sleep(10)")
    func pythonSleeps() throws {
        let (sandbox, session) = try Sandbox.frozenSession("python")
        let script = """
            import asyncio, time
            start = time.monotonic_ns(); time.sleep(10); print("time.sleep", time.monotonic_ns() - start, flush=True)
            async def main():
                start = time.monotonic_ns(); await asyncio.sleep(10); print("asyncio.sleep", time.monotonic_ns() - start, flush=True)
            asyncio.run(main())
            """
        let run = try BackgroundProgram(sandbox, session: "python", ["python3", "-c", script])
        sandbox.waitForWaits(session) { $0.contains { $0.kind == "sleep" } }
        try session.advance(by: .seconds(9))
        expectStillWaiting(run, sandbox, session, kind: "sleep", remaining: Self.second)
        try session.advance(by: .seconds(1))
        #expect(run.line(startingWith: "time.sleep") == "time.sleep \(10 * Self.second)")
        sandbox.waitForWaits(session) { $0.contains { $0.kind == "epoll" } }
        try session.advance(by: .seconds(9))
        // asyncio rounds its epoll timeout up to whole milliseconds from a float clock, as on a real kernel: the
        // wait it arms ends 10 s after the call, or 1 ms later (selectors.EpollSelector); both are what asyncio does.
        usleep(300_000)
        #expect(run.isRunning, "returned before its deadline: \(run.output)")
        let remaining = session.pendingWaits().filter { $0.kind == "epoll" }.map(\.remainingNanoseconds)
        #expect(remaining.count == 1 && remaining.allSatisfy { $0 >= Self.second && $0 <= Self.second + 1_000_000 }, "\(remaining)")
        _ = try session.advanceToNextDeadline()
        let asyncioLine = run.line(startingWith: "asyncio.sleep") ?? ""
        let asyncioElapsed = Int64(asyncioLine.split(separator: " ").last ?? "") ?? -1
        #expect(asyncioElapsed >= 10 * Self.second && asyncioElapsed <= 10 * Self.second + 1_000_000, "\(asyncioLine)")
        #expect(run.exitStatus() == 0)
    }

    /// Linux queues at most one signal per POSIX timer: while it is pending (here blocked), further
    /// expirations only count as overruns, for real-time signals too. Expiries at 1, 1.3, 1.6 and 1.9 s,
    /// unblocked at 2 s: one signal, si_overrun = timer_getoverrun() = 3 (what Linux itself prints).
    @Test("a periodic POSIX timer whose signal stays blocked delivers once, the missed expirations as its overrun",
          arguments: ["usr1", "rt"], ["running", "auto-advance"])
    func timerOverruns(signal: String, session kind: String) throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let probe = try CFixture.path("timer_overrun")
        let result = kind == "running"
            ? try sandbox.runAttached(session: "overrun", [probe, signal])
            : try sandbox.timectl("--session", "overrun", "run", "--auto-advance", "--", probe, signal)
        #expect(result.status == 0, "\(result)")
        let values = keyedValues(result.stdout)
        #expect(values["delivered_while_blocked"] == "0", "\(result)")
        #expect(values["deliveries"] == "1", "\(result)")
        let unblockedAt = Int64(values["unblocked_at"] ?? "") ?? -1
        #expect(unblockedAt >= 2 * Self.second, "\(result)")
        // On a running session the program unblocks a little after 2 s of real time; were it held up past the
        // next expiry (2.2 s, a heavily loaded machine), the overrun would rightly be 4.
        if kind == "auto-advance" || unblockedAt < 2 * Self.second + 150_000_000 {
            #expect(values["si_overrun"] == "3", "\(result)")
            #expect(values["timer_getoverrun"] == "3", "\(result)")
        } else {
            #expect(values["si_overrun"] == values["timer_getoverrun"], "\(result)")
        }
    }

    /// The rest of SPEC §3's list, from a C program: each waits 5 virtual
    /// seconds for something that never comes, and must time out exactly then.
    @Test("C waits time out exactly at their virtual deadline", arguments: [
        (["cond", "realtime", "5"], "cond", "result=ETIMEDOUT flag=0"),
        (["cond", "monotonic", "5"], "cond", "result=ETIMEDOUT flag=0"),
        (["cond-clockwait", "monotonic", "5"], "cond", "result=ETIMEDOUT flag=0"),
        (["sem", "realtime", "5"], "sem", "result=ETIMEDOUT"),
        (["sem", "monotonic", "5"], "sem", "result=ETIMEDOUT"),
        (["mutex", "5"], "mutex", "result=ETIMEDOUT"),
        (["poll", "5"], "poll", "result=0 revents=0"),
        (["select", "5"], "select", "result=0 set=0 left_us=0"),
        (["pselect", "5"], "select", "result=0 set=0"),
        (["epoll", "5"], "epoll", "result=0"),
        (["alarm", "5"], "alarm", "signal=SIGALRM initially_left=5"),
        (["setitimer", "5"], "alarm", "signal=SIGALRM initially_left=5"),
        (["timer-signal", "5"], "timer", "signal=SIGUSR2 code=SI_TIMER value=42"),
    ])
    func cWaitsTimeOut(arguments: [String], kind: String, outcome: String) throws {
        let (sandbox, session) = try Sandbox.frozenSession("c")
        let run = try BackgroundProgram(sandbox, session: "c", [try CFixture.path("wait_probe")] + arguments)
        // Timers register when armed, before the probe reads back what is left and
        // starts measuring at "ready"; a tick in between would shorten what it sees.
        #expect(run.line(startingWith: "ready") != nil)
        sandbox.waitForWaits(session) { $0.contains { $0.kind == kind } }
        try session.advance(by: .seconds(4))
        expectStillWaiting(run, sandbox, session, kind: kind, remaining: Self.second)
        try session.advance(by: .seconds(1))
        #expect(run.line(startingWith: "result=", "signal=") == "\(outcome) elapsed=\(5 * Self.second)")
        #expect(run.exitStatus() == 0)
    }

    @Test("the awaited event wins at once, with no tick", arguments: [
        ("cond-signalled", "result=0 flag=1 elapsed=0"),
        ("sem-posted", "result=0 elapsed=0"),
        ("poll-ready", "result=1 revents=POLLIN elapsed=0"),
    ])
    func eventsWin(kind: String, outcome: String) throws {
        let (sandbox, _) = try Sandbox.frozenSession("event")
        let run = try BackgroundProgram(sandbox, session: "event", [try CFixture.path("wait_probe"), kind])
        #expect(run.exitStatus() == 0)
        #expect(run.line(startingWith: "result=") == outcome)
    }

    @Test("a periodic timerfd counts the expirations a tick passes")
    func periodicTimerfd() throws {
        let (sandbox, session) = try Sandbox.frozenSession("timerfd")
        let run = try BackgroundProgram(sandbox, session: "timerfd", [try CFixture.path("wait_probe"), "timerfd-periodic", "250", "40"])
        #expect(run.line(startingWith: "ready") != nil)  // armed before "ready": see cWaitsTimeOut
        sandbox.waitForWaits(session) { $0.contains { $0.kind == "timerfd" } }
        try session.advance(by: .seconds(10))
        #expect(run.line(startingWith: "expirations=") == "expirations=40 elapsed=\(10 * Self.second)")
        #expect(run.line(startingWith: "total=") == "total=40 next_in=250000000")
        #expect(run.exitStatus() == 0)
    }

    @Test("nanosleep interrupted by a signal reports the virtual time left (SA_RESTART or not)")
    func interruptedNanosleep() throws {
        let (sandbox, session) = try Sandbox.frozenSession("eintr")
        let run = try BackgroundProgram(sandbox, session: "eintr", [try CFixture.path("wait_probe"), "nanosleep-eintr", "100"])
        sandbox.waitForWaits(session) { $0.contains { $0.kind == "sleep" } }
        try session.advance(by: .seconds(30))
        kill(run.process.processIdentifier, SIGUSR1)  // timectl passes it on
        #expect(run.line(startingWith: "result=") == "result=EINTR left=\(70 * Self.second) elapsed=\(30 * Self.second)")
        #expect(run.exitStatus() == 0)
    }

    @Test("an absolute wall-clock deadline is passed by a set that jumps over it")
    func wallClockJump() throws {
        let (sandbox, session) = try Sandbox.frozenSession("jump")
        let run = try BackgroundProgram(sandbox, session: "jump", [try CFixture.path("wait_probe"), "abs-wall-sleep", "3600"])
        let waits = sandbox.waitForWaits(session) { !$0.isEmpty }
        #expect(waits.first?.clock == "CLOCK_REALTIME")
        #expect(waits.first?.deadline == "2016-01-01T13:00:00Z")
        try session.setWallClock(to: .relative(nanoseconds: 2 * 3600 * Self.second))
        #expect(run.line(startingWith: "result=") == "result=0 past_deadline=1 elapsed=0")
        #expect(run.exitStatus() == 0)
    }

    @Test("rate 100 makes a 20 s sleep take a hundredth of the real time, and never less than 20 virtual seconds")
    func rateScalesSleeps() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        try sandbox.session("fast").setRate(try TimeRate(parsing: "100"))
        let started = Date()
        let result = try sandbox.runAttached(session: "fast", ["python3", "-c", "import time; t = time.monotonic_ns(); time.sleep(20); print(time.monotonic_ns() - t)"])
        let virtual = try #require(Int64(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(virtual >= 20 * Self.second)
        // 0.2 s at rate 100, 20 s at rate 1: a guard far from both, so a loaded machine cannot fail it.
        #expect(Date().timeIntervalSince(started) < 10)
    }

    @Test("tick --to-next with sleepers due at +3 s and +7 s lands on +3 s and wakes only the first")
    func tickToNext() throws {
        let (sandbox, session) = try Sandbox.frozenSession("next")
        let run = try BackgroundProgram(sandbox, session: "next", ["sh", "-c", "sleep 3 & sleep 7 & wait"])
        let waits = sandbox.waitForWaits(session) { $0.count == 2 }
        let first = try #require(waits.first)
        let before = session.monotonicNanoseconds
        let result = try sandbox.timectl("--session", "next", "tick", "--to-next")
        #expect(result.status == 0)
        #expect(session.monotonicNanoseconds - before == 3 * Self.second)
        // One line: the jump, the wait it reached (as status lists it), where the wall clock stands.
        #expect(result.stdout == "+3s to the deadline of pid \(first.pid) (sleep): sleep on CLOCK_MONOTONIC; wall clock now 2016-01-01T12:00:03Z\n",
                "\(result)")
        let left = sandbox.waitForWaits(session) { $0.count == 1 }
        #expect(left.map(\.remainingNanoseconds) == [4 * Self.second])
        #expect(run.isRunning)
        try session.advanceToNextDeadline()
        #expect(session.monotonicNanoseconds - before == 7 * Self.second)
        #expect(run.exitStatus() == 0)
        let nothing = try sandbox.timectl("--session", "next", "tick", "--to-next")
        #expect(nothing.status == 1)
        #expect(nothing.stderr.contains("no pending wait"))
    }

    @Test("status --json lists pending waits with pid, thread, kind, clock and deadline")
    func statusListsWaits() throws {
        let (sandbox, session) = try Sandbox.frozenSession("listed")
        let run = try BackgroundProgram(sandbox, session: "listed", ["sleep", "42"])
        sandbox.waitForWaits(session) { !$0.isEmpty }
        let result = try sandbox.timectl("--session", "listed", "status", "--json")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        let waits = try #require(object["waits"] as? [[String: Any]])
        #expect(waits.count == 1)
        #expect(waits.first?["kind"] as? String == "sleep")
        #expect(waits.first?["clock"] as? String == "CLOCK_MONOTONIC")
        #expect(waits.first?["command"] as? String == "sleep")
        #expect(waits.first?["remaining_nanoseconds"] as? Int64 == 42 * Self.second)
        #expect((waits.first?["pid"] as? Int32).map { $0 > 0 } == true)
        #expect(waits.first?["thread"] as? Int32 == waits.first?["pid"] as? Int32)
        let text = try sandbox.timectl("--session", "listed", "status")
        #expect(text.stdout.contains("sleep on CLOCK_MONOTONIC, in 42s"))
        try session.advance(by: .seconds(42))
        #expect(run.exitStatus() == 0)
    }

    /// One reading of the wait table: what `status` prints from another
    /// process, what the library lists, what the scheduler steps to and
    /// what `tick --to-next` reaches are the same waits, clocks and deadlines.
    @Test("status, pendingWaits(), the scheduler and tick --to-next read the same waits")
    func oneReadingOfTheWaitTable() throws {
        let (sandbox, session) = try Sandbox.frozenSession("table")
        let wall = try BackgroundProgram(sandbox, session: "table", [try CFixture.path("wait_probe"), "abs-wall-sleep", "3600"])
        let sleeper = try BackgroundProgram(sandbox, session: "table", ["sleep", "20"])
        let listed = sandbox.waitForWaits(session) { $0.count == 2 }
        #expect(listed.map(\.clock) == ["CLOCK_MONOTONIC", "CLOCK_REALTIME"])
        #expect(listed.map(\.remainingNanoseconds) == [20 * Self.second, 3600 * Self.second])
        #expect(listed.map(\.deadline) == [nil, "2016-01-01T13:00:00Z"])
        #expect(listed.map(\.command) == ["sleep", "wait_probe"])

        let shown = try decodeStatus(try sandbox.timectl("--session", "table", "status", "--json")).waits
        let describe = { (wait: PendingWait) in
            "\(wait.pid)/\(wait.thread) \(wait.command) \(wait.kind) \(wait.clock) \(wait.deadlineNanoseconds) \(wait.remainingNanoseconds) \(wait.deadline ?? "-")"
        }
        #expect(shown.map(describe) == listed.map(describe))

        var loopGuard = LoopGuard(session: session)
        let evaluation = try session.harnessScheduler().settle(realTimeLimit: .seconds(30), loopGuard: &loopGuard)
        guard case .quiescent(let next) = evaluation else {
            Issue.record("the scheduler found no wait to step to: \(evaluation)")
            return
        }
        #expect(next == listed[0])

        let before = session.monotonicNanoseconds
        #expect(try sandbox.timectl("--session", "table", "tick", "--to-next").status == 0)
        #expect(session.monotonicNanoseconds - before == 20 * Self.second)
        #expect(sleeper.exitStatus() == 0)
        #expect(try session.advanceToNextDeadline()?.virtualClock == .realtime)
        #expect(session.wallClockNanoseconds == Sandbox.frozenStart + 3600 * Self.second)
        #expect(wall.exitStatus() == 0)
    }

    /// The reader skips only damage: every kind of wait the shim lists —
    /// a Go runtime's raw futex wait included — is read back with its name,
    /// an unknown kind is not.
    @Test("every kind of wait is read back with its name, by the library and by status")
    func everyKindIsRead() throws {
        let sandbox = try Sandbox()
        let session = try sandbox.session("kinds")
        let kinds: [(kind: tc_wait_kind, name: String)] = [
            (TC_WAIT_SLEEP, "sleep"), (TC_WAIT_POLL, "poll"), (TC_WAIT_SELECT, "select"), (TC_WAIT_EPOLL, "epoll"),
            (TC_WAIT_COND, "cond"), (TC_WAIT_SEM, "sem"), (TC_WAIT_MUTEX, "mutex"), (TC_WAIT_TIMERFD, "timerfd"),
            (TC_WAIT_TIMER, "timer"), (TC_WAIT_ALARM, "alarm"), (TC_WAIT_FUTEX, "futex"), (TC_WAIT_MQUEUE, "mqueue"),
            (TC_WAIT_SIGNAL, "sigwait"), (tc_wait_kind(14), "unknown"),
        ]
        let deadline = session.monotonicNanoseconds + 3600 * Self.second
        let slots = kinds.map { session.mapping.claimWait(pid: getpid(), thread: 0, kind: $0.kind, clock: .monotonic, deadline: deadline) }
        defer { for slot in slots { session.mapping.releaseWait(slot: slot, owner: tc_wait_owner(getpid(), 0)) } }
        try #require(slots.allSatisfy { $0 >= 0 })
        let expected = kinds.map(\.name).dropLast().sorted()
        #expect(session.pendingWaits().map(\.kind).sorted() == expected)
        #expect(try decodeStatus(try sandbox.timectl("--session", "kinds", "status", "--json")).waits.map(\.kind).sorted() == expected)
    }

    @Test("a killed waiter, an exiting process and a removed session leave nothing pending and nothing hanging")
    func robustness() throws {
        let (sandbox, session) = try Sandbox.frozenSession("robust")
        // Killed while waiting: its entry disappears from status.
        let killed = try BackgroundProgram(sandbox, session: "robust", ["sleep", "100"])
        let waits = sandbox.waitForWaits(session) { !$0.isEmpty }
        let pid = try #require(waits.first?.pid)
        kill(pid, SIGKILL)
        #expect(killed.exitStatus() == 128 + SIGKILL)
        #expect(sandbox.waitForWaits(session) { $0.isEmpty }.isEmpty)

        // A process that exits while one of its threads sleeps.
        let exiting = try BackgroundProgram(sandbox, session: "robust", ["python3", "-c", """
            import os, threading, time
            threading.Thread(target=time.sleep, args=(100,), daemon=True).start()
            time.sleep(1)
            os._exit(0)
            """])
        sandbox.waitForWaits(session) { $0.count == 2 }
        try session.advance(by: .seconds(1))
        #expect(exiting.exitStatus() == 0)
        #expect(sandbox.waitForWaits(session) { $0.isEmpty }.isEmpty)

        // Removing the session lets its waiters run out on real time instead of hanging.
        let orphaned = try BackgroundProgram(sandbox, session: "robust", ["sleep", "1"])
        sandbox.waitForWaits(session) { !$0.isEmpty }
        try session.remove(force: true)
        #expect(orphaned.exitStatus(guardSeconds: 30) == 0)
    }
}
