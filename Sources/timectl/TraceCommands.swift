import ArgumentParser
@_spi(CommandLine) import TimeControlKit

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// Record and replay (SPEC §5): record, replay, trace show, trace stats.

struct Record: RunsAProgram {
    static let configuration = CommandConfiguration(
        commandName: "record",
        abstract: "Run a command and record every clock reading and wait of its processes.",
        usage: "timectl record [--session <name> | --auto-advance [--seed <n>]] (--trace | -o) <file> [--force] [--] <command> ...",
        discussion: """
            Writes a trace to FILE: per process (named by its place in the process tree, not its \
            pid) and per thread (in creation order), every value a clock read returned and every \
            wait with its virtual deadline. The command runs on real time in a private session, or \
            on the session named by --session (or $TIMECTL_SESSION); with --auto-advance, on a private \
            session pinned at 2000-01-01T00:00:00Z that skips every wait, as 'timectl run --auto-advance' \
            runs it (--seed N orders the waits that fall due together, as there). FILE appears complete when \
            the command has exited, or not at all; an existing FILE is kept unless --force is given. \
            Exits with the command's status; 125 if timectl itself failed.
            """)

    @OptionGroup var sessionOptions: SessionOptions

    @Option(name: [.customLong("trace"), .customShort("o")], help: ArgumentHelp("Where to write the trace.", valueName: "file"))
    var trace: String

    static let optionsTakingValues: Set<String> = ["--trace", "-o", "--seed"]

    @Flag(help: "Replace FILE if it exists.")
    var force = false

    @Flag(name: .customLong("auto-advance"), help: "Run on a private pinned session that skips every wait, as 'timectl run --auto-advance'.")
    var autoAdvance = false

    @Option(name: .customLong("seed"), help: ArgumentHelp("With --auto-advance: waits that fall due together end one at a time, in an order drawn from N.", valueName: "n"))
    var seed: UInt64?

    @Argument(parsing: .postTerminator, help: ArgumentHelp("The command and its arguments (the '--' in front may be left out).", valueName: "command"))
    var command: [String] = []

    func validate() throws {
        if trace.isEmpty { throw ValidationError("no trace file: expected 'timectl record --trace FILE [--] COMMAND [ARGUMENTS...]'") }
        if command.isEmpty { throw ValidationError("no command given: expected 'timectl record --trace \(trace) [--] COMMAND [ARGUMENTS...]'") }
        if seed != nil && !autoAdvance { throw ValidationError("--seed only applies with --auto-advance") }
        if seed == UInt64.max { throw ValidationError("--seed takes a whole number from 0 to \(UInt64.max - 1), got \(UInt64.max)") }
        if autoAdvance && sessionOptions.session != nil {
            throw ValidationError("--auto-advance records on a private session of its own: drop --session")
        }
    }

    func run() throws {
        CommandRunner.holdForwardedSignals()  // so that a late signal cannot stop timectl before the trace is written
        let status: Int32
        do {
            let session: TimeSession
            if autoAdvance {
                session = try TimeSession.temporaryPinned()
                try Run.pinnedStart.apply(to: session)
                if let seed { session.setOrder(seed: seed, jitter: 0) }
            } else if let name = SessionOptions.named(sessionOptions.session) {
                session = try TimeSession.openOrCreate(named: try SessionOptions.resolve(name))
            } else {
                session = try TimeSession.temporary()
            }
            let summary = try TraceRecorder.record(command, into: trace, session: session, replacing: force, autoAdvancing: autoAdvance)
            Main.report(line: "recorded \(summary) into \(trace)")
            status = summary.status
        } catch {
            status = CommandStatus.failure(error)
        }
        throw ExitCode(status)
    }
}

struct Replay: RunsAProgram, TakesNoSession {
    static let whyNoSession = "it replays on a private session of its own, with auto-advance"

    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Run a command so that each of its threads reads exactly the recorded values.",
        usage: "timectl replay [--report <file>] [--strict] <trace> [[--] <command> ...]",
        discussion: """
            Each thread of each process reads the values its recording has, in order; its waits end \
            without waiting in real time, in the order they would have (the command runs on a private \
            session with auto-advance). Without COMMAND, the recorded command runs again. A trace that \
            is truncated, altered or of another format version is refused before anything runs.

            When a thread asks for more or different readings than were recorded, timectl reports \
            its first divergence (process, thread, call number, what was recorded and what it asked \
            for) on stderr, and in FILE with --report; the thread then reads a clock that continues \
            from the last value replayed, moving as the session moves. A Go program is replayed as a \
            whole process: its time.Now() calls, on whatever threads, read the recorded ones in \
            order, and it diverges only by asking for more of them. With --strict each \
            process that diverges is stopped at once (status 121), the rest run on, and timectl \
            exits 121. Otherwise it exits with \
            the command's status; 125 if timectl itself failed.
            """)

    @Argument(help: ArgumentHelp("The trace to replay.", valueName: "trace"))
    var trace: String

    @Option(name: .customLong("report"), help: ArgumentHelp("Write what diverged, as JSON, to this file.", valueName: "file"))
    var report: String?

    @Flag(help: "Stop the first process that diverges, and exit 121.")
    var strict = false

    static let optionsTakingValues: Set<String> = ["--report"]
    static let argumentsBeforeProgram = 1

    @Argument(parsing: .postTerminator, help: ArgumentHelp("The command and its arguments, the '--' in front optional (default: the recorded command).", valueName: "command"))
    var command: [String] = []

    func run() throws {
        CommandRunner.holdForwardedSignals()  // so that a late signal cannot stop timectl before its session is removed
        let status: Int32
        do {
            let command = try self.command.isEmpty ? Trace(contentsOf: trace).command : self.command
            let outcome = try TraceReplayer.replay(trace, command: command, strict: strict, adoptingOrphans: true)
            for divergence in outcome.divergences { Main.report(line: divergence.description) }
            if let report { try writeReport(outcome, command: command, to: report) }
            status = strict && !outcome.divergences.isEmpty ? CommandStatus.diverged : outcome.status
        } catch .untrustedTrace(let path, let problem) {
            Main.report(line: "trace \(path) \(problem); nothing was run")
            status = CommandStatus.failed
        } catch {
            status = CommandStatus.failure(error)
        }
        throw ExitCode(status)
    }

    struct Report: Encodable {
        var trace: String
        var command: [String]
        var status: Int32
        var strict: Bool
        var divergences: [Divergence]
        var policy: String
    }

    func writeReport(_ outcome: ReplayOutcome, command: [String], to path: String) throws(TimeControlError) {
        let report = Report(trace: trace, command: command, status: outcome.status, strict: strict, divergences: outcome.divergences,
                            policy: "after its first divergence a thread (of a Go program: the process) reads a clock that continues from the last value replayed, moving as the session moves")
        guard let json = try? StatusFormat.json(report) else { return }
        do {
            try (json + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        } catch {
            throw .system(call: "write", path: path, errno: .ioError)
        }
    }
}

struct TraceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trace",
        abstract: "Show a recorded trace.",
        subcommands: [Show.self, Stats.self])

    struct Show: ParsableCommand, TakesNoSession {
        static let whyNoSession = "it only reads the trace file"

        static let configuration = CommandConfiguration(
            commandName: "show",
            abstract: "Print a trace: every process, thread, reading and wait.",
            discussion: "Wall-clock values are shown as instants, the others as seconds. A trace that is truncated, altered or of another format version is refused (exit 1).")

        @Argument(help: ArgumentHelp("The trace file.", valueName: "trace"))
        var trace: String

        @Flag(help: "Print JSON for programs instead of text for people.")
        var json = false

        func run() throws {
            let trace = try Trace(contentsOf: self.trace)
            if json {
                print(try StatusFormat.json(trace))
                return
            }
            let statistics = TraceStatistics(trace)
            print("trace \(self.trace): recorded \(TimeFormats.formatInstant(trace.recordedAt)), "
                  + [TimeFormats.count(statistics.processes, "process image"), TimeFormats.count(statistics.threads, "thread"),
                     TimeFormats.count(statistics.readings, "reading"), TimeFormats.count(statistics.waits, "wait"),
                     TimeFormats.count(trace.fileSize, "byte")].joined(separator: ", "))
            for process in trace.processes {
                let image = process.image > 1 ? " (image \(process.image))" : ""
                print("process \(process.path)\(image): \(process.arguments.joined(separator: " ")) (pid \(process.pid) when recorded)")
                for thread in process.threads {
                    print("  thread \(thread.number):")
                    for (index, event) in thread.events.enumerated() {
                        print("    \(index + 1)  \(event)")
                    }
                }
            }
        }
    }

    struct Stats: ParsableCommand, TakesNoSession {
        static let whyNoSession = "it only reads the trace file"

        static let configuration = CommandConfiguration(
            commandName: "stats",
            abstract: "Print counts over a trace: processes, threads, readings per clock and call, waits, size.")

        @Argument(help: ArgumentHelp("The trace file.", valueName: "trace"))
        var trace: String

        @Flag(help: "Print JSON for programs instead of text for people.")
        var json = false

        func run() throws {
            let statistics = TraceStatistics(try Trace(contentsOf: trace))
            if json {
                print(try StatusFormat.json(statistics))
                return
            }
            func counts(_ table: [String: Int]) -> String {
                table.isEmpty ? "none" : table.sorted { ($1.value, $0.key) < ($0.value, $1.key) }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            }
            let tenths = Int((statistics.bytesPerReading * 10).rounded())
            let perReading = statistics.readings > 0 ? "\(tenths / 10).\(tenths % 10) bytes a reading" : "no readings"
            print("""
                trace       \(trace)
                recorded    \(TimeFormats.formatInstant(statistics.recordedAt))
                size        \(TimeFormats.count(statistics.bytes, "byte")) (\(perReading))
                processes   \(TimeFormats.count(statistics.processes, "image")), \(TimeFormats.count(statistics.threads, "thread"))
                readings    \(statistics.readings): \(counts(statistics.readingsByClock))
                calls       \(counts(statistics.readingsByCall))
                waits       \(statistics.waits): \(counts(statistics.waitsByKind))
                clock sets  \(statistics.wallClockSets)
                """)
            for process in statistics.perProcess {
                let image = process.image > 1 ? " (image \(process.image))" : ""
                print("  \(process.path)\(image)  \(process.arguments.joined(separator: " "))  "
                      + "\(TimeFormats.count(process.threads, "thread")), \(TimeFormats.count(process.readings, "reading")), \(TimeFormats.count(process.waits, "wait"))")
            }
        }
    }
}
