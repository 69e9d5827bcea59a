import Foundation
import Testing
import TimeShimC
@testable import TimeControlKit

/// Statically linked C programs on the session's timeline (issue 14 part 2,
/// docs/go-and-static.md): they cannot load the shim, so `timectl run` and
/// the shim at exec start them through timectl-static-loader, which maps
/// them and hands them to the shim. (Static Go programs: GoProgramTests.)
@Suite("Static programs", .serialized)
struct StaticProgramTests {
    static let start: Int64 = 1_451_649_600
    static let second: Int64 = 1_000_000_000

    enum Linking: String, CaseIterable { case staticExecutable = "-static", staticPIE = "-static-pie" }

    /// The fixture compiled with `build`, after checking that it has no dynamic loader (so the test means what it says).
    func staticProgram(_ source: String, _ build: Linking = .staticExecutable) throws -> String {
        let name = source + (build == .staticPIE ? "_static_pie" : "_static")
        let path = try CFixture.path(name, source: source, flags: [build.rawValue])
        let header = try runProgram("/usr/bin/env", ["readelf", "-lW", path], environment: ProcessInfo.processInfo.environment)
        try #require(!header.stdout.contains("INTERP") && header.stdout.contains("LOAD"), "\(path) is not static: \(header.stdout)")
        return path
    }

    func frozenSandbox() throws -> Sandbox {
        try Build.requireShim()
        let sandbox = try Sandbox()
        #expect(try sandbox.timectl("freeze", "@\(Self.start)").status == 0)
        return sandbox
    }

    @Test("a static C program reads the frozen clock, as the command and exec'd by a shell, Python's posix_spawn and env's PATH search",
          arguments: Linking.allCases)
    func readsFrozenClock(build: Linking) throws {
        let sandbox = try frozenSandbox()
        let program = try staticProgram("print_time", build)
        let directory = FilePaths.parent(of: program)
        let name = String(program.dropFirst(directory.count + 1))
        let commands: [[String]] = [
            [program],
            ["sh", "-c", program],
            ["python3", "-c", "import os, sys\npid = os.posix_spawn(sys.argv[1], [sys.argv[1]], os.environ)\nos.waitpid(pid, 0)", program],
            ["env", "PATH=\(directory):/usr/bin:/bin", name],
        ]
        for command in commands {
            let result = try sandbox.timectl(["run", "--"] + command)
            #expect(result.status == 0, "\(command): \(result)")
            #expect(result.stdout == "\(Self.start)\n", "\(command): \(result)")
            #expect(result.stderr.isEmpty, "\(command): \(result)")
        }
    }

    @Test("a static C program's timed condition wait is listed by status as a futex wait, and ends at tick --to-next")
    func conditionWaitUntilTick() throws {
        let sandbox = try frozenSandbox()
        let session = try sandbox.session("default")
        let probe = try staticProgram("wait_probe")
        let run = try BackgroundProgram(sandbox, session: "default", [probe, "cond", "monotonic", "5"])
        #expect(run.line(startingWith: "ready") == "ready", "\(run.errorOutput)")
        let command = String("wait_probe_static".prefix(15))
        let waits = sandbox.waitForWaits(session) { waits in waits.contains { $0.command == command } }
        let wait = try #require(waits.first { $0.command == command }, "pending waits: \(waits)")
        #expect(wait.kind == "futex" && wait.remainingNanoseconds == 5 * Self.second, "\(wait)")
        usleep(500_000)
        #expect(run.isRunning, "the wait ended on a frozen session: \(run.output)")
        let tick = try sandbox.timectl("tick", "--to-next")
        #expect(tick.status == 0, "\(tick)")
        #expect(run.exitStatus(guardSeconds: 30) == 0, "\(run.output) \(run.errorOutput)")
        #expect(run.line(startingWith: "result=", guardSeconds: 1) == "result=ETIMEDOUT flag=0 elapsed=\(5 * Self.second)")
    }

    @Test("a static C program's sleeps, polls and timed waits run on virtual time under run --auto-advance", arguments: [
        (["nanosleep-eintr", "30"], "result=0 left=0 elapsed=30000000000"),
        (["poll", "30"], "result=0 revents=0 elapsed=30000000000"),
        (["select", "30"], "result=0 set=0 left_us=0 elapsed=30000000000"),
        (["pselect", "30"], "result=0 set=0 elapsed=30000000000"),
        (["epoll", "30"], "result=0 elapsed=30000000000"),
        (["cond", "realtime", "30"], "result=ETIMEDOUT flag=0 elapsed=30000000000"),
        (["sem", "monotonic", "30"], "result=ETIMEDOUT elapsed=30000000000"),
        (["mutex", "30"], "result=ETIMEDOUT elapsed=30000000000"),
        (["abs-wall-sleep", "30"], "result=0 past_deadline=1 elapsed=30000000000"),
    ])
    func waitsOnVirtualTime(arguments: [String], expected: String) throws {
        let sandbox = try frozenSandbox()
        let probe = try staticProgram("wait_probe")
        let started = Date()
        let result = try sandbox.timectl(["run", "--auto-advance", "--", probe] + arguments, guardSeconds: 60)
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.split(separator: "\n").last.map(String.init) == expected, "\(result)")
        #expect(Date().timeIntervalSince(started) < 25, "30 virtual seconds took most of their real time")
    }

    // Timers that are not waits — alarm, setitimer, POSIX timers (a signal, or glibc's SIGEV_THREAD helper
    // thread) and timerfds — are raw system calls in a static program, trapped and run by the shim's timers.
    static let timers: [(mode: String, kind: String, outcome: String)] = [
        ("alarm", "alarm", "signal=SIGALRM initially_left=SECONDS"),
        ("setitimer", "alarm", "signal=SIGALRM initially_left=SECONDS"),
        ("timer-signal", "timer", "signal=SIGUSR2 code=SI_TIMER value=42"),
        ("timer-thread", "timer", "notified=1 value=7"),
        ("timerfd-periodic", "timerfd", "expirations=1"),
    ]

    /// wait_probe's arguments for a timer of `seconds`, and the line it prints when the timer fires then.
    func timerProbe(_ mode: String, _ outcome: String, seconds: Int64) -> (arguments: [String], line: String) {
        // timerfd-periodic INTERVAL_MS EXPIRATIONS_WANTED
        let arguments = mode == "timerfd-periodic" ? [mode, "\(seconds * 1000)", "1"] : [mode, "\(seconds)"]
        return (arguments, outcome.replacingOccurrences(of: "SECONDS", with: "\(seconds)") + " elapsed=\(seconds * Self.second)")
    }

    @Test("a static C program's alarm, setitimer, POSIX timers and timerfd fire on a frozen session only at the tick that reaches them",
          arguments: timers)
    func timerFiresAtTick(mode: String, kind: String, outcome: String) throws {
        let sandbox = try frozenSandbox()
        let session = try sandbox.session("default")
        let probe = try staticProgram("wait_probe")
        let (arguments, line) = timerProbe(mode, outcome, seconds: 5)
        let run = try BackgroundProgram(sandbox, session: "default", [probe] + arguments)
        // Armed before "ready" (the probe measures from there), so no tick may come before it.
        #expect(run.line(startingWith: "ready") == "ready", "\(run.errorOutput)")
        let waits = sandbox.waitForWaits(session) { $0.contains { $0.kind == kind } }
        #expect(waits.filter { $0.kind == kind }.map(\.remainingNanoseconds) == [5 * Self.second], "\(waits)")
        usleep(500_000)
        #expect(run.isRunning, "fired on a frozen session: \(run.output)")
        #expect(try sandbox.timectl("tick", "4").status == 0)
        usleep(300_000)
        #expect(run.isRunning, "fired before its deadline: \(run.output)")
        let left = session.pendingWaits().filter { $0.kind == kind }.map(\.remainingNanoseconds)
        #expect(left == [Self.second], "\(session.pendingWaits())")
        #expect(try sandbox.timectl("tick", "1").status == 0)
        let prefix = String(outcome.prefix { $0 != "=" }) + "="
        #expect(run.line(startingWith: prefix) == line, "\(run.output) \(run.errorOutput)")
        #expect(run.exitStatus() == 0, "\(run.output) \(run.errorOutput)")
    }

    @Test("under run --auto-advance a static C program's timers fire at exactly their virtual time", arguments: timers)
    func timerUnderAutoAdvance(mode: String, kind: String, outcome: String) throws {
        let sandbox = try frozenSandbox()
        let probe = try staticProgram("wait_probe")
        let (arguments, line) = timerProbe(mode, outcome, seconds: 30)
        let started = Date()
        let result = try sandbox.timectl(["run", "--auto-advance", "--", probe] + arguments, guardSeconds: 60)
        #expect(result.status == 0, "\(result)")
        let prefix = String(outcome.prefix { $0 != "=" }) + "="
        #expect(result.lines.first { $0.hasPrefix(prefix) } == line, "\(kind): \(result)")
        #expect(Date().timeIntervalSince(started) < 25, "30 virtual seconds took most of their real time")
    }

    @Test("a static C program's periodic POSIX timer, its signal blocked for 2 s, is delivered once with the 3 missed expirations as its overrun",
          arguments: ["usr1", "rt"])
    func timerOverrun(signal: String) throws {
        let sandbox = try frozenSandbox()
        let probe = try CFixture.path("timer_overrun_static", source: "timer_overrun", flags: ["-static"])
        let result = try sandbox.timectl(["run", "--auto-advance", "--", probe, signal], guardSeconds: 60)
        #expect(result.status == 0, "\(result)")
        let values = keyedValues(result.stdout)
        #expect(values["unblocked_at"] == "\(2 * Self.second)", "\(result)")
        #expect(values["delivered_while_blocked"] == "0" && values["deliveries"] == "1", "\(result)")
        #expect(values["si_overrun"] == "3" && values["timer_getoverrun"] == "3", "\(result)")
    }

    // Each trapped wait of a static program runs on a thread control block the shim lends it; 16 are ready
    // at start-up and more are started on demand. 40 threads in waits at once need more than the first 16.
    static let sleepers = 40

    /// wait_probe staggered-sleepers' "thread=I slept=NS" lines, as I → NS.
    func sleptByThread(_ lines: [String]) -> [Int: Int64] {
        var slept: [Int: Int64] = [:]
        for line in lines {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "=" }).map(String.init)
            if fields.count == 4, fields[0] == "thread", fields[2] == "slept", let thread = Int(fields[1]),
               let nanoseconds = Int64(fields[3]) {
                slept[thread] = nanoseconds
            }
        }
        return slept
    }

    /// Thread I of wait_probe staggered-sleepers waits I + 1 seconds.
    var expectedSleeps: [Int: Int64] {
        Dictionary(uniqueKeysWithValues: (0..<Self.sleepers).map { ($0, Int64($0 + 1) * Self.second) })
    }

    @Test("under run --auto-advance, 40 threads of a static C program in timed waits at once each wake at exactly their deadline")
    func manySimultaneousWaitsUnderAutoAdvance() throws {
        let sandbox = try frozenSandbox()
        let probe = try staticProgram("wait_probe")
        let result = try sandbox.timectl(["run", "--auto-advance", "--", probe, "staggered-sleepers", "\(Self.sleepers)"],
                                         guardSeconds: 120)
        #expect(result.status == 0, "\(result)")
        #expect(sleptByThread(result.lines) == expectedSleeps, "\(result)")
    }

    @Test("on a frozen session, status lists all 40 timed waits of a static C program's threads, and tick wakes each at its deadline")
    func manySimultaneousWaitsListed() throws {
        let sandbox = try frozenSandbox()
        let session = try sandbox.session("default")
        let probe = try staticProgram("wait_probe")
        let run = try BackgroundProgram(sandbox, session: "default", [probe, "staggered-sleepers", "\(Self.sleepers)"])
        #expect(run.line(startingWith: "ready") == "ready", "\(run.errorOutput)")
        let command = String("wait_probe_static".prefix(15))
        let mine = { (waits: [PendingWait]) in waits.filter { $0.command == command } }
        let waits = mine(sandbox.waitForWaits(session) { mine($0).count >= Self.sleepers })
        #expect(waits.map(\.remainingNanoseconds).sorted() == (1...Self.sleepers).map { Int64($0) * Self.second }, "\(waits)")
        #expect(Set(waits.map(\.kind)) == ["sleep", "futex"], "\(waits)")
        #expect(Set(waits.map(\.thread)).count == Self.sleepers, "\(waits)")
        let status = try sandbox.timectl("status")
        #expect(status.stdout.contains("waits       \(Self.sleepers) pending"), "\(status)")
        #expect(try sandbox.timectl("tick", "\(Self.sleepers)").status == 0)
        #expect(run.exitStatus(guardSeconds: 60) == 0, "\(run.output) \(run.errorOutput)")
        // One tick moved the clock past every deadline at once: each woke then, with the whole tick behind it.
        let ticked = Int64(Self.sleepers) * Self.second
        #expect(sleptByThread(run.lines) == expectedSleeps.mapValues { _ in ticked }, "\(run.output)")
    }

    // A static program's fork child without exec: the child has the forking thread only (no lender threads, no
    // grower, no helper of the shim's); the shim makes it its own, as a dynamic program's child. 20 threads in
    // waits at once need more lenders than the one the child starts with.
    static let forkedSleepers = 20

    /// fork_sleepers' "child thread=I slept=NS" lines as I → NS, and the child's main thread's as −1 → NS.
    func childSlept(_ lines: [String]) -> [Int: Int64] {
        var slept: [Int: Int64] = [:]
        for line in lines {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "=" }).map(String.init)
            guard fields.first == "child", let nanoseconds = fields.last.flatMap({ Int64($0) }) else { continue }
            if fields.count == 5, fields[1] == "thread", fields[3] == "slept", let thread = Int(fields[2]) {
                slept[thread] = nanoseconds
            } else if fields.count == 4, fields[1] == "main", fields[2] == "slept" {
                slept[-1] = nanoseconds
            }
        }
        return slept
    }

    /// Thread I of fork_sleepers' child waits I + 1 seconds, its main thread one second more than the last.
    func expectedChildSleeps(_ threads: Int) -> [Int: Int64] {
        var slept = Dictionary(uniqueKeysWithValues: (0..<threads).map { ($0, Int64($0 + 1) * Self.second) })
        slept[-1] = Int64(threads + 1) * Self.second
        return slept
    }

    @Test("under run --auto-advance, a static C program's fork child (no exec) with 20 threads in timed waits: each wait ends at exactly its deadline, and the parent reaps it",
          arguments: ["fork", "syscall-fork"])
    func forkChildWaitsUnderAutoAdvance(fork: String) throws {
        let sandbox = try frozenSandbox()
        let probe = try staticProgram("fork_sleepers")
        let result = try sandbox.timectl(["run", "--auto-advance", "--", probe, fork, "\(Self.forkedSleepers)"], guardSeconds: 120)
        #expect(result.status == 0, "\(result)")
        #expect(childSlept(result.lines) == expectedChildSleeps(Self.forkedSleepers), "\(result)")
        let last = Int64(Self.forkedSleepers + 1) * Self.second
        #expect(result.lines.last == "parent status=0 elapsed=\(last)", "\(result)")
    }

    @Test("on a frozen session, a static C program's fork child (no exec) is in status's processes, its threads' timed waits are listed under its pid, and each tick wakes the wait it reaches")
    func forkChildWaitsListedAndTicked() throws {
        let sandbox = try frozenSandbox()
        let session = try sandbox.session("default")
        let probe = try staticProgram("fork_sleepers")
        let threads = 5
        let run = try BackgroundProgram(sandbox, session: "default", [probe, "fork", "\(threads)"])
        let ready = try #require(run.line(startingWith: "child pid="), "\(run.errorOutput)")
        let child = try #require(Int32(String(ready.dropFirst("child pid=".count).prefix { $0.isNumber })), "\(ready)")
        let listed = sandbox.waitForWaits(session) { waits in waits.filter { $0.pid == child }.count >= threads + 1 }
        let waits: [PendingWait] = listed.filter { $0.pid == child }
        let deadlines = (1...threads + 1).map { Int64($0) * Self.second }
        #expect(waits.map(\.remainingNanoseconds).sorted() == deadlines, "\(listed)")
        #expect(Set(waits.map(\.kind)) == ["sleep", "futex", "poll"], "\(waits)")
        #expect(Set(waits.map(\.thread)).count == threads + 1, "\(waits)")
        #expect(listed.allSatisfy { $0.pid == child }, "only the child waits in time (the parent is in waitpid): \(listed)")

        let status = try decodeStatus(sandbox.timectl("status", "--json"))
        let parent = try #require(status.processes.first { $0.pid != child }, "\(status.processes)")
        #expect(Set(status.processes.map(\.pid)) == [parent.pid, child], "\(status.processes)")
        #expect(status.waits.filter { $0.pid == child }.count == threads + 1, "\(status.waits)")
        let text = try sandbox.timectl("status")
        #expect(text.stdout.contains("waits       \(threads + 1) pending"), "\(text)")

        // One second at a time: each tick reaches one deadline, and only the wait that has it ends, then.
        for second in 1...threads + 1 {
            #expect(try sandbox.timectl("tick", "1").status == 0)
            let woken = second <= threads ? "child thread=\(second - 1) slept=" : "child main slept="
            #expect(run.line(startingWith: woken) == woken + "\(Int64(second) * Self.second)", "\(run.output)")
            let left: [PendingWait] = sandbox.waitForWaits(session) { $0.filter { $0.pid == child }.count == threads + 1 - second }
            let remaining: [Int64] = left.filter { $0.pid == child }.map(\.remainingNanoseconds).sorted()
            let expected: [Int64] = deadlines.dropFirst(second).map { $0 - Int64(second) * Self.second }
            #expect(remaining == expected, "\(left)")
        }
        #expect(run.exitStatus(guardSeconds: 60) == 0, "\(run.output) \(run.errorOutput)")
        #expect(run.line(startingWith: "parent status=") == "parent status=0 elapsed=\(Int64(threads + 1) * Self.second)", "\(run.output)")
        #expect(childSlept(run.lines) == expectedChildSleeps(threads), "\(run.output)")
    }

    @Test("a static C program's armed timerfd, closed with its raw close, leaves status at once, tick --to-next has nothing to reach, and the shim drops it at the next verb")
    func closedTimerfdLeavesTheTable() throws {
        let sandbox = try frozenSandbox()
        let session = try sandbox.session("default")
        let probe = try staticProgram("wait_probe")
        let run = try BackgroundProgram(sandbox, session: "default", [probe, "timerfd-closed", "10"])
        let armed = try #require(run.line(startingWith: "armed pid="), "\(run.errorOutput)")
        let pid = try #require(Int32(armed.dropFirst("armed pid=".count)))
        let timerfds = { session.pendingWaits().filter { $0.pid == pid && $0.kind == "timerfd" } }
        let listed = sandbox.waitForWaits(session) { waits in waits.contains { $0.pid == pid && $0.kind == "timerfd" } }
        #expect(listed.filter { $0.pid == pid && $0.kind == "timerfd" }.map(\.remainingNanoseconds) == [10 * Self.second], "\(listed)")

        #expect(kill(pid, SIGUSR1) == 0)
        #expect(run.line(startingWith: "closed") == "closed", "\(run.output) \(run.errorOutput)")
        #expect(timerfds().isEmpty, "\(session.pendingWaits())")
        let status = try sandbox.timectl("status")
        #expect(!status.stdout.contains("timerfd"), "\(status)")
        let tick = try sandbox.timectl("tick", "--to-next")
        #expect(tick.status == 1 && tick.stderr.contains("nothing to advance to"), "\(tick)")

        // Readers skip it; the shim itself forgets it (and closes its duplicate) when the helper next looks, after a verb.
        #expect(try sandbox.timectl("tick", "1").status == 0)
        var buffer = session.mapping.makeWaitTableBuffer()
        var entries: [tc_wait_slot] = []
        for _ in 0..<200 {
            entries = []
            session.mapping.forEachWait(using: &buffer) { _, entry in
                if tc_wait_owner_pid(entry.owner) == pid && entry.kind == Int32(TC_WAIT_TIMERFD.rawValue) { entries.append(entry) }
            }
            if entries.isEmpty { break }
            usleep(10_000)
        }
        #expect(entries.isEmpty, "the shim still lists the closed timerfd")
        #expect(kill(pid, SIGUSR1) == 0)
        #expect(run.exitStatus() == 0, "\(run.output) \(run.errorOutput)")
        #expect(run.line(startingWith: "elapsed=", guardSeconds: 1) == "elapsed=\(Self.second)", "\(run.output)")
    }

    /// Whether this test process has CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE, which the loader needs to make
    /// /proc/PID/exe name the program (as root in CI).
    static var maySetExecutable: Bool {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("CapEff:") }),
              let capabilities = UInt64(line.dropFirst("CapEff:".count).trimmingCharacters(in: .whitespaces), radix: 16)
        else { return false }
        return capabilities & (1 << 21 | 1 << 40) != 0
    }

    @Test("a static C program sees itself in /proc as ps does: comm and cmdline are its own, readlink and realpath of /proc/self/exe name it, and /proc/self/exe is it where the loader may set it",
          arguments: [false, true])
    func procShowsTheProgram(withoutCapabilities: Bool) throws {
        let sandbox = try frozenSandbox()
        let program = try staticProgram("self_view")
        let resolved = try #require(realpath(program, nil).map { pointer in defer { free(pointer) }; return String(cString: pointer) })
        var command = [program, "one", "two three"]
        // Without capabilities (an ordinary user's case), through setpriv: only possible when this process has some.
        if withoutCapabilities && Self.maySetExecutable {
            command = ["setpriv", "--bounding-set=-all", "--inh-caps=-all"] + command
        }
        let exeIsProgram = Self.maySetExecutable && !withoutCapabilities
        let result = try sandbox.timectl(["run", "--"] + command)
        #expect(result.status == 0, "\(result)")
        #expect(result.lines == [
            "comm=self_view_stati", "cmdline=\(program)|one|two three", "readlink=\(resolved)", "readlink_pid=\(resolved)",
            "realpath=\(resolved)", "kernel_exe=\(exeIsProgram ? "program" : "other")",
        ], "\(result)")
    }

    @Test("what still cannot be loaded is refused: a static program started from a descriptor (fexecve)")
    func descriptorExecRefused() throws {
        let sandbox = try frozenSandbox()
        let program = try staticProgram("print_time")
        let result = try sandbox.timectl("run", "--", "python3", "-c",
                                         "import os, sys\nfd = os.open(sys.argv[1], os.O_RDONLY)\ntry:\n os.execve(fd, [sys.argv[1]], os.environ)\nexcept PermissionError: print('refused')",
                                         program)
        #expect(result.stdout == "refused\n", "\(result)")
        #expect(result.stderr.contains("refusing to exec (descriptor): statically linked, and started from a descriptor"), "\(result)")
    }
}
