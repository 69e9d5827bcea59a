import Foundation
import Testing
@testable import TimeControlKit

/// Programs linked with musl (Alpine's C library), built here with Debian's
/// `musl-gcc` (issue 32, SPEC §12): a dynamically linked one is started by
/// musl's loader (`/lib/ld-musl-x86_64.so.1`), which cannot load the glibc
/// build of the shim, so timectl and the shim preload the musl build,
/// `libTimeShim-musl.so`, from beside it; a static one runs through the
/// static loader like any static program.
@Suite("Musl programs", .serialized)
struct MuslProgramTests {
    static let start: Int64 = 1_451_649_600
    static let second: Int64 = 1_000_000_000

    enum Linking: String, CaseIterable { case dynamic, `static` }

    /// The fixture SOURCE.c built with musl-gcc, checked to be what the test means (musl's loader, or none).
    func muslProgram(_ source: String, _ linking: Linking = .dynamic) throws -> String {
        let path = try CFixture.path(source + "_musl_" + linking.rawValue, source: source, compiler: "musl-gcc",
                                     flags: linking == .static ? ["-static"] : [])
        let header = try runProgram("/usr/bin/env", ["readelf", "-lW", path], environment: ProcessInfo.processInfo.environment)
        switch linking {
        case .dynamic: try #require(header.stdout.contains("/lib/ld-musl-"), "\(path) is not started by musl's loader: \(header.stdout)")
        case .static: try #require(!header.stdout.contains("INTERP") && header.stdout.contains("LOAD"), "\(path) is not static: \(header.stdout)")
        }
        return path
    }

    static let muslShim = Build.binDirectory + "/" + ShimEnvironment.muslShimFileName

    func frozenSandbox() throws -> Sandbox {
        try Build.requireShim()
        try #require(FileManager.default.fileExists(atPath: Self.muslShim),
                     "\(Self.muslShim) is missing: scripts/build.sh builds it with musl-gcc (scripts/install-deps.sh installs musl-tools)")
        let sandbox = try Sandbox()
        #expect(try sandbox.timectl("freeze", "@\(Self.start)").status == 0)
        return sandbox
    }

    @Test("a musl program prints the frozen date, as the command and started by a shell", arguments: Linking.allCases)
    func printsFrozenDate(linking: Linking) throws {
        let sandbox = try frozenSandbox()
        let program = try muslProgram("print_time", linking)
        for command in [[program], ["sh", "-c", program]] {
            let result = try sandbox.timectl(["run", "--"] + command)
            #expect(result.status == 0 && result.stdout == "\(Self.start)\n" && result.stderr.isEmpty, "\(command): \(result)")
        }
    }

    @Test("a dynamically linked musl program reads the session through every clock entry point musl has")
    func everyClockEntryPoint() throws {
        let sandbox = try frozenSandbox()
        let session = try sandbox.session("default")
        let wall = Self.start * Self.second + 123_456_789
        try session.freeze(at: .absolute(nanosecondsSinceEpoch: wall))
        let probe = try muslProgram("clock_probe")
        let result = try sandbox.timectl("run", "--", probe)
        #expect(result.status == 0, "\(result)")
        let values = keyedValues(result.stdout)
        for name in ["CLOCK_REALTIME", "CLOCK_REALTIME_COARSE", "timespec_get", "syscall_clock_gettime_realtime"] {
            #expect(values[name] == String(wall), "\(name): \(result)")
        }
        for name in ["gettimeofday", "syscall_gettimeofday"] {
            #expect(values[name] == String(wall / 1000 * 1000), "\(name): \(result)")
        }
        #expect(values["time"] == String(Self.start * Self.second), "\(result)")
        #expect(values["syscall_time"] == values["time"], "\(result)")
        for name in ["CLOCK_MONOTONIC", "CLOCK_MONOTONIC_COARSE", "syscall_clock_gettime_monotonic"] {
            #expect(values[name] == String(session.monotonicNanoseconds), "\(name): \(result)")
        }
        #expect(values["errno_after_reads"] == "12345", "successful reads leave errno alone: \(result)")
    }

    @Test("a musl program's 60 s sleep on a frozen session is listed, waits while frozen, and wakes exactly at tick --to-next",
          arguments: Linking.allCases)
    func sleepEndsAtTick(linking: Linking) throws {
        let sandbox = try frozenSandbox()
        let session = try sandbox.session("default")
        let probe = try muslProgram("wait_probe", linking)
        let run = try BackgroundProgram(sandbox, session: "default", [probe, "nanosleep-eintr", "60"])
        #expect(run.line(startingWith: "ready") == "ready", "\(run.errorOutput)")
        let waits = sandbox.waitForWaits(session) { $0.contains { $0.kind == "sleep" } }
        #expect(waits.filter { $0.kind == "sleep" }.map(\.remainingNanoseconds) == [60 * Self.second], "\(waits)")
        usleep(500_000)
        #expect(run.isRunning, "the sleep ended on a frozen session: \(run.output)")
        let tick = try sandbox.timectl("tick", "--to-next")
        #expect(tick.status == 0 && tick.stdout.hasPrefix("+1m to the deadline"), "\(tick)")
        #expect(run.exitStatus(guardSeconds: 30) == 0, "\(run.output) \(run.errorOutput)")
        #expect(run.line(startingWith: "result=", guardSeconds: 1) == "result=0 left=0 elapsed=\(60 * Self.second)")
    }

    // What wait_probe prints for each kind of wait, 30 virtual seconds long (its own timers' lines included).
    static let waits: [(arguments: [String], expected: String)] = [
        (["nanosleep-eintr", "30"], "result=0 left=0 elapsed=30000000000"),
        (["poll", "30"], "result=0 revents=0 elapsed=30000000000"),
        // musl's select leaves the caller's timeout as it was (it gives the kernel a copy), and so does the shim for it.
        (["select", "30"], "result=0 set=0 left_us=30000000 elapsed=30000000000"),
        (["pselect", "30"], "result=0 set=0 elapsed=30000000000"),
        (["epoll", "30"], "result=0 elapsed=30000000000"),
        (["cond", "realtime", "30"], "result=ETIMEDOUT flag=0 elapsed=30000000000"),
        (["cond", "monotonic", "30"], "result=ETIMEDOUT flag=0 elapsed=30000000000"),
        (["sem", "realtime", "30"], "result=ETIMEDOUT elapsed=30000000000"),
        (["mutex", "30"], "result=ETIMEDOUT elapsed=30000000000"),
        (["abs-wall-sleep", "30"], "result=0 past_deadline=1 elapsed=30000000000"),
        (["timerfd-periodic", "30000", "1"], "expirations=1 elapsed=30000000000"),
        (["setitimer", "30"], "signal=SIGALRM initially_left=30 elapsed=30000000000"),
        (["timer-signal", "30"], "signal=SIGUSR2 code=SI_TIMER value=42 elapsed=30000000000"),
        (["timer-thread", "30"], "notified=1 value=7 elapsed=30000000000"),
    ]

    @Test("under run --auto-advance a musl program's sleeps, polls, epoll, condition, semaphore and mutex waits, timerfd and POSIX timers end at exactly their virtual deadline",
          arguments: Linking.allCases, waits)
    func waitsUnderAutoAdvance(linking: Linking, wait: (arguments: [String], expected: String)) throws {
        let sandbox = try frozenSandbox()
        let probe = try muslProgram("wait_probe", linking)
        let result = try sandbox.timectl(["run", "--auto-advance", "--", probe] + wait.arguments, guardSeconds: 60)
        #expect(result.status == 0, "\(result)")
        let prefix = String(wait.expected.prefix { $0 != "=" }) + "="
        #expect(result.lines.last { $0.hasPrefix(prefix) } == wait.expected, "\(wait.arguments): \(result)")
    }

    @Test("a dynamically linked musl program's condition wait and POSIX timer on a frozen session end only at the tick that reaches them",
          arguments: [(["cond", "monotonic", "5"], "cond", "result=ETIMEDOUT flag=0 elapsed=5000000000"),
                      (["timer-signal", "5"], "timer", "signal=SIGUSR2 code=SI_TIMER value=42 elapsed=5000000000")])
    func waitEndsAtTick(arguments: [String], kind: String, expected: String) throws {
        let sandbox = try frozenSandbox()
        let session = try sandbox.session("default")
        let probe = try muslProgram("wait_probe")
        let run = try BackgroundProgram(sandbox, session: "default", [probe] + arguments)
        #expect(run.line(startingWith: "ready") == "ready", "\(run.errorOutput)")
        let waits = sandbox.waitForWaits(session) { $0.contains { $0.kind == kind } }
        #expect(waits.filter { $0.kind == kind }.map(\.remainingNanoseconds) == [5 * Self.second], "\(waits)")
        #expect(try sandbox.timectl("tick", "4").status == 0)
        usleep(300_000)
        #expect(run.isRunning, "ended before its deadline: \(run.output)")
        #expect(try sandbox.timectl("tick", "1").status == 0)
        let prefix = String(expected.prefix { $0 != "=" }) + "="
        #expect(run.line(startingWith: prefix) == expected, "\(run.output) \(run.errorOutput)")
        #expect(run.exitStatus() == 0, "\(run.output) \(run.errorOutput)")
    }

    @Test("programs of either C library start each other by fork and exec and by posix_spawn, each with the build of the shim it can load: a musl program starts glibc, static and musl programs, a glibc one starts musl ones")
    func librariesStartEachOther() throws {
        let sandbox = try frozenSandbox()
        let muslSpawner = try muslProgram("spawn_probe")
        let glibcSpawner = try CFixture.path("spawn_probe")
        let muslDynamic = try muslProgram("print_time")
        let muslStatic = try muslProgram("print_time", .static)
        let glibc = try CFixture.path("print_time")
        let glibcStatic = try CFixture.path("print_time_static", source: "print_time", flags: ["-static"])
        let cases = [(muslSpawner, glibc), (muslSpawner, glibcStatic), (muslSpawner, muslDynamic), (muslSpawner, muslStatic),
                     (glibcSpawner, muslDynamic), (glibcSpawner, muslStatic)]
        for (spawner, program) in cases {
            let result = try sandbox.timectl("run", "--", spawner, program)
            #expect(result.status == 0 && result.stderr.isEmpty, "\(spawner) \(program): \(result)")
            #expect(result.lines == ["\(Self.start)", "forked=0", "\(Self.start)", "spawned=0"], "\(spawner) \(program): \(result)")
        }
    }

    /// timectl and the glibc build of the shim alone, in a directory of their own: no musl build beside them.
    func withoutMuslBuild() throws -> String {
        let directory = try makeScratchDirectory("timectl-no-musl")
        for name in ["timectl", ShimEnvironment.shimFileName, ShimEnvironment.staticLoaderName] {
            try FileManager.default.copyItem(atPath: Build.binDirectory + "/" + name, toPath: directory + "/" + name)
        }
        return directory
    }

    @Test("without a musl build of the shim, a musl program is refused with one line (125 as the command; Permission denied, 126, started by a shell), never a loader error; let through, it runs on real time with a warning")
    func refusedWithoutMuslBuild() throws {
        let sandbox = try frozenSandbox()
        let program = try muslProgram("print_time")
        let directory = try withoutMuslBuild()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let timectl = directory + "/timectl"
        let refused = try runProgram(timectl, ["run", "--", program], environment: sandbox.environment)
        #expect(refused.status == 125 && refused.stdout.isEmpty, "\(refused)")
        #expect(refused.stderr.split(separator: "\n").count == 1 && refused.stderr.contains("linked with musl"), "\(refused)")
        #expect(refused.stderr.contains(ShimEnvironment.muslShimFileName) && !refused.stderr.contains("Error relocating"), "\(refused)")

        let byShell = try runProgram(timectl, ["run", "--", "sh", "-c", program], environment: sandbox.environment)
        #expect(byShell.status == 126 && byShell.stdout.isEmpty, "\(byShell)")
        let lines = byShell.stderr.split(separator: "\n")
        #expect(lines.contains { $0.contains("refusing to exec \(program): linked with musl") }, "\(byShell)")
        #expect(!byShell.stderr.contains("Error relocating"), "\(byShell)")

        let allowed = try runProgram(timectl, ["run", "--allow-uncontrolled", "--", program], environment: sandbox.environment)
        #expect(allowed.status == 0 && allowed.stderr.contains("warning") && !allowed.stderr.contains("Error relocating"), "\(allowed)")
        let printed = try #require(Int64(allowed.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), "\(allowed)")
        #expect(abs(printed - Int64(Date().timeIntervalSince1970)) < 60, "on real time: \(allowed)")
    }
}
