import ArgumentParser
@_spi(CommandLine) import TimeControlKit
import TimeShimC

#if canImport(Glibc)
import Glibc
#endif

/// `timectl faketime`: libfaketime's `faketime` wrapper, command line and all (SPEC §13).
struct Faketime: RunsAProgram, TakesNoSession {
    static let whyNoSession = "it runs the command on libfaketime's settings, with no session"

    static let configuration = CommandConfiguration(
        commandName: "faketime",
        abstract: "Run a command the way libfaketime's faketime wrapper does: replace 'faketime' with 'timectl faketime'.",
        usage: "timectl faketime [-f] [-m] [--exclude-monotonic] [--date-prog <program>] <timestamp> <command> ...",
        discussion: """
            Without -f, TIMESTAMP is anything 'date -d' reads ('last friday 5 pm', '2008-12-24 08:15:42'): \
            the command's clocks start there and run. With -f it is libfaketime's FAKETIME: \
            'YYYY-MM-DD hh:mm:ss' stands still there (sleeps still take real time), '@YYYY-MM-DD hh:mm:ss' \
            starts there and runs, '+N' or '-N' (with m, h, d or y) is an offset from now, each optionally \
            followed by 'xRATE' (the clocks run RATE times as fast; sleeps last 1/RATE as long) or \
            'iSECONDS' (every reading moves the clocks on by SECONDS). The command and everything it \
            starts get libTimeShim.so in LD_PRELOAD with FAKETIME set, as the wrapper sets \
            libfaketime.so.1: other libfaketime variables in the environment (FAKETIME_DONT_RESET, \
            FAKETIME_SKIP_CMDS, ...) keep their meaning, and a session the environment names is \
            left out (it would win over them). Go and statically linked programs the command starts \
            are on the same clock. -m (libfaketime's multi-threaded build) changes nothing: the \
            shim has one build for every program. -p PID (a fake getpid()) is refused: timectl \
            controls time only. The exit status is the command's (128+N if killed by signal N); \
            64 for a bad timestamp, 125 if timectl itself failed.
            """)

    @Flag(name: .customShort("f"), help: "TIMESTAMP is libfaketime's FAKETIME format, passed on as it is.")
    var direct = false

    @Flag(name: .customShort("m"), help: "Accepted for faketime's sake: there is no separate multi-threaded shim.")
    var multiThreaded = false

    @Flag(name: .customLong("exclude-monotonic"), help: "Leave the monotonic clocks real (FAKETIME_DONT_FAKE_MONOTONIC=1).")
    var excludeMonotonic = false

    @Option(name: .customLong("date-prog"), help: ArgumentHelp("The GNU-compatible 'date' that reads TIMESTAMP without -f.", valueName: "program"))
    var dateProgram = "date"

    @Option(name: .customShort("p"), help: ArgumentHelp("Refused: faketime's fake getpid() (FAKETIME_FAKEPID) is not timectl's.", valueName: "pid"))
    var fakePID: String?

    @Argument(parsing: .postTerminator, help: ArgumentHelp("The timestamp, then the command and its arguments.", valueName: "timestamp> <command"))
    var words: [String] = []

    static let optionsTakingValues: Set<String> = ["--date-prog", "-p"]

    /// faketime's TIMESTAMP may be a negative offset (`faketime -f -10d date`): a word, not an option.
    static func startsProgram(_ word: String) -> Bool {
        word.count > 1 && word.hasPrefix("-") && word.dropFirst().first.map { $0.isNumber || $0 == "." || $0 == "," } == true
    }

    func validate() throws {
        if fakePID != nil {
            throw ValidationError("-p is faketime's fake getpid() (FAKETIME_FAKEPID), which timectl does not implement: it controls time only")
        }
        guard words.count >= 2 else {
            throw ValidationError("expected 'timectl faketime [-f] [-m] [--exclude-monotonic] [--date-prog PROGRAM] TIMESTAMP COMMAND [ARGUMENTS...]'")
        }
        if direct { _ = try Self.checkedSetting(words[0]) }
    }

    /// FAKETIME as the shim will read it (with FAKETIME_FMT if set), or the one-line refusal.
    static func checkedSetting(_ text: String) throws -> String {
        var spec = tc_faketime_spec()
        let format = ProcessEnvironment.value("FAKETIME_FMT")
        let problem = format.map { tc_faketime_parse(text, $0, &spec) } ?? tc_faketime_parse(text, nil, &spec)
        if let problem {
            var line = "FAKETIME \(FormatError.quoted(text)) \(String(cString: problem))"
            if line.hasSuffix("date format") { line += " \(FormatError.quoted(format ?? "%Y-%m-%d %T")) (FAKETIME_FMT)" }
            throw ValidationError(line)
        }
        return text
    }

    func run() throws {
        CommandRunner.holdForwardedSignals()  // signals go to the command, whose exit status timectl returns
        let setting = direct ? words[0] : try Self.offset(from: words[0], dateProgram: dateProgram)
        var entries = ["FAKETIME=" + setting]
        if excludeMonotonic { entries.append("FAKETIME_DONT_FAKE_MONOTONIC=1") }
        let status: Int32
        do {
            let environment = ShimEnvironment(faketime: entries, shimPath: try ShimEnvironment.locateShim())
            status = try CommandRunner(arguments: Array(words.dropFirst()), shimEnvironment: environment).run()
        } catch {
            status = CommandStatus.failure(error)
        }
        throw ExitCode(status)
    }

    /// faketime's TIMESTAMP without -f: what `date -d TIMESTAMP +%s` says, as an offset from now ("+N", "-N").
    static func offset(from timestamp: String, dateProgram: String) throws -> String {
        // Read against real time, as the shim's offset counts from it.
        let quiet = ["LD_PRELOAD", "TIMECTL_SEGMENT", "FAKETIME"]
        let environment = ProcessEnvironment.entries.filter { entry in !quiet.contains { entry.hasPrefix($0 + "=") } }
        let (status, output): (Int32, String)
        do {
            (status, output) = try ProgramOutput.of([dateProgram, "-d", timestamp, "+%s"], environment: environment)
        } catch {
            throw CommandFailure(message: "cannot run '\(dateProgram) -d' to read the timestamp: \(error.description)", status: 64)
        }
        let lines = output.split(separator: "\n")
        guard status == 0, lines.count == 1, let seconds = Int64(lines[0]) else {
            let said = lines.first.map { ": " + $0 } ?? ""
            throw CommandFailure(message: "timestamp \(FormatError.quoted(timestamp)) was not recognised by '\(dateProgram) -d'\(said); give one it reads, or libfaketime's FAKETIME with -f", status: 64)
        }
        let offset = seconds - Int64(time(nil))
        return offset >= 0 ? "+\(offset)" : "\(offset)"
    }
}
