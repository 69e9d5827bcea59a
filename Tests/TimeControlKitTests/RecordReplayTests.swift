import Foundation
import Testing
import TimeShimC
@testable import TimeControlKit

/// Record and replay (SPEC §5): real programs recorded, replayed, their
/// divergences reported, and traces checked and shown.
/// Serialized: these tests block on real processes, and in parallel they would take
/// every thread of the small cooperative pool from the asynchronous tests.
@Suite("Record and replay", .serialized)
struct RecordReplayTests {
    func sandbox() throws -> Sandbox {
        try Build.requireShim()
        return try Sandbox()
    }

    func record(_ sandbox: Sandbox, _ trace: String, _ command: [String]) throws -> ProcessResult {
        let result = try sandbox.timectl(["record", "--trace", trace, "--"] + command)
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.hasPrefix("timectl: recorded "), "\(result.stderr)")
        return result
    }

    @Test("python: a replay prints byte for byte what the recording printed, and skips the recorded sleep")
    func pythonReplaysExactly() throws {
        let sandbox = try sandbox()
        let trace = sandbox.directory + "/python.trace"
        let program = ["python3", "-c", "import time; print(time.time_ns()); time.sleep(0.2); print(time.time_ns(), time.monotonic_ns())"]
        let recorded = try record(sandbox, trace, program)
        #expect(recorded.lines.count == 2)
        for _ in 0..<3 {
            let replayed = try sandbox.timectl(["replay", trace, "--"] + program)
            #expect(replayed.status == 0, "\(replayed)")
            #expect(replayed.stdout == recorded.stdout)
            #expect(replayed.stderr == "", "no divergence: \(replayed.stderr)")
        }
        // The recorded 0.2 s sleep is a wait the replay's scheduler ends with a step, not real time.
        let outcome = try TraceReplayer.replay(trace, command: program, environment: sandbox.environmentEntries)
        #expect(outcome.status == 0)
        #expect(outcome.divergences.isEmpty)
        #expect(outcome.autoAdvance.steps >= 1)
    }

    @Test("a shell's three children each replay their own readings, though every pid differs")
    func shellChildren() throws {
        let sandbox = try sandbox()
        let trace = sandbox.directory + "/children.trace"
        let script = "for c in a b c; do (for i in 1 2 3; do echo \"$c $i $(date +%s%N)\"; done) & done; wait"
        let recorded = try record(sandbox, trace, ["sh", "-c", script])
        #expect(recorded.lines.count == 9)
        for _ in 0..<3 {
            let replayed = try sandbox.timectl("replay", trace, "--", "sh", "-c", script)
            #expect(replayed.status == 0, "\(replayed)")
            #expect(replayed.lines.sorted() == recorded.lines.sorted())
            #expect(replayed.stderr == "", "no divergence: \(replayed.stderr)")
        }
        // Without a command, the recorded one runs again.
        let again = try sandbox.timectl("replay", trace)
        #expect(again.lines.sorted() == recorded.lines.sorted())
    }

    @Test("each thread of a two-threaded C program replays its own readings")
    func twoThreads() throws {
        let sandbox = try sandbox()
        let trace = sandbox.directory + "/threads.trace"
        let probe = try CFixture.path("two_threads", flags: ["-pthread"])
        let recorded = try record(sandbox, trace, [probe])
        #expect(recorded.lines.count == 6)
        for _ in 0..<3 {
            let replayed = try sandbox.timectl("replay", trace, "--", probe)
            #expect(replayed.status == 0, "\(replayed)")
            #expect(replayed.lines.sorted() == recorded.lines.sorted())
        }
        let shown = try Trace(contentsOf: trace)
        let program = try #require(shown.processes.first { $0.arguments.first == probe })
        #expect(program.threads.map(\.number) == [1, 2], "the main thread read nothing: it has no events")
        #expect(program.threads.map { $0.events.filter(\.isReading).count } == [6, 6])
    }

    @Test("a replay that reads the clock more often reports where it diverged; --strict fails it")
    func divergence() throws {
        let sandbox = try sandbox()
        let trace = sandbox.directory + "/diverge.trace"
        let probe = try CFixture.path("two_threads", flags: ["-pthread"])
        _ = try record(sandbox, trace, [probe])
        let report = sandbox.directory + "/report.json"
        let replayed = try sandbox.timectl("replay", trace, "--report", report, "--", probe, "1")
        #expect(replayed.status == 0, "\(replayed)")
        let line = try #require(replayed.stderr.split(separator: "\n").first.map(String.init))
        #expect(line == "timectl: replay diverged in process 1 (\(probe) 1), thread 0, call 1: its recording ends there; it asked for clock_gettime(CLOCK_REALTIME)")
        #expect(replayed.stderr.split(separator: "\n").count == 1, "one divergence: \(replayed.stderr)")
        // The readings after it continue from the last value replayed (the threads' last readings
        // lie microseconds apart, and either may have been replayed last), moving with the session.
        let values = replayed.lines.map { $0.split(separator: " ") }
        let replayedWall = values.filter { $0[0] != "main" }.compactMap { Double($0[2]) }.max() ?? 0
        let extra = try #require(values.first { $0[0] == "main" }.flatMap { Double($0[2]) })
        #expect(extra >= replayedWall - 0.01 && extra < replayedWall + 10, "\(extra) after \(replayedWall)")

        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: report))) as? [String: Any]
        let divergences = try #require(json?["divergences"] as? [[String: Any]])
        #expect(divergences.count == 1)
        #expect(divergences.first?["process"] as? String == "1")
        #expect(divergences.first?["thread"] as? Int == 0)
        #expect(divergences.first?["call"] as? Int == 1)
        #expect(divergences.first?["reason"] as? String == "past-end")
        #expect(divergences.first?["asked"] as? String == "clock_gettime(CLOCK_REALTIME)")

        let strict = try sandbox.timectl("replay", trace, "--strict", "--", probe, "1")
        #expect(strict.status == 121, "\(strict)")
        #expect(strict.stderr.contains("replay diverged in process 1"))
        #expect(!strict.stdout.contains("main 1"), "the diverging process was stopped at the divergence")
    }

    @Test("a different reading is reported with what was recorded and what was asked")
    func differentReading() throws {
        let sandbox = try sandbox()
        let trace = sandbox.directory + "/clock.trace"
        _ = try record(sandbox, trace, ["python3", "-c", "import time; time.time(); time.time()"])
        // A clock the thread never read before (a reading that repeats a clock's last value is passed over: it
        // cannot show anything the recording did not).
        let replayed = try sandbox.timectl("replay", trace, "--", "python3", "-c",
                                           "import time; time.time(); time.clock_gettime(time.CLOCK_TAI); time.time()")
        #expect(replayed.status == 0, "\(replayed)")
        let line = replayed.stderr.split(separator: "\n").last.map(String.init) ?? ""
        #expect(line.contains("thread 0, call "), "\(replayed.stderr)")
        #expect(line.hasSuffix(": the recording has clock_gettime(CLOCK_REALTIME) next; it asked for clock_gettime(CLOCK_TAI)"), "\(line)")
    }

    @Test("a static C program (run through the loader) replays its readings and waits, and a longer run reports its divergence")
    func staticProgram() throws {
        let sandbox = try sandbox()
        let trace = sandbox.directory + "/static.trace"
        let probe = try CFixture.path("clock_series_static", source: "clock_series", flags: ["-static"])
        let recorded = try record(sandbox, trace, [probe])
        #expect(recorded.lines.count == 3)
        let program = try #require(try Trace(contentsOf: trace).processes.first)
        #expect(program.threads.map(\.number) == [0])
        #expect(program.threads.first?.events.filter(\.isReading).count == 6, "\(program)")
        for _ in 0..<3 {
            let replayed = try sandbox.timectl("replay", trace, "--", probe)
            #expect(replayed.status == 0, "\(replayed)")
            #expect(replayed.stdout == recorded.stdout)
            #expect(replayed.stderr == "", "no divergence: \(replayed.stderr)")
        }
        // Three rounds of two readings and a sleep: the fourth round's first reading is call 10.
        let longer = try sandbox.timectl("replay", trace, "--", probe, "4")
        #expect(longer.status == 0, "\(longer)")
        #expect(longer.lines.prefix(3) == recorded.lines.prefix(3), "\(longer)")
        let line = longer.stderr.split(separator: "\n").first.map(String.init) ?? ""
        #expect(line.hasSuffix("thread 0, call 10: its recording ends there; it asked for clock_gettime(CLOCK_REALTIME)"), "\(longer.stderr)")
        let strict = try sandbox.timectl("replay", trace, "--strict", "--", probe, "4")
        #expect(strict.status == 121, "\(strict)")
    }

    @Test("a static C program's fork child (no exec) is recorded as the parent's first child, and replays what it measured")
    func staticForkChild() throws {
        let sandbox = try sandbox()
        let trace = sandbox.directory + "/static-fork.trace"
        let probe = try CFixture.path("fork_sleepers_static", source: "fork_sleepers", flags: ["-static"])
        // No threads but the child's own: its one sleep and reading, the parent's two readings.
        let recorded = try record(sandbox, trace, [probe, "fork", "0"])
        let processes = try Trace(contentsOf: trace).processes
        #expect(processes.map(\.path) == ["1", "1.1"], "\(processes)")
        let child = try #require(processes.first { $0.path == "1.1" })
        #expect(child.threads.map(\.number) == [0], "\(child)")
        let events = child.threads.first?.events ?? []
        #expect(events.filter(\.isReading).count == 1 && events.contains {
            if case .waitBegan(let kind, _, _) = $0 { return kind == "sleep" } else { return false }
        }, "\(child)")
        // The child's pid differs in every run; what it and its parent measured does not.
        let measured = { (result: ProcessResult) in result.lines.filter { !$0.hasPrefix("child pid=") } }
        #expect(measured(recorded).count == 2, "\(recorded)")
        for _ in 0..<3 {
            let replayed = try sandbox.timectl("replay", trace, "--", probe, "fork", "0")
            #expect(replayed.status == 0, "\(replayed)")
            #expect(measured(replayed) == measured(recorded), "\(replayed)")
            #expect(replayed.stderr == "", "no divergence: \(replayed.stderr)")
        }
    }

    @Test("a Go program's readings are recorded, dynamic and static",
          arguments: [GoFixture.Linking.dynamic, .static])
    func goProgramRecorded(linking: GoFixture.Linking) throws {
        let sandbox = try sandbox()
        let trace = sandbox.directory + "/go.trace"
        let probe = try GoFixture.path("GoProbe", linking: linking)
        let recorded = try record(sandbox, trace, [probe, "sleep", "200ms"])
        let values = recorded.lines.map { $0.split(separator: " ") }
        let started = try #require(values.first { $0.first == "start" }.flatMap { Int64($0[1]) }, "\(recorded)")
        let readings = try Trace(contentsOf: trace).processes.flatMap { $0.threads.flatMap(\.events) }
        let wallSeconds = readings.compactMap { event -> Int64? in
            if case .reading(_, let clock, let value) = event, clock == CLOCK_REALTIME { return value / 1_000_000_000 }
            return nil
        }
        // time.Now() read the wall clock through the redirected vDSO, and the recording has what it returned.
        #expect(wallSeconds.contains(started), "\(wallSeconds) \(recorded)")
        #expect(readings.contains { if case .waitBegan = $0 { return true } else { return false } }, "the 200 ms sleep is a recorded wait")
    }

    /// Records go_replay (goroutines on several OS threads printing time.Now() and t2.Sub(t1) around sleeps).
    func recordGoReplay(_ sandbox: Sandbox, _ linking: GoFixture.Linking) throws -> (program: String, trace: String, recorded: ProcessResult) {
        let program = try GoFixture.path("go_replay", linking: linking)
        let trace = sandbox.directory + "/go-\(linking).trace"
        let recorded = try record(sandbox, trace, [program])
        #expect(recorded.lines.count == 5, "\(recorded)")
        // The recording is worth replaying: the wall clock was read on several OS threads, and each goroutine slept 700 ms.
        let threadsReadingWall = try Trace(contentsOf: trace).processes.flatMap(\.threads).filter { thread in
            thread.events.contains { if case .reading(_, let clock, _) = $0 { return clock == CLOCK_REALTIME } else { return false } }
        }
        #expect(threadsReadingWall.count >= 2, "\(threadsReadingWall.map(\.number))")
        for line in recorded.lines where line.hasPrefix("goroutine") {
            let sub = try #require(line.split(separator: " ").last.flatMap { Int64($0) }, "\(line)")
            #expect(sub >= 700_000_000, "t2.Sub(t1) spans the 700 ms sleep: \(line)")
        }
        return (program, trace, recorded)
    }

    @Test("a Go program's time.Now() calls from goroutines on several OS threads replay exactly, dynamic and static",
          arguments: [GoFixture.Linking.dynamic, .static])
    func goProgramReplaysExactly(linking: GoFixture.Linking) throws {
        let sandbox = try sandbox()
        let (program, trace, recorded) = try recordGoReplay(sandbox, linking)
        for _ in 0..<3 {
            let replayed = try sandbox.timectl("replay", trace, "--", program)
            #expect(replayed.status == 0, "\(replayed)")
            #expect(replayed.stdout == recorded.stdout, "\(replayed)")
            #expect(replayed.stderr == "", "no divergence: \(replayed.stderr)")
        }
        // The sleeps (2.1 s of them) are waits the replay's scheduler ends with steps, not real time.
        let outcome = try TraceReplayer.replay(trace, command: [program], environment: sandbox.environmentEntries)
        #expect(outcome.status == 0)
        #expect(outcome.divergences.isEmpty, "\(outcome.divergences)")
        #expect(outcome.autoAdvance.steps >= 1)
    }

    @Test("a Go program that asks for more time.Now() than recorded diverges once, and runs on; --strict stops it",
          arguments: [GoFixture.Linking.dynamic, .static])
    func goProgramDiverges(linking: GoFixture.Linking) throws {
        let sandbox = try sandbox()
        let (program, trace, recorded) = try recordGoReplay(sandbox, linking)
        let report = sandbox.directory + "/report.json"
        let replayed = try sandbox.timectl("replay", trace, "--report", report, "--", program, "3")
        #expect(replayed.status == 0, "\(replayed)")
        #expect(Array(replayed.lines.prefix(5)) == recorded.lines, "\(replayed)")
        let errors = replayed.stderr.split(separator: "\n")
        #expect(errors.count == 1, "one divergence for the process: \(replayed.stderr)")
        // main start, 3 goroutines × 2, main end: 8 time.Now() calls were recorded.
        #expect(errors.first?.hasPrefix("timectl: replay diverged in process 1 (") == true, "\(replayed.stderr)")
        #expect(errors.first?.contains("a Go program replayed as a whole: its recording has 8 wall-clock readings (time.Now()); thread ") == true,
                "\(replayed.stderr)")
        #expect(errors.first?.hasSuffix(" asked for one more, clock_gettime(CLOCK_REALTIME)") == true, "\(replayed.stderr)")
        // The wall clock continues from the last value replayed (main's end), moving with the session.
        let end = try #require(recorded.lines.last?.split(separator: " ").dropFirst(2).first.flatMap { Int64($0) }, "\(recorded)")
        let extra = replayed.lines.dropFirst(5).compactMap { $0.split(separator: " ").last.flatMap { Int64($0) } }
        #expect(extra.count == 3, "\(replayed)")
        #expect(extra == extra.sorted() && (extra.first ?? 0) >= end && (extra.last ?? .max) < end + 10_000_000_000, "\(extra) after \(end)")

        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: report))) as? [String: Any]
        let divergences = try #require(json?["divergences"] as? [[String: Any]])
        #expect(divergences.count == 1)
        #expect(divergences.first?["reason"] as? String == "go-past-end")
        #expect(divergences.first?["call"] as? Int == 9)

        let strict = try sandbox.timectl("replay", trace, "--strict", "--", program, "3")
        #expect(strict.status == 121, "\(strict)")
        #expect(strict.lines == recorded.lines, "stopped at its ninth time.Now(): \(strict)")
    }

    @Test("a truncated, corrupted, other-version or foreign trace is refused with one line, and nothing runs", arguments: [
        "truncated", "corrupted", "version", "foreign", "missing",
    ])
    func badTraces(damage: String) throws {
        let sandbox = try sandbox()
        let trace = sandbox.directory + "/good.trace"
        _ = try record(sandbox, trace, ["sh", "-c", "date +%s%N"])
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: trace)))
        let expected: String
        switch damage {
        case "truncated":
            bytes = Array(bytes.prefix(bytes.count - 7))
            expected = "is truncated"
        case "corrupted":
            bytes[bytes.count - 2] ^= 0x5a
            expected = "is corrupted (its checksum does not match its contents)"
        case "version":
            bytes[8] = 9
            expected = "has trace format version 9; this timectl reads versions \(TC_TRACE_OLDEST_VERSION)–\(TC_TRACE_VERSION)"
        case "foreign":
            bytes = Array("not a trace at all\n".utf8)
            expected = "is not a timectl trace"
        default:
            expected = "does not exist"
        }
        let damaged = sandbox.directory + "/damaged.trace"
        if damage != "missing" { try Data(bytes).write(to: URL(fileURLWithPath: damaged)) }
        let marker = sandbox.directory + "/ran"
        let replayed = try sandbox.timectl("replay", damaged, "--", "touch", marker)
        #expect(replayed.status == 125)
        #expect(replayed.stderr == "timectl: trace \(damaged) \(expected); nothing was run\n")
        #expect(!FileManager.default.fileExists(atPath: marker))
        for view in [["trace", "show", damaged], ["trace", "stats", damaged]] {
            let shown = try sandbox.timectl(view)
            #expect(shown.status == 1)
            #expect(shown.stderr == "timectl: trace \(damaged) \(expected)\n")
        }
    }

    @Test("trace show and stats describe the recording, for people and as JSON")
    func showAndStats() throws {
        let sandbox = try sandbox()
        let trace = sandbox.directory + "/shown.trace"
        let probe = try CFixture.path("two_threads", flags: ["-pthread"])
        _ = try record(sandbox, trace, [probe])
        let show = try sandbox.timectl("trace", "show", trace)
        #expect(show.status == 0)
        #expect(show.stdout.contains("process 1: \(probe) (pid "))
        #expect(show.stdout.contains("  thread 1:\n    1  clock_gettime(CLOCK_REALTIME) = 20"))
        #expect(show.stdout.contains("  clock_gettime(CLOCK_MONOTONIC) = "))
        #expect(show.stdout.contains("sleep on CLOCK_MONOTONIC until "))

        let json = try sandbox.timectl("trace", "show", "--json", trace)
        let decoded = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        let processes = try #require(decoded?["processes"] as? [[String: Any]])
        let program = try #require(processes.first { ($0["arguments"] as? [String])?.first == probe })
        #expect(program["path"] as? String == "1")
        let threads = try #require(program["threads"] as? [[String: Any]])
        let first = try #require((threads[1]["events"] as? [[String: Any]])?.first)
        #expect(first["type"] as? String == "reading")
        #expect(first["call"] as? String == "clock_gettime")
        #expect(first["clock"] as? String == "CLOCK_REALTIME")
        #expect(first["nanoseconds"] is Int)

        let stats = try sandbox.timectl("trace", "stats", "--json", trace)
        let counts = try JSONSerialization.jsonObject(with: Data(stats.stdout.utf8)) as? [String: Any]
        #expect(counts?["readings"] as? Int == 12)
        #expect((counts?["readings_by_clock"] as? [String: Int]) == ["CLOCK_REALTIME": 6, "CLOCK_MONOTONIC": 6])
        #expect(counts?["waits"] as? Int == 6)
        let text = try sandbox.timectl("trace", "stats", trace)
        #expect(text.stdout.contains("readings    12: CLOCK_MONOTONIC 6, CLOCK_REALTIME 6\n"), "\(text.stdout)")
    }

    @Test("a recording's working directory left by a killed timectl is removed by the next record; a live one is kept")
    func abandonedWorkingDirectories() throws {
        let sandbox = try sandbox()
        #expect(try sandbox.timectl("--session", "s", "freeze", "@1451649600").status == 0)
        // Made by a process that is gone (no pid is that high), and by one that runs (this test process).
        let ownTicks = tc_proc_start_ticks(getpid(), nil)
        let abandoned = sandbox.directory + "/.timectl-recording-\(Int32.max)-12345-AbCdEf"
        let live = sandbox.directory + "/.timectl-replay-\(getpid())-\(ownTicks)-GhIjKl"
        for directory in [abandoned, live] {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
            _ = FileManager.default.createFile(atPath: directory + "/registry", contents: Data(count: 4096))
        }
        let trace = sandbox.directory + "/date.trace"
        let recorded = try sandbox.timectl("record", "--session", "s", "-o", trace, "date", "+%s")
        #expect(recorded.status == 0 && recorded.lines == ["1451649600"], "\(recorded)")
        #expect(!FileManager.default.fileExists(atPath: abandoned))
        #expect(FileManager.default.fileExists(atPath: live + "/registry"))
        let left = try FileManager.default.contentsOfDirectory(atPath: sandbox.directory).filter { $0.hasPrefix(".timectl-") }
        #expect(left == [(live as NSString).lastPathComponent], "the record's own directory is gone too: \(left)")
    }

    @Test("record and replay take the command with or without '--', and an option after the command is the command's")
    func commandWithoutTerminator() throws {
        let sandbox = try sandbox()
        #expect(try sandbox.timectl("--session", "s", "freeze", "@1451649600").status == 0)
        let trace = sandbox.directory + "/date.trace", again = sandbox.directory + "/again.trace"
        let recorded = try sandbox.timectl("record", "--session", "s", "-o", trace, "date", "+%s")
        #expect(recorded.status == 0 && recorded.lines == ["1451649600"], "\(recorded)")
        #expect(try Trace(contentsOf: trace).command == ["date", "+%s"])
        let terminated = try sandbox.timectl("record", "--session", "s", "--trace", again, "--", "date", "+%s")
        #expect(terminated.status == 0 && terminated.lines == ["1451649600"], "\(terminated)")

        // --force and --trace after the command are echo's: nothing is replaced, nothing written elsewhere.
        let elsewhere = sandbox.directory + "/elsewhere.trace", echoed = sandbox.directory + "/echo.trace"
        let options = try sandbox.timectl("record", "-o", echoed, "echo", "--force", "--trace", elsewhere)
        #expect(options.status == 0 && options.lines == ["--force --trace \(elsewhere)"], "\(options)")
        #expect(try Trace(contentsOf: echoed).command == ["echo", "--force", "--trace", elsewhere])
        #expect(!FileManager.default.fileExists(atPath: elsewhere))

        for arguments in [[trace, "date", "+%s"], ["--strict", trace, "--", "date", "+%s"], [trace, "--strict", "date", "+%s"]] {
            let replayed = try sandbox.timectl(["replay"] + arguments)
            #expect(replayed.status == 0 && replayed.lines == ["1451649600"], "replay \(arguments): \(replayed)")
            #expect(replayed.stderr == "", "no divergence: \(replayed.stderr)")
        }
        let report = sandbox.directory + "/report.json"
        let replayOptions = try sandbox.timectl("replay", trace, "echo", "--strict", "--report", report)
        #expect(replayOptions.status == 0 && replayOptions.lines == ["--strict --report \(report)"], "\(replayOptions)")
        #expect(!FileManager.default.fileExists(atPath: report))
    }

    @Test("record keeps an existing file unless --force, and keeps what a killed process recorded")
    func recordingSafety() throws {
        let sandbox = try sandbox()
        let trace = sandbox.directory + "/kept.trace"
        try Data("precious".utf8).write(to: URL(fileURLWithPath: trace))
        let refused = try sandbox.timectl("record", "--trace", trace, "--", "true")
        #expect(refused.status == 125)
        #expect(refused.stderr == "timectl: \(trace) already exists; give another --trace FILE, or --force to replace it\n")
        #expect(try String(contentsOfFile: trace, encoding: .utf8) == "precious")

        // The child reads the clock, then dies by SIGKILL (no exit handler runs): its readings are in the trace all the same.
        let killed = "import os, time; print(time.time_ns(), flush=True); os.kill(os.getpid(), 9)"
        let forced = try sandbox.timectl("record", "--force", "--trace", trace, "--", "sh", "-c", "python3 -c '\(killed)'; true")
        #expect(forced.status == 0, "\(forced)")
        let printed = try #require(Int64(forced.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
        let recorded = try Trace(contentsOf: trace)
        // The python3 image itself (`python3` may be a launcher's chain of scripts before it: pyenv's is), however
        // its argv[0] is spelled: a path, or the bare name a shell found in PATH.
        let python = try #require(recorded.processes.first { process in
            process.arguments.contains(killed) && !process.threads.isEmpty &&
                process.arguments.first?.split(separator: "/").last?.hasPrefix("python3") == true
        }, "images recorded: \(recorded.processes.map { "\($0.path) \($0.arguments.first ?? "") \($0.threads.count) threads" })")
        #expect(python.path.hasPrefix("1."))
        let readings = python.threads.flatMap(\.events).compactMap { event -> Int64? in
            if case .reading(_, 0, let value) = event { return value }
            return nil
        }
        #expect(readings.contains(printed), "the reading it printed was recorded before it was killed")
    }

    @Test("the trace encoding keeps every value, whatever the distance between them")
    func encodingRoundTrip() throws {
        var generator = SystemRandomNumberGenerator()
        var events: [tc_event] = []
        for index in 0..<5000 {
            var event = tc_event()
            event.type = index % 7 == 0 ? TC_EVENT_WAIT_BEGIN.rawValue : TC_EVENT_READ.rawValue
            event.detail = UInt32.random(in: 1...7, using: &generator)
            let clock: Int32 = [0, 1, 4, 5, 6, 7, 8, 9, 11].randomElement(using: &generator)!
            event.clock = event.type == TC_EVENT_READ.rawValue ? clock : Int32.random(in: 0...4, using: &generator)
            event.vclock = event.type == TC_EVENT_READ.rawValue ? tc_trace_vclock_of_clock(clock) : event.clock
            event.value = [Int64.min, Int64.max, 0, -1, Int64.random(in: .min ... .max, using: &generator),
                           1_795_000_000_000_000_000 + Int64.random(in: 0...1_000_000, using: &generator)].randomElement(using: &generator)!
            events.append(event)
        }
        var bytes = [UInt8](repeating: 0, count: events.count * Int(TC_MAX_EVENT_SIZE))
        var used = 0
        var last: (Int64, Int64, Int64, Int64, Int64) = (0, 0, 0, 0, 0)
        for var event in events {
            let written = bytes.withUnsafeMutableBufferPointer { out in
                withUnsafeMutableBytes(of: &last) { state in
                    tc_encode_event(&event, state.baseAddress!.assumingMemoryBound(to: Int64.self), out.baseAddress! + used, out.count - used)
                }
            }
            #expect(written > 0 && written <= Int(TC_MAX_EVENT_SIZE))
            used += written
        }
        let decoded = RawRecording.stream(Array(bytes.prefix(used)))
        #expect(decoded.events == events.count)
        var decoder = tc_decoder()
        var event = tc_event()
        var index = 0
        bytes.withUnsafeBufferPointer { buffer in
            decoder.next = buffer.baseAddress
            decoder.end = buffer.baseAddress! + used
            while tc_decode_event(&decoder, &event) == 1 {
                #expect(event.type == events[index].type && event.detail == events[index].detail)
                #expect(event.clock == events[index].clock && event.value == events[index].value)
                index += 1
            }
        }
        #expect(index == events.count)
    }
}
