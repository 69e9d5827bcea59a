import Foundation
import Testing
@_spi(CommandLine) @testable import TimeControlKit

/// SPEC §3, "No real runtime starves" (docs/starvation.md): runtimes written for a clock that always creeps
/// forward run on a frozen or auto-advanced session. A spinner moves its own clocks by 10 ns a turn (1 ms after
/// 100,000 identical readings in a row, 100 µs after 10,000 futile waits); on a frozen session with no scheduler a relative sleep
/// of at most 10 ms is a yield. Assertions are on virtual time; real time only guards against hangs.
@Suite("No real runtime starves", .serialized)
struct StarvationTests {
    static let second: Int64 = 1_000_000_000
    static let millisecond: Int64 = 1_000_000
    /// What 10,000 futile waits in a row move a thread's clocks (10 ns each).
    static let creep: Int64 = 100_000
    /// What 100,000 identical readings in a row move them (10 ns each).
    static let readsCreep: Int64 = 1_000_000
    static let start = Sandbox.frozenStart

    @Test("the JVM starts, prints the frozen time and exits on a frozen clock with no tick, three times in a row")
    func jvmNeverSleeping() throws {
        let (sandbox, session) = try Sandbox.frozenSession("jvm")
        let classes = try JavaFixtures.classpath()
        for _ in 1...3 {
            let result = try sandbox.timectl(["--session", "jvm", "run", "--", "java", "-cp", classes, "Now"], guardSeconds: 60)
            #expect(result.status == 0, "\(result)")
            #expect(result.lines == ["1451649600000", "2016-01-01T12:00:00Z"], "\(result)")
        }
        #expect(session.wallClockNanoseconds == Self.start, "nothing spun: the clock never moved")
    }

    @Test("a JVM's Thread.sleep(3000) on a frozen clock waits for tick 3, ends right after, and measured 3000 ms")
    func jvmSleepingThreeSeconds() throws {
        let (sandbox, session) = try Sandbox.frozenSession("jvmsleep")
        let classes = try JavaFixtures.classpath()
        for _ in 1...3 {
            let run = try BackgroundProgram(sandbox, session: "jvmsleep", ["java", "-cp", classes, "Nap", "3000"])
            // Thread.sleep parks on a condition variable (CLOCK_MONOTONIC) for 3 s.
            sandbox.waitForWaits(session) { $0.contains { $0.kind == "cond" && $0.remainingNanoseconds == 3 * Self.second } }
            usleep(300_000)
            #expect(run.isRunning, "returned before its deadline: \(run.output)")
            try session.advance(by: .seconds(3))
            #expect(run.exitStatus() == 0, "\(run.output) \(run.errorOutput)")
            // Exactly 3 s, unless the sleeping JVM thread spun meanwhile and crept its clock (100 µs a time).
            let measured = Int64(run.lines.first ?? "") ?? -1
            #expect(measured >= 3 * Self.second && measured <= 3 * Self.second + Self.millisecond, "\(run.output)")
        }
    }

    /// The JVM's periodic task wakes every 50 ms of virtual time: some 72,000 scheduler steps for the hour,
    /// each one a full quiescence check of its ~20 threads. How fast is for scripts/bench-auto-advance.
    @Test("a JVM's Thread.sleep of one virtual hour under run --auto-advance measures 3600 s with System.nanoTime()")
    func jvmSleepingOneHourAutoAdvanced() throws {
        let (sandbox, session) = try Sandbox.frozenSession("jvmhour")
        let classes = try JavaFixtures.classpath()
        let before = session.monotonicNanoseconds
        let result = try sandbox.timectl(["--session", "jvmhour", "run", "--auto-advance", "--report", "--",
                                          "java", "-cp", classes, "Nap", "3600000"], guardSeconds: 180)
        #expect(result.status == 0, "\(result)")
        // Exactly an hour, unless the sleeping JVM thread spun meanwhile and crept its clock (100 µs a time).
        let measured = Int64(result.lines.first ?? "") ?? -1
        #expect(measured >= 3600 * Self.second && measured <= 3600 * Self.second + Self.millisecond, "\(result)")
        #expect(session.monotonicNanoseconds - before >= 3600 * Self.second, "the session itself moved the hour")
    }

    /// Ruby's sleep (hrtime_update_expire) ends only when now > end; at now == end it polls with a zero timeout.
    @Test("a program that needs the clock strictly past its deadline ends on a tick of exactly its sleep, on tick --to-next and under auto-advance",
          arguments: ["tick", "tick --to-next", "auto-advance"])
    func strictDeadline(how: String) throws {
        let (sandbox, session) = try Sandbox.frozenSession("strict")
        let probe = try CFixture.path("strict_deadline")
        let output: String
        if how == "auto-advance" {
            let result = try sandbox.timectl("--session", "strict", "run", "--auto-advance", "--", probe, "3000")
            #expect(result.status == 0, "\(result)")
            output = result.stdout
        } else {
            let run = try BackgroundProgram(sandbox, session: "strict", [probe, "3000"])
            sandbox.waitForWaits(session) { $0.contains { $0.kind == "poll" } }
            if how == "tick" { try session.advance(by: .seconds(3)) } else { _ = try session.advanceToNextDeadline() }
            #expect(run.exitStatus() == 0, "\(run.output)")
            output = run.output
        }
        let slept = Int64(output.split(separator: " ").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? -1
        // The tick lands exactly on the deadline; the probe then spins on zero-timeout polls, which creeps the clock.
        #expect(slept > 3 * Self.second && slept <= 3 * Self.second + Self.creep, "\(output)")
    }

    @Test("Ruby on a frozen clock prints the frozen time and exits with no tick, three times in a row; its sleep 3 waits for tick 3")
    func rubyFrozen() throws {
        let (sandbox, session) = try Sandbox.frozenSession("ruby")
        try Self.require("ruby")
        for _ in 1...3 {
            let result = try sandbox.timectl(["--session", "ruby", "run", "--", "ruby", "-e", "puts Time.now.strftime('%s%N')"],
                                             guardSeconds: 60)
            #expect(result.status == 0, "\(result)")
            #expect(result.lines == [String(Self.start)], "\(result)")
        }
        #expect(session.wallClockNanoseconds == Self.start, "nothing spun: the clock never moved")
        let run = try BackgroundProgram(sandbox, session: "ruby", ["ruby", "-e", """
            start = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
            sleep 3
            puts Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond) - start
            """])
        sandbox.waitForWaits(session) { $0.contains { $0.remainingNanoseconds == 3 * Self.second } }
        usleep(300_000)
        #expect(run.isRunning, "returned before its deadline: \(run.output)")
        try session.advance(by: .seconds(3))
        #expect(run.exitStatus() == 0, "\(run.output) \(run.errorOutput)")
        // Ruby's sleep ends only once now > end: at exactly its deadline it polls with a zero timeout, which creeps the clock.
        let slept = Int64(run.lines.first ?? "") ?? -1
        #expect(slept > 3 * Self.second && slept <= 3 * Self.second + Self.creep, "\(run.output)")
    }

    /// Each wait of Tests/Fixtures/ruby/waits.rb returns at its virtual deadline, later only by the creeps
    /// of Ruby's `now > end` checks (100 µs each).
    @Test("Ruby's Timeout, condition variable, sleeping threads and IO.select end at their virtual deadlines under run --auto-advance")
    func rubyAutoAdvanced() throws {
        let result = try Self.autoAdvanced("ruby", "ruby/waits.rb")
        let reported = keyedValues(result.stdout)
        let expected: [(String, Int64)] = [("timeout", 2000), ("condition", 3500), ("threads", 5000), ("select=nil", 5250)]
        #expect(reported.count == expected.count, "\(result)")
        for (what, milliseconds) in expected {
            let at = Int64(reported[what] ?? "") ?? -1
            #expect(at >= milliseconds * Self.millisecond && at <= milliseconds * Self.millisecond + Self.millisecond,
                    "\(what) at \(at) ns, deadline \(milliseconds) ms: \(result)")
        }
    }

    @Test("Node on a frozen clock prints the frozen Date.now() and exits with no tick, three times in a row; a setTimeout of 3 s waits for tick 3")
    func nodeFrozen() throws {
        let (sandbox, session) = try Sandbox.frozenSession("node")
        try Self.require("node")
        for _ in 1...3 {
            let result = try sandbox.timectl(["--session", "node", "run", "--", "node", "-e", "console.log(Date.now())"], guardSeconds: 60)
            #expect(result.status == 0, "\(result)")
            #expect(result.lines == [String(Self.start / Self.millisecond)], "\(result)")
        }
        #expect(session.wallClockNanoseconds == Self.start, "nothing spun: the clock never moved")
        let run = try BackgroundProgram(sandbox, session: "node", ["node", "-e", """
            const start = process.hrtime.bigint();
            setTimeout(() => console.log(String(process.hrtime.bigint() - start)), 3000);
            """])
        sandbox.waitForWaits(session) { $0.contains { $0.kind == "epoll" } }
        usleep(300_000)
        #expect(run.isRunning, "returned before its deadline: \(run.output)")
        try session.advance(by: .seconds(3))
        #expect(run.exitStatus() == 0, "\(run.output) \(run.errorOutput)")
        // libuv keeps its loop time in whole milliseconds: the timer is due 3000 ms after a truncated start.
        let waited = Int64(run.lines.first ?? "") ?? -1
        #expect(waited > 3 * Self.second - Self.millisecond && waited <= 3 * Self.second + Self.millisecond, "\(run.output)")
    }

    /// Each timer of Tests/Fixtures/node/timers.js fires at its virtual deadline, within the millisecond
    /// that libuv's loop time (whole milliseconds) allows either way.
    @Test("Node's setTimeout, setInterval, an awaited timer and timers/promises fire at their virtual deadlines under run --auto-advance")
    func nodeAutoAdvanced() throws {
        let result = try Self.autoAdvanced("node", "node/timers.js")
        let fired = Dictionary(result.lines.compactMap { line -> (String, (Int64, Int64))? in
            let fields = line.split(separator: " ")
            guard fields.count == 3, let at = Int64(fields[1]), let wall = Int64(fields[2]) else { return nil }
            return (String(fields[0]), (at, wall))
        }, uniquingKeysWith: { first, _ in first })
        let expected: [(String, Int64)] = [("interval", 1500), ("timeout", 2000), ("promise", 3500), ("promises-api", 4500)]
        #expect(result.lines.map { String($0.split(separator: " ").first ?? "") } == expected.map(\.0), "in deadline order: \(result)")
        for (what, milliseconds) in expected {
            let (at, wall) = fired[what] ?? (-1, -1)
            #expect(abs(at - milliseconds * Self.millisecond) <= Self.millisecond, "\(what) at \(at) ns, deadline \(milliseconds) ms: \(result)")
            // The wall clock moved with the steps: the frozen start plus the virtual time that passed.
            #expect(abs(wall - (Self.start / Self.millisecond + milliseconds)) <= 1, "\(what) at wall \(wall) ms: \(result)")
        }
    }

    @Test("1000 uuid.uuid1() on a frozen clock finish, all different; only the spinning thread's clock crept")
    func timeBasedUUIDs() throws {
        let (sandbox, session) = try Sandbox.frozenSession("uuid")
        let result = try sandbox.runAttached(session: "uuid", ["python3", "-c", """
            import time, uuid
            start = time.time_ns()
            ids = {uuid.uuid1() for _ in range(1000)}
            print(len(ids), time.time_ns() - start)
            """], guardSeconds: 60)
        let fields = result.stdout.split(whereSeparator: \.isWhitespace)
        #expect(fields.first == "1000", "\(result)")
        // libuuid allows 11 ids a microsecond, then spins on the clock: some 90 creeps of the thread's own clocks,
        // each of 1 ms after 100,000 identical readings.
        let crept = Int64(fields.last ?? "") ?? -1
        #expect(crept > 0 && crept <= 100 * Self.readsCreep && crept % Self.readsCreep == 0, "\(result)")
        // The session did not move: the creep is the thread's.
        #expect(session.wallClockNanoseconds == Self.start)
    }

    @Test("an SQLite busy timeout succeeds under auto-advance while another process holds the lock for 5 virtual seconds")
    func sqliteBusyTimeout() throws {
        let (sandbox, _) = try Sandbox.frozenSession("sqlite")
        let database = sandbox.directory + "/busy.db"
        let script = """
            python3 -c "import sqlite3; c = sqlite3.connect('$0'); c.execute('create table t(x)'); c.commit()"
            python3 -c "
            import sqlite3, time
            c = sqlite3.connect('$0', isolation_level=None)
            c.execute('BEGIN EXCLUSIVE'); c.execute('insert into t values (1)')
            time.sleep(5)
            c.execute('COMMIT')
            " &
            sleep 1
            python3 -c "
            import sqlite3, time
            start = time.monotonic_ns()
            c = sqlite3.connect('$0', timeout=30, isolation_level=None)
            c.execute('insert into t values (2)')
            print('waited', time.monotonic_ns() - start, 'rows', c.execute('select count(*) from t').fetchone()[0])
            "
            wait
            """
        let result = try sandbox.timectl("--session", "sqlite", "run", "--auto-advance", "--", "sh", "-c", script, database)
        #expect(result.status == 0, "\(result)")
        let fields = result.stdout.split(whereSeparator: \.isWhitespace)
        #expect(fields.count == 4 && fields[0] == "waited" && fields[2] == "rows" && fields[3] == "2", "\(result)")
        // It started at 1 s and could write only once the holder committed at 5 s (SQLite backs off in steps).
        let waited = Int64(fields.count == 4 ? String(fields[1]) : "") ?? -1
        #expect(waited >= 4 * Self.second && waited < 5 * Self.second, "\(result)")
    }

    /// swift-frontend makes time-based UUIDs (libuuid) and LLVM backs off on module-cache lock files: on an
    /// exact frozen clock the build spun for ever (0 steps in 400 s). About 10–30 s of real time here.
    @Test("run --auto-advance -- swift build of a freshly initialised package completes")
    func swiftBuild() throws {
        let (sandbox, _) = try Sandbox.frozenSession("swiftbuild")
        let package = sandbox.directory + "/Hello"
        try FileManager.default.createDirectory(atPath: package, withIntermediateDirectories: true)
        let initialised = try runProgram("/usr/bin/env", ["swift", "package", "--package-path", package, "init", "--type", "executable"],
                                         environment: ProcessInfo.processInfo.environment, guardSeconds: 120)
        try #require(initialised.status == 0, "\(initialised)")
        let built = try sandbox.timectl(["--session", "swiftbuild", "run", "--auto-advance", "--",
                                         "swift", "build", "--package-path", package], guardSeconds: 600)
        #expect(built.status == 0, "\(built)")
        #expect(built.stdout.contains("Build complete!"), "\(built)")
        #expect(FileManager.default.isExecutableFile(atPath: package + "/.build/debug/Hello"))
    }

    @Test("a relative sleep of at most 10 ms on a frozen session with no scheduler is a yield; a longer one waits")
    func shortSleepYields() throws {
        let (sandbox, session) = try Sandbox.frozenSession("yield")
        let yielded = try sandbox.runAttached(session: "yield", ["sh", "-c", "sleep 0.01; sleep 0.0005; date +%s%N"])
        #expect(yielded.stdout == "\(Self.start)\n", "no virtual time passed")
        let run = try BackgroundProgram(sandbox, session: "yield", ["sh", "-c", "sleep 0.0101; date +%s%N"])
        let waits = sandbox.waitForWaits(session) { $0.contains { $0.kind == "sleep" } }
        #expect(waits.map(\.remainingNanoseconds) == [10_100_000])
        _ = try session.advanceToNextDeadline()
        #expect(run.line(startingWith: "1") == String(Self.start + 10_100_000))
    }

    @Test("a condition wait with at most 10 ms to go on a frozen session with no scheduler is a yield; a longer one waits")
    func shortConditionWaitYields() throws {
        let (sandbox, session) = try Sandbox.frozenSession("condyield")
        let probe = try CFixture.path("wait_probe")
        let yielded = try sandbox.runAttached(session: "condyield", [probe, "cond-ms", "10"])
        #expect(yielded.stdout.contains("result=ETIMEDOUT flag=0 elapsed=0"), "\(yielded)")
        #expect(session.wallClockNanoseconds == Self.start, "no virtual time passed")
        let run = try BackgroundProgram(sandbox, session: "condyield", [probe, "cond-ms", "11"])
        let waits = sandbox.waitForWaits(session) { $0.contains { $0.kind == "cond" } }
        #expect(waits.map(\.remainingNanoseconds) == [11 * Self.millisecond])
        _ = try session.advanceToNextDeadline()
        #expect(run.exitStatus() == 0)
        #expect(run.output.contains("result=ETIMEDOUT flag=0 elapsed=\(11 * Self.millisecond)"), "\(run.output)")
    }

    /// Fails the test unless `interpreter` runs (`--version`): .ci/run installs ruby; node comes with the machine.
    static func require(_ interpreter: String) throws {
        let found = try runProgram("/usr/bin/env", [interpreter, "--version"], environment: ProcessInfo.processInfo.environment)
        try #require(found.status == 0, "\(interpreter) is not on PATH: \(found)")
    }

    /// `timectl run --auto-advance -- INTERPRETER Tests/Fixtures/SCRIPT` on a new frozen session; requires it to succeed.
    static func autoAdvanced(_ interpreter: String, _ script: String) throws -> ProcessResult {
        let (sandbox, _) = try Sandbox.frozenSession(interpreter)
        try require(interpreter)
        let result = try sandbox.timectl(["--session", interpreter, "run", "--auto-advance", "--", interpreter,
                                          Build.packageRoot + "/Tests/Fixtures/" + script], guardSeconds: 60)
        #expect(result.status == 0, "\(result)")
        return result
    }
}

/// The Java programs of Tests/Fixtures/java, compiled once per test run.
enum JavaFixtures {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var compiled: String?

    static func classpath() throws -> String {
        lock.lock()
        defer { lock.unlock() }
        if let compiled { return compiled }
        let output = CFixture.directory + "/java"
        try FileManager.default.createDirectory(atPath: output, withIntermediateDirectories: true)
        let sources = ["Now", "Nap", "WallNap"].map { Build.packageRoot + "/Tests/Fixtures/java/\($0).java" }
        // An explicit class path: javac's default is the working directory, whatever lies there.
        let result = try runProgram("/usr/bin/env", ["javac", "-cp", output, "-d", output] + sources, environment: ProcessInfo.processInfo.environment,
                                    guardSeconds: 120)
        try #require(result.status == 0, "javac (a JDK, e.g. Debian's default-jdk-headless): \(result)")
        compiled = output
        return output
    }
}
