import Foundation
import Testing
@testable import TimeControlKit

@Suite("The timectl command line")
struct CommandLineTests {
    /// SPEC §7: each a one-line error naming what is accepted, a non-zero
    /// exit, and the segment unchanged.
    @Test("bad input is refused with one line and changes nothing", arguments: [
        (["tick", "-3"], "negative"),
        (["tick", "abc"], "expected a number of seconds"),
        (["tick", "1e400"], "expected a number of seconds"),
        (["tick"], "expected exactly one DURATION"),
        (["freeze", "2016-13-45"], "month 13"),
        (["freeze", "2016-02-30T00:00:00Z"], "day 30"),
        (["set", "tomorrow"], "expected an ISO 8601"),
        (["rate", "0"], "use freeze"),
        (["rate", "-1"], "expected a factor"),
        (["rate", "1e9"], "expected a factor"),
        (["resume", "fast"], "expected a factor"),
        (["--session", "no-such-session", "tick", "1"], "no session 'no-such-session'"),
        (["--session", "bad/name", "status"], "invalid session name"),
        (["frobnicate"], "unknown command 'frobnicate': expected one of freeze, resume, rate, tick"),
        (["--session", "default", "frezee"], "unknown command 'frezee': expected one of freeze"),
        (["session", "lst"], "unknown command 'lst': expected one of list, create, remove (see 'timectl session --help')"),
        (["help", "frezee"], "unknown command 'frezee': expected one of freeze"),
        (["help", "session", "lst"], "unknown command 'lst': expected one of list, create, remove"),
        (["trace", "shw", "run.trace"], "unknown command 'shw': expected one of show, stats"),
        (["session", "remove", "no-such-session"], "no session 'no-such-session' to remove"),
        (["session", "remove", "default", "no-such-session"], "no session 'no-such-session' to remove"),
        (["session", "create", "default"], "session 'default' already exists"),
        (["run", "--end-leftovers=yes", "--", "true"], "does not take any value"),
        (["run", "--allow-uncontrolled=1", "--", "true"], "does not take any value"),
        (["run", "--allow-uncontrolled", "--end-leftovers"], "no command given"),
        (["record", "-o", "never-written.trace"], "no command given"),
        (["record", "date"], "Missing expected argument '--trace <file>'"),
        (["freeze", "25:00"], "invalid AT '25:00': hour 25 is not 0-23; expected an ISO 8601 date and time"),
        (["set", "12:00:60+02:00"], "second 60 is not 0-59"),
        (["freeze", "--wall", "1:00"], "a time of day on the current virtual date (12:00, 12:00:30.5, 12:00+02:00; UTC unless a zone is given)"),
        (["freeze", "12:00", "13:00"], "expected exactly one AT (timectl freeze [AT]), got '12:00' '13:00'; AT is an ISO 8601 date and time"),
        (["set"], "expected exactly one AT (timectl set AT), got nothing; AT is an ISO 8601 date and time"),
        (["rate"], "got nothing; RATE is a factor from 0.001 to 1000000"),
        (["run", "--at"], "Missing value for '--at <at>': AT is an ISO 8601 date and time (2016-01-01,"),
        (["run", "--at", "noon", "--", "true"], "invalid AT 'noon': expected an ISO 8601 date and time"),
        (["run", "--at", "12:00", "--rate"], "Missing value for '--rate <factor>': FACTOR is a factor from 0.001 to 1000000"),
        (["tick", "3", "--step", "--max-steps"], "Missing value for '--max-steps <n>': N is a whole number of at least 1"),
        (["tick", "3", "--version"], "--version is timectl's own and takes no subcommand: 'timectl --version'"),
        (["--version", "tick", "3"], "--version is timectl's own"),
        (["session", "remove", "default", "--version"], "--version is timectl's own"),
        (["run", "--version", "--", "true"], "--version is timectl's own"),
    ])
    func badInput(arguments: [String], mentions: String) throws {
        let sandbox = try Sandbox()
        let session = try sandbox.session("default")
        try session.freeze(at: .absolute(nanosecondsSinceEpoch: 1_451_649_600_000_000_000))
        let segment = try Data(contentsOf: URL(fileURLWithPath: session.segmentPath))
        let before = session.status()

        let result = try sandbox.timectl(arguments)
        #expect(result.status != 0)
        #expect(result.stdout.isEmpty)
        let lines = result.stderr.split(separator: "\n", omittingEmptySubsequences: false).filter { !$0.isEmpty }
        #expect(lines.count == 1, "one line: \(result.stderr)")
        #expect(result.stderr.hasPrefix("timectl: "))
        #expect(result.stderr.contains(mentions), "\(result.stderr)")

        #expect(try Data(contentsOf: URL(fileURLWithPath: session.segmentPath)) == segment, "segment unchanged")
        var after = session.status()
        after.processes = before.processes
        #expect(after == before)
        #expect(try sandbox.sessions.sessionNames() == ["default"], "no session created")
    }

    /// SPEC §7: the one line names what is accepted, whichever AT was wrong.
    @Test("every AT the command line refuses is answered with the accepted forms, on one line", arguments: [
        ["freeze", "tomorrow"], ["freeze", "--wall", "24:00"], ["set", "2016-02-30"], ["set", "12:00 UTC"], ["set", "--", "-3 days"],
        ["run", "--at", "noon", "--", "true"], ["run", "--at", "2300-01-01", "--frozen", "--", "true"], ["run", "--at"], ["set"],
    ])
    func atErrorsListTheForms(arguments: [String]) throws {
        let sandbox = try Sandbox()
        let result = try sandbox.timectl(arguments)
        #expect(result.status == 64, "\(result)")
        #expect(result.stderr.split(separator: "\n").count == 1, "\(result)")
        for form in ["ISO 8601", "'2016-01-01 12:00:00'", "a time of day on the current virtual date", "12:00+02:00",
                     "UTC unless a zone is given", "@SECONDS since the epoch", "+DURATION/-DURATION"] {
            #expect(result.stderr.contains(form), "\(form) missing: \(result.stderr)")
        }
        #expect(try sandbox.sessions.sessionNames().isEmpty, "no session created")
    }

    @Test("tick prints how far the clocks moved and where the wall clock stands; -q prints nothing")
    func tickReports() throws {
        let (sandbox, session) = try Sandbox.frozenSession("default")
        let tick = try sandbox.timectl("tick", "3")
        #expect(tick.status == 0 && tick.stderr.isEmpty, "\(tick)")
        #expect(tick.stdout == "+3s; wall clock now 2016-01-01T12:00:03Z\n")
        let units = try sandbox.timectl("tick", "1h30m250ms")
        #expect(units.stdout == "+1h30m0.25s; wall clock now 2016-01-01T13:30:03.25Z\n", "\(units)")
        for quiet in [["-q", "1"], ["1", "--quiet"], ["--step", "-q", "1"]] {
            let silent = try sandbox.timectl(["tick"] + quiet)
            #expect(silent.status == 0 && silent.stdout.isEmpty && silent.stderr.isEmpty, "\(quiet): \(silent)")
        }
        #expect(session.wallClockNanoseconds == Sandbox.frozenStart + 5_406_250_000_000)
        // Nothing attached: --step moves the whole way in no step.
        let stepped = try sandbox.timectl("tick", "10", "--step")
        #expect(stepped.stdout == "+10s in 0 steps; wall clock now 2016-01-01T13:30:16.25Z\n", "\(stepped)")
        #expect(session.status().frozen, "a frozen session stays frozen")
        // Refused: nothing printed on stdout, nothing moved.
        let nothing = try sandbox.timectl("tick", "--to-next", "-q")
        #expect(nothing.status == 1 && nothing.stdout.isEmpty && nothing.stderr.contains("nothing to advance to"), "\(nothing)")
        #expect(session.wallClockNanoseconds == Sandbox.frozenStart + 5_416_250_000_000)
    }

    @Test("freeze and set take a time of day: on the date the session's wall clock shows, in UTC unless a zone is given")
    func timeOfDay() throws {
        let sandbox = try Sandbox()
        let day: Int64 = 1_451_606_400 * nanosecondsPerSecond  // 2016-01-01T00:00:00Z
        let hour: Int64 = 3600 * nanosecondsPerSecond
        #expect(try sandbox.timectl("freeze", "2016-01-01T23:30:00Z").status == 0)
        let session = try sandbox.session("default")
        // Earlier than now on the same date: the wall clock moves back.
        #expect(try sandbox.timectl("freeze", "09:30").status == 0)
        #expect(session.wallClockNanoseconds == day + 9 * hour + hour / 2)
        #expect(session.status().frozen)
        // 09:30Z is 11:30 on Jan 1 at +02:00: 12:00 there is 10:00Z.
        #expect(try sandbox.timectl("set", "12:00+02:00").status == 0)
        #expect(session.wallClockNanoseconds == day + 10 * hour)
        // 10:00Z is 05:00 on Jan 1 at -05:00: 23:00 there is Jan 2, 04:00Z.
        #expect(try sandbox.timectl("set", "23:00-05:00").status == 0)
        #expect(session.wallClockNanoseconds == day + 28 * hour)
        // Jan 2 in UTC by now; the wall clock alone stops, at 12:00:30.5 on Jan 2.
        #expect(try sandbox.timectl("freeze", "--wall", "T12:00:30.5Z").status == 0)
        #expect(session.wallClockNanoseconds == day + 36 * hour + 30_500_000_000)
        #expect(try sandbox.timectl("status").stdout.contains("wall clock  2016-01-02T12:00:30.5Z  (frozen)"))
    }

    @Test("run --at takes a time of day: today's, or the date of the session named by --session")
    func runAtTimeOfDay() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let today = try sandbox.timectl("run", "--at", "12:00:30", "--frozen", "--", "date", "-u", "+%T")
        #expect(today.status == 0 && today.stdout == "12:00:30\n", "\(today)")
        #expect(try sandbox.sessions.sessionNames().isEmpty, "the private session is gone")
        #expect(try sandbox.timectl("--session", "s", "freeze", "2016-01-01T23:30:00Z").status == 0)
        // 23:30Z on Jan 1 is Jan 2 at +02:00: 06:00 there is 2016-01-02T04:00Z.
        let named = try sandbox.timectl("--session", "s", "run", "--at", "06:00+02:00", "--frozen", "--", "date", "-u", "+%FT%TZ")
        #expect(named.status == 0 && named.stdout == "2016-01-02T04:00:00Z\n", "\(named)")
    }

    @Test("--version is the root command's alone: in its help, in no subcommand's, in the man page's source once")
    func versionIsTheRootCommands() throws {
        let sandbox = try Sandbox()
        let version = try sandbox.timectl("--version")
        #expect(version.status == 0 && version.stderr.isEmpty, "\(version)")
        #expect(version.stdout.range(of: #"^[0-9]+\.[0-9]+\.[0-9]+\n$"#, options: .regularExpression) != nil, "\(version)")
        #expect(try sandbox.timectl("--session", "s", "--version").stdout == version.stdout)
        #expect(try sandbox.timectl("--help").stdout.contains("--version"))
        for command in Self.commands where !command.isEmpty {
            let help = try sandbox.timectl(command + ["--help"])
            #expect(help.status == 0 && !help.stdout.contains("--version"), "timectl \(command.joined(separator: " ")) --help lists --version")
        }
        // What the man page and the completion scripts are generated from.
        let dump = try sandbox.timectl("--experimental-dump-help")
        let root = try #require(try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [String: Any])
        func versionFlags(_ command: [String: Any], path: String) -> [String] {
            let own = (command["arguments"] as? [[String: Any]] ?? []).contains { argument in
                (argument["names"] as? [[String: Any]] ?? []).contains { $0["name"] as? String == "version" }
            }
            let name = path + " " + (command["commandName"] as? String ?? "?")
            return (own ? [name] : []) + (command["subcommands"] as? [[String: Any]] ?? []).flatMap { versionFlags($0, path: name) }
        }
        let command = try #require(root["command"] as? [String: Any])
        #expect(versionFlags(command, path: "") == [" timectl"])
    }

    @Test("a program's own --version reaches the program, with or without '--' in front of it")
    func programVersionIsThePrograms() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let trace = sandbox.directory + "/printf.trace"
        let program = ["printf", "%s\\n", "--version"]  // coreutils' echo would print its own version
        for arguments in [["run"] + program, ["run", "--at", "@0", "--"] + program, ["record", "-o", trace] + program, ["replay", trace] + program] {
            let result = try sandbox.timectl(arguments)
            #expect(result.status == 0 && result.stdout == "--version\n", "\(arguments): \(result)")
        }
    }

    @Test("verbs that need a session do not create one; freeze, rate and set do")
    func sessionCreation() throws {
        let sandbox = try Sandbox()
        for verb in [["tick", "1"], ["resume"], ["reset"], ["status"]] {
            #expect(try sandbox.timectl(["--session", "s"] + verb).status != 0, "\(verb)")
        }
        #expect(try sandbox.sessions.sessionNames().isEmpty)
        #expect(try sandbox.timectl("--session", "a", "freeze").status == 0)
        #expect(try sandbox.timectl("--session", "b", "rate", "2").status == 0)
        #expect(try sandbox.timectl("--session", "c", "set", "@0").status == 0)
        #expect(try sandbox.sessions.sessionNames() == ["a", "b", "c"])
    }

    @Test("a TIMECTL_DIR whose parent is missing is named in one line, and nothing is created")
    func sessionDirectoryParentMissing() throws {
        let sandbox = try Sandbox()
        let directory = sandbox.directory + "/missing/sessions"
        let result = try sandbox.timectl("freeze", environment: ["TIMECTL_DIR": directory])
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr == "timectl: cannot create the session directory \(directory): its parent directory does not exist "
                + "(set TIMECTL_DIR to a directory that exists, or to one inside it)\n", "\(result)")
        #expect(!FileManager.default.fileExists(atPath: sandbox.directory + "/missing"))
    }

    @Test("--session before or after the verb, and TIMECTL_SESSION")
    func sessionSelection() throws {
        let sandbox = try Sandbox()
        #expect(try sandbox.timectl("--session", "one", "freeze", "@100").status == 0)
        #expect(try sandbox.timectl("freeze", "@200", "--session", "two").status == 0)
        #expect(try sandbox.timectl(["freeze", "@300"], environment: ["TIMECTL_SESSION": "three"]).status == 0)
        #expect(try sandbox.session("one").wallClockNanoseconds == 100 * nanosecondsPerSecond)
        #expect(try sandbox.session("two").wallClockNanoseconds == 200 * nanosecondsPerSecond)
        #expect(try sandbox.session("three").wallClockNanoseconds == 300 * nanosecondsPerSecond)
        #expect(try sandbox.sessions.sessionNames() == ["one", "three", "two"])
    }

    @Test("status --json describes the session for programs")
    func statusJSON() throws {
        let sandbox = try Sandbox()
        #expect(try sandbox.timectl("freeze", "2016-01-01T12:00:00Z").status == 0)
        #expect(try sandbox.timectl("tick", "1.5").status == 0)
        let result = try sandbox.timectl("status", "--json")
        #expect(result.status == 0)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(object["wall_clock"] as? String == "2016-01-01T12:00:01.5Z")
        #expect(object["wall_clock_nanoseconds"] as? Int64 == 1_451_649_601_500_000_000)
        #expect(object["frozen"] as? Bool == true)
        #expect(object["session"] as? String == "default")
        #expect((object["processes"] as? [Any])?.isEmpty == true)
        let text = try sandbox.timectl("status")
        #expect(text.stdout.contains("2016-01-01T12:00:01.5Z"))
        #expect(text.stdout.contains("frozen"))
    }

    @Test("rate and resume")
    func rateAndResume() throws {
        let sandbox = try Sandbox()
        #expect(try sandbox.timectl("rate", "2.5").status == 0)
        #expect(try sandbox.session("default").status().rateText == "2.5")
        #expect(try sandbox.timectl("freeze").status == 0)
        #expect(try sandbox.session("default").status().frozen)
        #expect(try sandbox.timectl("resume").status == 0)
        #expect(try sandbox.session("default").status().rateText == "1")
        #expect(try sandbox.timectl("resume", "0.5").status == 0)
        #expect(try sandbox.session("default").status().rateText == "0.5")
    }

    @Test("session list, create and remove")
    func sessionManagement() throws {
        let sandbox = try Sandbox()
        #expect(try sandbox.timectl("session", "create", "alpha").status == 0)
        let duplicate = try sandbox.timectl("session", "create", "alpha")
        #expect(duplicate.status != 0)
        #expect(duplicate.stderr.contains("session 'alpha' already exists"))
        #expect(!duplicate.stderr.contains("--force"), "an existing session is no damaged segment: \(duplicate.stderr)")
        #expect(try sandbox.timectl("session", "create", "beta").status == 0)
        let list = try sandbox.timectl("session", "list")
        #expect(list.lines.count == 2)
        #expect(list.lines[0].hasPrefix("alpha "))
        #expect(list.lines[0].contains("  1  0 attached"))
        #expect(try sandbox.timectl("--session", "alpha", "freeze", "--wall").status == 0)
        #expect(try sandbox.timectl("--session", "beta", "freeze").status == 0)
        let frozen = try sandbox.timectl("session", "list").lines
        #expect(frozen[0].contains("  1, wall frozen  0 attached"))
        #expect(frozen[1].contains("  frozen  0 attached"))
        let json = try sandbox.timectl("session", "list", "--json").stdout
        #expect(json.contains("\"wall_frozen\" : true"))
        #expect(try sandbox.timectl("session", "remove", "alpha", "beta").status == 0)
        #expect(try sandbox.sessions.sessionNames().isEmpty)
        #expect(try sandbox.timectl("session", "remove", "alpha").status != 0)
    }

    @Test("a session with attached processes is kept unless --force")
    func removeRefusesAttachedSessions() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let session = try sandbox.session("busy")
        let process = try sandbox.startAttached(session: "busy", ["sh", "-c", "while :; do sleep 0.05; done"])
        defer { stop(process) }
        try #require(!sandbox.waitForAttached(session) { !$0.isEmpty }.isEmpty)
        let refused = try sandbox.timectl("session", "remove", "busy")
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("attached processes"))
        #expect(try sandbox.sessions.sessionNames() == ["busy"])
        #expect(try sandbox.timectl("session", "remove", "--force", "busy").status == 0)
        #expect(try sandbox.sessions.sessionNames().isEmpty)
    }

    @Test("a session in use keeps every session named with it in place")
    func removeIsAllOrNothing() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        _ = try sandbox.session("idle")
        let session = try sandbox.session("busy")
        let process = try sandbox.startAttached(session: "busy", ["sh", "-c", "while :; do sleep 0.05; done"])
        defer { stop(process) }
        try #require(!sandbox.waitForAttached(session) { !$0.isEmpty }.isEmpty)
        let refused = try sandbox.timectl("session", "remove", "idle", "busy")
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("session 'busy' has attached processes"))
        #expect(try sandbox.sessions.sessionNames() == ["busy", "idle"])
    }

    /// The man page is generated from this help, and its generator drops
    /// characters outside ASCII ('±DURATION' became 'DURATION').
    /// The root command and every subcommand.
    static let commands: [[String]] = [
        [], ["freeze"], ["resume"], ["rate"], ["tick"], ["set"], ["reset"], ["status"], ["run"], ["run-pending"],
        ["daemon"], ["record"], ["replay"], ["trace"], ["trace", "show"], ["trace", "stats"],
        ["session"], ["session", "list"], ["session", "create"], ["session", "remove"],
    ]

    @Test("help is plain ASCII, so that the man page says the same", arguments: commands)
    func helpIsASCII(command: [String]) throws {
        let sandbox = try Sandbox()
        let result = try sandbox.timectl(command + ["--help"])
        #expect(result.status == 0)
        let foreign = result.stdout.unicodeScalars.filter { !$0.isASCII }.map(String.init).joined()
        #expect(foreign.isEmpty, "non-ASCII in 'timectl \(command.joined(separator: " ")) --help': \(foreign)")
    }

    @Test("every command has help that names its formats", arguments: [
        (["--help"], "DURATION"), (["tick", "--help"], "DURATION"), (["freeze", "--help"], "AT"),
        (["set", "--help"], "monotonic"), (["rate", "--help"], "0.001"), (["run", "--help"], "128+N"),
        (["session", "--help"], "remove"), (["status", "--help"], "--json"),
        (["--generate-completion-script", "bash"], "_timectl"), (["--session", "s", "--generate-completion-script", "zsh"], "#compdef timectl"),
    ])
    func help(arguments: [String], mentions: String) throws {
        let sandbox = try Sandbox()
        let result = try sandbox.timectl(arguments)
        #expect(result.status == 0)
        #expect(result.stdout.contains(mentions))
    }
}
