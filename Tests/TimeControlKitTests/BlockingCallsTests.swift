import Foundation
import Testing
@testable import TimeControlKit

/// Every blocking call a common program makes has a class under auto-advance (SPEC §8; the table in
/// docs/scheduler.md, "Every blocking call"): lock waits are inside when the holder is attached and outside
/// when not, waits on System V and POSIX IPC and on signals are inside, and the timed ones wait on virtual
/// time. A wait the scheduler cannot read never makes a deadlock.
@Suite("Auto-advance: every blocking call classified")
struct BlockingCallsTests {
    /// `blocking_calls ARGUMENTS…` under `timectl run --auto-advance`, and the real seconds it took.
    static func probe(_ sandbox: Sandbox, _ arguments: [String], environment: [String: String] = [:]) throws -> (ProcessResult, Double) {
        let start = Date()
        let result = try sandbox.timectl(["run", "--at", "@1451649600", "--auto-advance", "--", try CFixture.path("blocking_calls")] + arguments,
                                         environment: environment, guardSeconds: 120)
        return (result, Date().timeIntervalSince(start))
    }

    @Test("a lock wait whose holder is attached is inside: the holder's 60 s sleep is skipped, the lock comes at +60 s exactly",
          arguments: ["flock", "fcntl", "ofd", "lockf"])
    func lockHeldInside(kind: String) throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let (result, real) = try Self.probe(sandbox, ["lock", kind, sandbox.directory + "/lock", "60000"])
        #expect(result.status == 0 && result.stdout == "60000 ms \(kind) 0 ok\n", "\(result)")
        #expect(real < 30, "60 s of virtual time took \(real) s of real time: the lock wait held the jump")
    }

    @Test("a lock held by a process outside the session holds the jump: the lock comes before a 30 s sleep beside it ends",
          arguments: ["flock", "fcntl", "ofd", "lockf"])
    func lockHeldOutside(kind: String) throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let file = sandbox.directory + "/lock"
        _ = FileManager.default.createFile(atPath: file, contents: nil)
        // Python's fcntl.flock is flock(2); fcntl.lockf is a POSIX lock, which conflicts with fcntl, OFD and lockf locks.
        let take = kind == "flock" ? "fcntl.flock(f, fcntl.LOCK_EX)" : "fcntl.lockf(f, fcntl.LOCK_EX)"
        let holder = try BackgroundProgram(executable: "/usr/bin/env", ["python3", "-c", """
            import fcntl, sys, time
            f = open(sys.argv[1], "r+")
            \(take)
            print("held", flush=True)
            time.sleep(1)
            """, file], environment: sandbox.environment)
        _ = try #require(holder.line(startingWith: "held"), "\(holder.errorOutput)")
        let (result, _) = try Self.probe(sandbox, ["lock-held", kind, file, "30000"])
        #expect(result.status == 0 && result.stdout.contains(" ms locked-first 0 ok"), "\(result)")
        #expect(holder.exitStatus() == 0)
    }

    @Test("flock -w from util-linux, its holder a flock of the run: 60 s skipped; with -w 5 it gives up after exactly 5 s")
    func utilLinuxFlock() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let script = """
            cd "$1" && flock lock sleep 60 & sleep 0.1
            a=$(date +%s%N); flock -w 5 "$1/lock" true; echo "gave up $? after $(( $(date +%s%N) - a ))"
            a=$(date +%s%N); flock -w 100 "$1/lock" true; echo "locked $? after $(( $(date +%s%N) - a ))"
            wait
            """
        let start = Date()
        let result = try sandbox.runAutoAdvanced(["sh", "-c", script, "sh", sandbox.directory], guardSeconds: 120)
        #expect(result.lines == ["gave up 1 after 5000000000", "locked 0 after 54900000000"], "\(result)")
        #expect(Date().timeIntervalSince(start) < 30, "the waits held the jumps")
    }

    @Test("Python's fcntl.flock, held by another Python process of the run for 3600 s: the wait ends at +3600 s")
    func pythonFlock() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let script = """
            import fcntl, os, sys, time
            path = sys.argv[1]
            open(path, "w").close()
            ready_r, ready_w = os.pipe()
            if os.fork() == 0:
                f = open(path, "r+"); fcntl.flock(f, fcntl.LOCK_EX); os.write(ready_w, b"x"); time.sleep(3600); os._exit(0)
            os.read(ready_r, 1)
            start = time.monotonic_ns()
            f = open(path, "r+"); fcntl.flock(f, fcntl.LOCK_EX)
            print("locked after", time.monotonic_ns() - start)
            os.wait()
            """
        let result = try sandbox.runAutoAdvanced(["python3", "-c", script, sandbox.directory + "/lock"], guardSeconds: 120)
        let elapsed = result.lines.first.flatMap { Int64($0.dropFirst("locked after ".count)) } ?? 0
        #expect(result.status == 0 && elapsed >= 3_599_000_000_000 && elapsed <= 3_600_000_000_000, "\(result)")
    }

    @Test("waits on a System V semaphore or message queue, a POSIX message queue, a signal: inside, each ends at the child's +5 s",
          arguments: [("semop", "semop 0 ok"), ("msgrcv", "msgrcv 8 ok"), ("mq_receive", "mq_receive 5 ok"),
                      ("sigwaitinfo", "sigwaitinfo 10 ok"), ("pause", "pause -1 Interrupted system call")])
    func ipcAndSignalWaits(mode: String, outcome: String) throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let (result, real) = try Self.probe(sandbox, [mode, "5000"])
        #expect(result.status == 0 && result.stdout == "5000 ms \(outcome)\n", "\(result)")
        #expect(real < 30)
    }

    @Test("semtimedop, mq_timedreceive, mq_timedsend and sigtimedwait time out on virtual time, exactly",
          arguments: [("semtimedop", "-1 Resource temporarily unavailable"), ("mq_timedreceive", "-1 Connection timed out"),
                      ("mq_timedsend", "-1 Connection timed out"), ("sigtimedwait", "-1 Resource temporarily unavailable")])
    func timedWaits(mode: String, outcome: String) throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let (result, real) = try Self.probe(sandbox, [mode, "7000"])
        #expect(result.status == 0 && result.stdout == "7000 ms \(mode) \(outcome)\n", "\(result)")
        #expect(real < 30)
    }

    @Test("on a frozen session, a 2 s semtimedop and sigtimedwait end after tick 2, not before, however much real time passes")
    func timedWaitsFollowTicks() throws {
        try Build.requireShim()
        let (sandbox, _) = try Sandbox.frozenSession("ipc")
        for mode in ["semtimedop", "sigtimedwait"] {
            let waiter = try BackgroundProgram(sandbox, session: "ipc", [try CFixture.path("blocking_calls"), mode, "2000"])
            usleep(300_000)
            #expect(waiter.process.isRunning, "\(mode) ended on a frozen session: \(waiter.output)")
            #expect(try sandbox.timectl("--session", "ipc", "tick", "2").status == 0)
            #expect(waiter.exitStatus() == 0)
            #expect(waiter.output.hasPrefix("2000 ms \(mode) -1 "), "\(waiter.output)")
        }
    }

    @Test("status names a lock wait and who holds the lock")
    func statusShowsLockHolder() throws {
        try Build.requireShim()
        let (sandbox, session) = try Sandbox.frozenSession("locks")
        defer { killAttachedProcesses(of: session) }
        let file = sandbox.directory + "/lock"
        let waiter = try BackgroundProgram(sandbox, session: "locks", [try CFixture.path("blocking_calls"), "lock", "flock", file, "60000"])
        var blocked: [BlockedThread] = []
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            blocked = session.status().blocked
            if blocked.contains(where: { $0.waitsOn.hasPrefix("flock on ") }) { break }
            usleep(20_000)
        }
        let wait = try #require(blocked.first { $0.waitsOn.hasPrefix("flock on ") }, "\(blocked)")
        #expect(wait.side == .inside && wait.waitsOn.contains("(locked by ") && wait.waitsOn.contains("blocking_calls"), "\(wait)")
        _ = waiter
    }

    @Test("a thread whose wait cannot be read (ping, a capability program, as another user) holds the jump and makes no deadlock",
          .enabled(if: OtherUser.unavailable == nil, "needs root to act as another user (CI runs as root)"),
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/ping"), "needs ping"))
    func unreadableWaitIsNoDeadlock() throws {
        try Build.requireShim()
        let nobody = try OtherUser()
        var environment = try Sandbox().environment
        environment["TIMECTL_DIR"] = try nobody.ownDirectory("sessions")
        // ping gains a capability at exec: the kernel drops LD_PRELOAD for it and hides its /proc files from its own user.
        let result = try nobody.run(nobody.timectl, ["run", "--auto-advance", "--allow-uncontrolled", "--",
                                                     "sh", "-c", "ping -c 2 -i 0.5 127.0.0.1 > /dev/null && echo pinged"],
                                    environment: environment)
        #expect(result.status == 0 && result.lines == ["pinged"], "\(result)")
        #expect(!result.stderr.contains("deadlock"), "\(result)")
    }
}
