import Foundation
import Testing
@testable import TimeControlKit

/// What users coming from libfaketime's `faketime 'DATE' CMD` type first,
/// and the command line's rough edges they found (issue 15).
@Suite("Habits from faketime, and the command line's rough edges")
struct FaketimeHabitsTests {
    @Test("run --at --frozen: a private session frozen at AT, removed afterwards; the default session untouched")
    func runAtFrozen() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let result = try sandbox.timectl("run", "--at", "2016-01-01T12:00:00Z", "--frozen", "--", "sh", "-c", "date +%s; date +%s")
        #expect(result.status == 0, "\(result)")
        #expect(result.lines == ["1451649600", "1451649600"])
        #expect(try sandbox.sessions.sessionNames().isEmpty, "no session left behind, none created")
    }

    @Test("run --at starts a running clock there; libfaketime's 'YYYY-MM-DD hh:mm:ss' is accepted; no '--' needed")
    func runAtRunning() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let result = try sandbox.timectl("run", "--at", "2016-01-01 12:00:00", "python3", "-c",
                                         "import time; a = time.time(); time.sleep(0.05); print(int(a), time.time() > a)")
        #expect(result.status == 0, "\(result)")
        // The clock runs from 12:00:00 while python3 starts, which can take more
        // than a second on a loaded machine: the reading is at or just after AT.
        let fields = result.lines.first?.split(separator: " ") ?? []
        try #require(fields.count == 2, "\(result)")
        let started = try #require(Int(fields[0]), "\(result)")
        #expect(started >= 1_451_649_600 && started < 1_451_649_600 + 60, "\(result)")
        #expect(fields[1] == "True", "the clock runs: \(result)")
        #expect(try sandbox.sessions.sessionNames().isEmpty)
    }

    @Test("run --at @0 --rate 10: virtual time runs ten times as fast")
    func runAtRate() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        // A 2 s sleep at rate 10 is 2 virtual seconds (0.2 s of real time).
        let result = try sandbox.timectl("run", "--at", "@0", "--rate", "10", "--", "sh", "-c", "date +%s.%N; sleep 2; date +%s.%N")
        #expect(result.status == 0, "\(result)")
        let readings = result.lines.compactMap(Double.init)
        try #require(readings.count == 2, "\(result)")
        #expect(readings[0] >= 0 && readings[0] < 1_000_000, "starts at the epoch: \(readings)")
        #expect(readings[1] - readings[0] >= 2, "the sleep lasted 2 virtual seconds: \(readings)")
        #expect(try sandbox.sessions.sessionNames().isEmpty)
    }

    @Test("run --at with --session sets that session, which stays")
    func runAtNamedSession() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let result = try sandbox.timectl("run", "--session", "kept", "--at", "@1451649600", "--rate", "10", "--", "true")
        #expect(result.status == 0, "\(result)")
        #expect(try sandbox.sessions.sessionNames() == ["kept"])
        let status = try sandbox.session("kept").status()
        #expect(status.rateText == "10")
        #expect(status.wallClockNanoseconds >= 1_451_649_600 * nanosecondsPerSecond)
    }

    @Test("bad run options: one line, exit 64, no session made", arguments: [
        (["run", "--at", "yesterday", "--", "true"], "invalid AT 'yesterday'"),
        (["run", "--frozen", "--", "true"], "--frozen only applies with --at"),
        (["run", "--rate", "2", "--", "true"], "--rate only applies with --at"),
        (["run", "--at", "@0", "--frozen", "--rate", "2", "--", "true"], "either --frozen or --rate"),
        (["run", "--at", "@0", "--rate", "0", "--", "true"], "use freeze"),
        (["run", "--at", "@0", "--rate", "2", "--auto-advance", "--", "true"], "needs --keep-rate"),
        (["run", "--auto-advance", "--max-steps", "-1", "--", "true"], "--max-steps must be a whole number of at least 1, got -1"),
        (["run", "--atx", "true"], "Unknown option '--atx'"),
        (["run"], "no command given"),
        (["run", "--"], "no command given"),
        (["tick", "--step", "1", "--max-steps", "-5"], "got -5"),
        (["run-pending", "--max-steps", "-1"], "got -1"),
    ])
    func badRunOptions(arguments: [String], mentions: String) throws {
        let sandbox = try Sandbox()
        let result = try sandbox.timectl(arguments)
        #expect(result.status == 64, "\(result)")
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.split(separator: "\n").count == 1, "one line: \(result.stderr)")
        #expect(result.stderr.contains(mentions), "\(result.stderr)")
        #expect(try sandbox.sessions.sessionNames().isEmpty)
    }

    @Test("'--' before a value is the end of options, not a value: set -- -10d, freeze -- AT, tick -- 3")
    func terminatorBeforeValue() throws {
        let sandbox = try Sandbox()
        #expect(try sandbox.timectl("freeze", "--", "2016-01-01T12:00:00Z").status == 0)
        #expect(try sandbox.session("default").wallClockNanoseconds == 1_451_649_600 * nanosecondsPerSecond)
        let set = try sandbox.timectl("set", "--", "-10d")
        #expect(set.status == 0, "\(set)")
        #expect(try sandbox.session("default").wallClockNanoseconds == (1_451_649_600 - 864_000) * nanosecondsPerSecond)
        #expect(try sandbox.timectl("tick", "--", "3").status == 0)
        #expect(try sandbox.session("default").wallClockNanoseconds == (1_451_649_600 - 864_000 + 3) * nanosecondsPerSecond)
    }

    @Test("run without '--' runs the command; run --help is help")
    func runWithoutTerminator() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        #expect(try sandbox.timectl("freeze", "@1451649600").status == 0)
        let result = try sandbox.timectl("run", "date", "+%s")
        #expect(result.status == 0, "\(result)")
        #expect(result.lines == ["1451649600"])
        let help = try sandbox.timectl("run", "--help")
        #expect(help.status == 0)
        #expect(help.stdout.contains("--at <at>"))
    }

    @Test("usage lines show one value, not a list", arguments: [
        (["freeze", "--help"], "USAGE: timectl freeze [--session <name>] [--wall] [<at>]"),
        (["set", "--help"], "USAGE: timectl set [--session <name>] <at>"),
        (["tick", "--help"], "USAGE: timectl tick [--session <name>] (<duration>"),
    ])
    func usageLines(arguments: [String], line: String) throws {
        let help = try Sandbox().timectl(arguments)
        #expect(help.stdout.contains(line), "\(help.stdout)")
        #expect(!help.stdout.contains("...]"))
    }

    @Test("--session is refused, not ignored, by commands that use no session", arguments: [
        ["replay", "--session", "X", "no-such-trace"],
        ["--session", "X", "trace", "show", "no-such-trace"],
        ["trace", "stats", "--session", "X", "no-such-trace"],
        ["session", "list", "--session", "X"],
    ])
    func sessionRefused(arguments: [String]) throws {
        let sandbox = try Sandbox()
        let result = try sandbox.timectl(arguments)
        #expect(result.status == 64, "\(result)")
        #expect(result.stderr.split(separator: "\n").count == 1)
        #expect(result.stderr.contains("takes no --session"), "\(result.stderr)")
        #expect(try sandbox.sessions.sessionNames().isEmpty)
    }

    @Test("an error about a huge argument quotes only its start")
    func hugeArgumentIsCut() throws {
        let sandbox = try Sandbox()
        let huge = String(repeating: "x", count: 100_000)
        for arguments in [["tick", huge], ["freeze", huge], ["--session", huge, "status"], ["run", "--at", huge, "true"]] {
            let result = try sandbox.timectl(arguments)
            #expect(result.status != 0)
            #expect(result.stderr.split(separator: "\n").count == 1)
            // The longest, AT's, lists every accepted form: about 420 characters with the cut value.
            #expect(result.stderr.count < 500, "\(result.stderr.prefix(500))")
            #expect(result.stderr.contains("(100000 characters)"), "\(result.stderr.prefix(400))")
        }
    }

    @Test("trace stats and show count in good English")
    func traceCounts() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let trace = sandbox.directory + "/one.trace"
        let recorded = try sandbox.timectl("record", "--trace", trace, "--", "/bin/date")
        #expect(recorded.status == 0, "\(recorded)")
        let stats = try sandbox.timectl("trace", "stats", trace)
        #expect(stats.status == 0)
        #expect(stats.stdout.contains("processes   1 image, 1 thread"), "\(stats.stdout)")
        let show = try sandbox.timectl("trace", "show", trace)
        #expect(show.stdout.contains("1 process image, 1 thread, 1 reading, 0 waits"), "\(show.stdout)")
    }
}
