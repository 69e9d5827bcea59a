import Foundation
import Testing
@testable import TimeControlKit

/// aarch64 programs on a session of the native timectl, under emulation
/// (issue 32, SPEC §12): the aarch64 build of the shim (scripts/test.sh
/// cross-compiles it beside the native one, in aarch64-linux-gnu/) and
/// programs built with Debian's cross compiler run under qemu-user. A guest
/// is a process of the host, so it maps the session's segment and sleeps on
/// its futexes like any attached process; qemu is started with the
/// environment ``ShimEnvironment`` gives, for the guest only (`-E`): qemu
/// itself is a host program and must not load the host's shim.
@Suite("aarch64 programs under qemu-user", .serialized)
struct AArch64Tests {
    static let start: Int64 = 1_451_649_600
    static let second: Int64 = 1_000_000_000
    static let directory = Build.binDirectory + "/aarch64-linux-gnu"
    static let shim = directory + "/" + ShimEnvironment.shimFileName
    static let qemu = "/usr/bin/qemu-aarch64"
    static let libraries = "/usr/aarch64-linux-gnu"

    /// The fixture SOURCE.c built for aarch64.
    func program(_ source: String, flags: [String] = []) throws -> String {
        let path = try CFixture.path(source + "_aarch64" + flags.joined(), source: source, compiler: "aarch64-linux-gnu-gcc", flags: flags)
        let header = try runProgram("/usr/bin/env", ["readelf", "-h", path], environment: ProcessInfo.processInfo.environment)
        try #require(header.stdout.contains("AArch64"), "\(path) is not an aarch64 program: \(header.stdout)")
        return path
    }

    func frozenSandbox() throws -> (Sandbox, TimeSession) {
        try #require(FileManager.default.fileExists(atPath: Self.shim),
                     "\(Self.shim) is missing: scripts/test.sh cross-compiles it (CC=aarch64-linux-gnu-gcc scripts/build-shim.sh)")
        try #require(FileManager.default.isExecutableFile(atPath: Self.qemu), "qemu-aarch64 is missing: scripts/install-deps.sh installs qemu-user")
        return try Sandbox.frozenSession("default")
    }

    /// qemu-aarch64's arguments to run `program` attached to `session`: the attachment's variables given to the guest.
    func guest(_ session: TimeSession, _ program: String, _ arguments: [String] = []) -> [String] {
        let attachment = ShimEnvironment(shimPath: Self.shim, segmentPath: session.segmentPath)
        let variables = attachment.variables(inheritedPreload: nil).flatMap { ["-E", "\($0.name)=\($0.value)"] }
        return ["-L", Self.libraries] + variables + [program] + arguments
    }

    func run(_ sandbox: Sandbox, _ session: TimeSession, _ program: String, _ arguments: [String] = []) throws -> ProcessResult {
        try runProgram(Self.qemu, guest(session, program, arguments), environment: sandbox.environment)
    }

    func background(_ sandbox: Sandbox, _ session: TimeSession, _ program: String, _ arguments: [String]) throws -> BackgroundProgram {
        try BackgroundProgram(executable: Self.qemu, guest(session, program, arguments), environment: sandbox.environment)
    }

    @Test("an aarch64 program reads the frozen session through every clock entry point, and a tick from the native timectl moves them all")
    func clockReads() throws {
        let (sandbox, session) = try frozenSandbox()
        let wall = Self.start * Self.second + 123_456_789
        try session.freeze(at: .absolute(nanosecondsSinceEpoch: wall))
        let probe = try program("clock_probe")
        let before = try run(sandbox, session, probe)
        #expect(before.status == 0 && before.stderr.isEmpty, "\(before)")
        let values = keyedValues(before.stdout)
        for name in ["CLOCK_REALTIME", "CLOCK_REALTIME_COARSE", "timespec_get", "syscall_clock_gettime_realtime", "__clock_gettime",
                     "ntp_gettime"] {
            #expect(values[name] == String(wall / (name == "ntp_gettime" ? 1000 : 1) * (name == "ntp_gettime" ? 1000 : 1)), "\(name): \(before)")
        }
        #expect(values["gettimeofday"] == String(wall / 1000 * 1000) && values["syscall_gettimeofday"] == values["gettimeofday"], "\(before)")
        #expect(values["time"] == String(Self.start * Self.second) && values["syscall_time"] == nil, "\(before)")
        let monotonic = session.monotonicNanoseconds
        for name in ["CLOCK_MONOTONIC", "CLOCK_MONOTONIC_COARSE", "syscall_clock_gettime_monotonic"] {
            #expect(values[name] == String(monotonic), "\(name): \(before)")
        }
        #expect(values["errno_after_reads"] == "12345", "\(before)")
        #expect(try sandbox.timectl("tick", "5").status == 0)
        let after = keyedValues(try run(sandbox, session, probe).stdout)
        #expect(after["CLOCK_REALTIME"] == String(wall + 5 * Self.second) && after["CLOCK_MONOTONIC"] == String(monotonic + 5 * Self.second),
                "\(after)")
    }

    @Test("an aarch64 program's 60 s sleep on a frozen session is listed, waits while frozen, and wakes exactly at tick --to-next")
    func sleepEndsAtTick() throws {
        let (sandbox, session) = try frozenSandbox()
        let run = try background(sandbox, session, try program("wait_probe"), ["nanosleep-eintr", "60"])
        #expect(run.line(startingWith: "ready") == "ready", "\(run.errorOutput)")
        let waits = sandbox.waitForWaits(session) { $0.contains { $0.kind == "sleep" } }
        #expect(waits.filter { $0.kind == "sleep" }.map(\.remainingNanoseconds) == [60 * Self.second], "\(waits)")
        usleep(500_000)
        #expect(run.isRunning, "the sleep ended on a frozen session: \(run.output)")
        let tick = try sandbox.timectl("tick", "--to-next")
        #expect(tick.status == 0 && tick.stdout.hasPrefix("+1m to the deadline"), "\(tick)")
        #expect(run.line(startingWith: "result=") == "result=0 left=0 elapsed=\(60 * Self.second)", "\(run.output) \(run.errorOutput)")
        #expect(run.exitStatus() == 0, "\(run.errorOutput)")
    }

    // wait_probe's waits of 5 virtual seconds, the kind status lists, and what the probe prints at the end.
    static let waits: [(arguments: [String], kind: String, expected: String)] = [
        (["poll", "5"], "poll", "result=0 revents=0 elapsed=5000000000"),
        (["select", "5"], "select", "result=0 set=0 left_us=0 elapsed=5000000000"),
        (["epoll", "5"], "epoll", "result=0 elapsed=5000000000"),
        (["cond", "realtime", "5"], "cond", "result=ETIMEDOUT flag=0 elapsed=5000000000"),
        (["cond-clockwait", "monotonic", "5"], "cond", "result=ETIMEDOUT flag=0 elapsed=5000000000"),
        (["sem", "monotonic", "5"], "sem", "result=ETIMEDOUT elapsed=5000000000"),
        (["timerfd-periodic", "5000", "1"], "timerfd", "expirations=1 elapsed=5000000000"),
        (["timer-thread", "5"], "timer", "notified=1 value=7 elapsed=5000000000"),
    ]
    // Not here: timers that signal the process (alarm, setitimer, SIGEV_SIGNAL). qemu-user queues a signal sent to
    // the process for whichever of its threads the host delivered it to, even one that blocks it (the shim's helper
    // thread does), where a kernel would pick a thread that takes it: docs/limits.md.

    @Test("an aarch64 program's poll, select, epoll, condition and semaphore waits, timerfd and thread-notified timer on a frozen session end only at the tick that reaches them",
          arguments: waits)
    func waitEndsAtTick(wait: (arguments: [String], kind: String, expected: String)) throws {
        let (sandbox, session) = try frozenSandbox()
        let run = try background(sandbox, session, try program("wait_probe"), wait.arguments)
        #expect(run.line(startingWith: "ready") == "ready", "\(run.errorOutput)")
        let waits = sandbox.waitForWaits(session) { $0.contains { $0.kind == wait.kind } }
        #expect(waits.filter { $0.kind == wait.kind }.map(\.remainingNanoseconds) == [5 * Self.second], "\(waits)")
        #expect(try sandbox.timectl("tick", "4").status == 0)
        usleep(300_000)
        #expect(run.isRunning, "ended before its deadline: \(run.output)")
        #expect(try sandbox.timectl("tick", "1").status == 0)
        let prefix = String(wait.expected.prefix { $0 != "=" }) + "="
        #expect(run.line(startingWith: prefix) == wait.expected, "\(run.output) \(run.errorOutput)")
        #expect(run.exitStatus() == 0, "\(run.output) \(run.errorOutput)")
    }

    @Test("under the native timectl daemon, an aarch64 program's sleeps, timed waits and raw futex waits made through syscall() end at exactly their virtual deadlines")
    func autoAdvanced() throws {
        let (sandbox, session) = try frozenSandbox()
        let daemon = try BackgroundProgram(sandbox, timectl: ["daemon"])
        defer { _ = try? sandbox.timectl("daemon", "--stop") }
        let deadline = Date().addingTimeInterval(30)
        while session.schedulerProcess == nil && Date() < deadline { usleep(10_000) }
        try #require(session.schedulerProcess?.pid == daemon.process.processIdentifier)

        let waitProbe = try program("wait_probe")
        for (arguments, expected) in [(["nanosleep-eintr", "30"], "result=0 left=0 elapsed=30000000000"),
                                      (["poll", "30"], "result=0 revents=0 elapsed=30000000000"),
                                      (["cond", "monotonic", "30"], "result=ETIMEDOUT flag=0 elapsed=30000000000"),
                                      (["timerfd-periodic", "30000", "1"], "expirations=1 elapsed=30000000000")] {
            let result = try run(sandbox, session, waitProbe, arguments)
            #expect(result.status == 0, "\(arguments): \(result)")
            let prefix = String(expected.prefix { $0 != "=" }) + "="
            #expect(result.lines.last { $0.hasPrefix(prefix) } == expected, "\(arguments): \(result)")
        }
        // Not futex_waitv, which qemu-user 7.2 does not have (ENOSYS).
        let futex = try run(sandbox, session, try program("futex_probe"),
                            ["relative:3", "absolute:2", "realtime:1", "lockpi:1", "lockpi2:1", "woken:60"])
        #expect(futex.status == 0, "\(futex)")
        #expect(futex.lines.filter { !$0.hasPrefix("waiting ") } ==
                ["relative ETIMEDOUT 3.000000000", "absolute ETIMEDOUT 2.000000000", "realtime ETIMEDOUT 1.000000000",
                 "lockpi ETIMEDOUT 1.000000000", "lockpi2 ETIMEDOUT 1.000000000", "woken 0 0.000000000"],
                "\(futex)")
        #expect(try sandbox.timectl("daemon", "--stop").status == 0)
        #expect(daemon.exitStatus() == 0, "\(daemon.errorOutput)")
    }

    @Test("an aarch64 program's fork and exec and posix_spawn of another aarch64 program keep it attached (exec'd through a private binfmt_misc)",
          .enabled(if: geteuid() == 0, "as a user other than root, the private binfmt_misc's user namespace shows the session's segment under another owner, and the shim refuses it (docs/limits.md)"))
    func forkAndExec() throws {
        let (sandbox, session) = try frozenSandbox()
        let spawner = try program("spawn_probe")
        let printer = try program("print_time")
        let result = try runProgram(Build.packageRoot + "/scripts/with-aarch64-binfmt.sh", [Self.qemu] + guest(session, spawner, [printer]),
                                    environment: sandbox.environment)
        #expect(result.status == 0 && result.stderr.isEmpty, "\(result)")
        #expect(result.lines == ["\(Self.start)", "forked=0", "\(Self.start)", "spawned=0"], "\(result)")
    }

    @Test("a static aarch64 program under qemu-user is refused with one line by the aarch64 static loader, never run on real time: qemu-user gives its guest no vDSO to redirect (nor applies a seccomp filter), which the loader's takeover needs")
    func staticProgramRefused() throws {
        let (sandbox, session) = try frozenSandbox()
        let loader = Self.directory + "/" + ShimEnvironment.staticLoaderName
        try #require(FileManager.default.isExecutableFile(atPath: loader), "\(loader) is missing: scripts/build-shim.sh builds it beside the shim")
        let printer = try program("print_time", flags: ["-static"])
        let result = try run(sandbox, session, loader, [printer, printer])
        #expect(result.status == 126 && result.stdout.isEmpty, "\(result)")
        #expect(result.stderr == "timectl: cannot run \(printer): its vDSO clock reads could not be redirected\n", "\(result)")
    }
}
