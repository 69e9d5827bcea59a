import Foundation
import Testing
@testable import TimeControlKit
import TimeShimC

/// The scheduler's two ways to look (docs/scheduler.md): reading every watched thread, and, where the kernel
/// lets it (root), reading only the threads its wake log names. Both must take the same decisions: the
/// scenarios below run with the log read from the first look (`TIMECTL_WAKE_LOG=always`) and never
/// (`off`, as for a user without the privilege).
@Suite("Auto-advance: looking from the kernel's wake log, and without it")
struct WakeLogTests {
    /// Whether this process may open the wake log (root, tracefs, perf events allowed).
    static let logAvailable: Bool = {
        guard let log = tc_wakelog_open() else { return false }
        tc_wakelog_close(log)
        return true
    }()

    static let modes = ["always", "off"]

    /// 200 Python threads blocked on a pipe the program holds, one more waiting on a pipe a child process writes
    /// after 10 s; that thread then sleeps 50 × 0.1 s. Prints the virtual time the last thread saw pass.
    static let idleThreads = """
        import os, threading, time
        idle_r, idle_w = os.pipe()
        news_r, news_w = os.pipe()
        def idle():
            os.read(idle_r, 1)
        def listener():
            start = time.monotonic_ns()
            os.read(news_r, 5)
            for _ in range(50):
                time.sleep(0.1)
            print(time.monotonic_ns() - start, flush=True)
        threads = [threading.Thread(target=idle) for _ in range(200)] + [threading.Thread(target=listener)]
        for thread in threads:
            thread.start()
        if os.fork() == 0:
            time.sleep(10)
            os.write(news_w, b"news!")
            os._exit(0)
        threads[-1].join()
        os.write(idle_w, b"x" * 200)
        for thread in threads:
            thread.join()
        os.wait()
        """

    @Test("a thread among 200 idle ones woken by another process after 10 s, then sleeping 50 × 0.1 s, sees exactly 15 s", arguments: modes)
    func idleThreadsAndOneWoken(mode: String) throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let result = try sandbox.timectl(["run", "--auto-advance", "--", "python3", "-c", Self.idleThreads],
                                         environment: ["TIMECTL_WAKE_LOG": mode], guardSeconds: 120)
        #expect(result.status == 0 && result.lines == ["15000000000"], "\(result)")
    }

    @Test("the same decisions: a deadlock reported with its three threads, exit 122", arguments: modes)
    func deadlock(mode: String) throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let result = try sandbox.timectl(["run", "--auto-advance", "--", "python3", InsideOutsideTests.fixture("two_locks.py")],
                                         environment: ["TIMECTL_WAKE_LOG": mode], guardSeconds: 120)
        #expect(result.status == 122, "\(result)")
        #expect(result.stderr.split(separator: "\n").filter { $0.contains(" python3: inside: futex") }.count == 3, "\(result.stderr)")
    }

    @Test("the same decisions: a pipe fed from outside holds the jump, and the sleep after it is skipped", arguments: modes)
    func pipeFromOutside(mode: String) throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let line = "(sleep 1; echo hello) | \"$0\" run --auto-advance -- sh -c 'read x; sleep 60; echo $x'"
        let start = Date()
        let result = try runProgram("/bin/sh", ["-c", line, Build.timectl],
                                    environment: sandbox.environment.merging(["TIMECTL_WAKE_LOG": mode]) { $1 }, guardSeconds: 60)
        #expect(result.status == 0 && result.lines == ["hello"] && !result.stderr.contains("deadlock"), "\(result)")
        #expect(Date().timeIntervalSince(start) < 30)
    }

    @Test("the same decisions: a shell loop of 100 sleeps, a new process each, is exactly 10 s", arguments: modes)
    func shellLoop(mode: String) throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let result = try sandbox.timectl(["run", "--at", "@1451649600", "--auto-advance", "--", "sh", "-c",
                                          "a=$(date +%s%N); for i in $(seq 100); do sleep 0.1; done; echo $(( $(date +%s%N) - a ))"],
                                         environment: ["TIMECTL_WAKE_LOG": mode], guardSeconds: 120)
        #expect(result.status == 0 && result.lines == ["10000000000"], "\(result)")
    }

    @Test("the same decisions: a flock wait whose holder sleeps 60 s in the run ends at +60 s", arguments: modes)
    func lockInside(mode: String) throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let (result, _) = try BlockingCallsTests.probe(sandbox, ["lock", "flock", sandbox.directory + "/lock", "60000"],
                                                       environment: ["TIMECTL_WAKE_LOG": mode])
        #expect(result.status == 0 && result.stdout == "60000 ms flock 0 ok\n", "\(result)")
    }

    @Test("as root, a run with 200 idle threads looks from the wake log: --report counts those looks",
          .enabled(if: WakeLogTests.logAvailable, "the kernel's wake log needs root, tracefs and perf events"))
    func logIsRead() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let result = try sandbox.timectl(["run", "--auto-advance", "--report", "--", "python3", "-c", Self.idleThreads], guardSeconds: 120)
        #expect(result.status == 0 && result.lines == ["15000000000"], "\(result)")
        let report = try #require(result.stderr.split(separator: "\n").first { $0.hasPrefix("timectl: auto-advance: ") }, "\(result)")
        let fromLog = report.split(separator: ";").last?.split(separator: ",").last?.split(separator: " ").first.flatMap { Int($0) } ?? 0
        #expect(fromLog > 0, "\(report)")
    }
}
