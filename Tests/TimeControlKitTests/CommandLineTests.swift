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
    @Test("help is plain ASCII, so that the man page says the same", arguments: [
        [], ["freeze"], ["resume"], ["rate"], ["tick"], ["set"], ["reset"], ["status"], ["run"], ["run-pending"],
        ["daemon"], ["record"], ["replay"], ["trace"], ["trace", "show"], ["trace", "stats"],
        ["session"], ["session", "list"], ["session", "create"], ["session", "remove"],
    ])
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
