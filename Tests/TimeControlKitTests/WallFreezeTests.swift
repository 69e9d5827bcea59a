import Foundation
import Testing
@testable import TimeControlKit

/// `timectl freeze --wall`: the calendar stands still while monotonic
/// clocks, sleeps, timeouts and timers run (SPEC §2; libfaketime's
/// DONT_FAKE_MONOTONIC).
@Suite("freeze --wall: the calendar stands still, time goes on")
struct WallFreezeTests {
    static let second: Int64 = 1_000_000_000
    static let start: Int64 = 1_451_649_600  // 2016-01-01T12:00:00Z

    /// wait_probe's last line, `key=value …`, as a dictionary.
    static func probeValues(_ output: String) -> [String: String] {
        var values: [String: String] = [:]
        for field in (output.split(separator: "\n").last ?? "").split(separator: " ") {
            let parts = field.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { values[String(parts[0])] = String(parts[1]) }
        }
        return values
    }

    /// A sandbox with session NAME whose wall clock stands at 2016-01-01T12:00:00Z.
    static func wallFrozen(_ name: String) throws -> (Sandbox, TimeSession) {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let frozen = try sandbox.timectl("--session", name, "freeze", "--wall", "2016-01-01T12:00:00Z")
        try #require(frozen.status == 0, "\(frozen)")
        return (sandbox, try sandbox.session(name))
    }

    @Test("Python: time.time() reads 1451649600 before and after a time.sleep(0.5) that takes 0.5 s and measures 0.5 s")
    func pythonSleepsWhileTheWallStandsStill() throws {
        let (sandbox, _) = try Self.wallFrozen("wall")
        let script = """
            import time
            before = time.time(); start = time.monotonic()
            time.sleep(0.5)
            print(before, time.time(), time.monotonic() - start)
            """
        let began = Date()
        let result = try sandbox.runAttached(session: "wall", ["python3", "-c", script])
        let took = Date().timeIntervalSince(began)
        let fields = result.lines.first?.split(separator: " ").map(String.init) ?? []
        #expect(fields.count == 3, "\(result)")
        #expect(fields.first == "1451649600.0" && fields.dropFirst().first == "1451649600.0", "\(result)")
        let measured = Double(fields.last ?? "") ?? -1
        // The sleep ran on the monotonic clock at rate 1: at least 0.5 s, and not stuck.
        #expect(measured >= 0.5 && measured < 10, "\(result)")
        #expect(took >= 0.5, "the sleep took real time")
    }

    @Test("tick 60 moves the standing wall clock to 1451649660, and it stays there")
    func tickMovesBoth() throws {
        let (sandbox, session) = try Self.wallFrozen("wall")
        let monotonicBefore = session.status().monotonicNanoseconds
        #expect(try sandbox.timectl("--session", "wall", "tick", "60").status == 0)
        let first = try sandbox.runAttached(session: "wall", ["date", "+%s"])
        usleep(200_000)
        let second = try sandbox.runAttached(session: "wall", ["date", "+%s"])
        #expect(first.lines == ["1451649660"] && second.lines == ["1451649660"], "\(first) \(second)")
        // The monotonic clocks moved by the tick and kept running.
        #expect(session.status().monotonicNanoseconds >= monotonicBefore + 60 * Self.second)
    }

    @Test("a JVM's Thread.sleep(1000) takes about a second while Instant.now() stays frozen")
    func jvmSleepsWhileTheWallStandsStill() throws {
        let (sandbox, _) = try Self.wallFrozen("wall")
        let classes = try JavaFixtures.classpath()
        let began = Date()
        let result = try sandbox.runAttached(session: "wall", ["java", "-cp", classes, "WallNap", "1000"], guardSeconds: 120)
        let took = Date().timeIntervalSince(began)
        #expect(result.lines.count == 3, "\(result)")
        #expect(result.lines.first == "2016-01-01T12:00:00Z" && result.lines.last == "2016-01-01T12:00:00Z", "\(result)")
        let measured = Int64(result.lines.dropFirst().first ?? "") ?? -1
        #expect(measured >= Self.second && measured < 30 * Self.second, "\(result)")
        #expect(took >= 1, "Thread.sleep took real time")
    }

    @Test("timeout's relative CLOCK_REALTIME timer and a relative clock_nanosleep on CLOCK_REALTIME run while the wall stands still")
    func relativeWallWaitsRun() throws {
        let (sandbox, _) = try Self.wallFrozen("wall")
        // coreutils timeout arms a relative timer_create(CLOCK_REALTIME) timer.
        let timedOut = try sandbox.timectl(["--session", "wall", "run", "--", "timeout", "0.3", "sleep", "30"], guardSeconds: 60)
        #expect(timedOut.status == 124, "\(timedOut)")
        let slept = try sandbox.runAttached(session: "wall", [try CFixture.path("wait_probe"), "rel-wall-sleep-ms", "300"])
        let values = Self.probeValues(slept.stdout)
        #expect(values["result"] == "0" && values["wall_moved"] == "0", "\(slept)")
        #expect((Int64(values["elapsed"] ?? "") ?? -1) >= 300_000_000, "\(slept)")
    }

    @Test("absolute CLOCK_REALTIME waits (clock_nanosleep, pthread_cond_timedwait) do not end while the wall stands still; a tick past their deadline ends them",
          arguments: [["abs-wall-sleep", "1"], ["cond", "realtime", "1"]])
    func absoluteWallWaitWaitsForAVerb(arguments: [String]) throws {
        let (sandbox, session) = try Self.wallFrozen("wall")
        let run = try BackgroundProgram(sandbox, session: "wall", [try CFixture.path("wait_probe")] + arguments)
        sandbox.waitForWaits(session) { $0.contains { $0.clock == "CLOCK_REALTIME" } }
        usleep(1_500_000)  // longer than the wait's 1 s: it must still be waiting
        #expect(run.isRunning, "an absolute wall-clock wait ended while the wall stood still: \(run.output)")
        try session.advance(by: .seconds(1))
        #expect(run.exitStatus() == 0, "\(run.output) \(run.errorOutput)")
        let values = Self.probeValues(run.output)
        #expect(values["result"] == (arguments[0] == "cond" ? "ETIMEDOUT" : "0"), "\(run.output)")
        #expect(session.status().wallClockNanoseconds == (Self.start + 1) * Self.second)
    }

    @Test("rate keeps the wall frozen, resume lets it run from where it stands, freeze stops both, reset puts it back on real time; monotonic never goes back")
    func verbsAroundAFrozenWall() throws {
        let (_, session) = try Self.wallFrozen("wall")
        var monotonic = session.status().monotonicNanoseconds
        func check(_ what: String, frozen: Bool, wallFrozen: Bool, sourceLocation: SourceLocation = #_sourceLocation) -> SessionStatus {
            let status = session.status()
            #expect(status.frozen == frozen && status.wallFrozen == wallFrozen, "\(what): \(status)", sourceLocation: sourceLocation)
            #expect(status.monotonicNanoseconds >= monotonic, "\(what): monotonic went back", sourceLocation: sourceLocation)
            monotonic = status.monotonicNanoseconds
            return status
        }
        _ = check("freeze --wall", frozen: false, wallFrozen: true)
        try session.setRate(2)
        let rated = check("rate 2", frozen: false, wallFrozen: true)
        #expect(rated.wallClockNanoseconds == Self.start * Self.second && rated.rate == 2)
        usleep(100_000)
        #expect(session.status().monotonicNanoseconds >= monotonic + 200_000_000, "monotonic runs at rate 2")
        try session.freeze()
        _ = check("freeze", frozen: true, wallFrozen: true)
        try session.resume()
        let resumed = check("resume", frozen: false, wallFrozen: false)
        #expect(resumed.wallClockNanoseconds >= Self.start * Self.second && resumed.wallClockNanoseconds < (Self.start + 60) * Self.second,
                "resume runs the wall from where it stood: \(resumed.wallClock)")
        usleep(100_000)
        #expect(session.status().wallClockNanoseconds >= Self.start * Self.second + 100_000_000, "the wall runs")
        try session.freezeWall(at: .relative(nanoseconds: 3600 * Self.second))
        let jumped = check("freeze --wall +1h", frozen: false, wallFrozen: true)
        let jumpedWall = jumped.wallClockNanoseconds
        #expect(jumpedWall >= (Self.start + 3600) * Self.second)
        try session.apply(.setWallClock(.relative(nanoseconds: -60 * Self.second)))
        let set = check("set -60", frozen: false, wallFrozen: true)
        #expect(set.wallClockNanoseconds == jumpedWall - 60 * Self.second, "set moves the standing wall")
        try session.reset()
        let reset = check("reset", frozen: false, wallFrozen: false)
        let real = Int64(Date().timeIntervalSince1970 * 1e9)
        #expect(abs(reset.wallClockNanoseconds - real) < 5 * Self.second, "reset puts the wall on real time: \(reset.wallClock)")
        #expect(reset.rate == 1)
    }

    @Test("Python's uuid1 (libuuid spins on gettimeofday) makes 2000 distinct ids: a wall clock spun on creeps by microseconds")
    func uuid1DoesNotSpin() throws {
        let (sandbox, session) = try Self.wallFrozen("wall")
        let result = try sandbox.runAttached(session: "wall", ["python3", "-c", "import uuid; print(len({uuid.uuid1() for _ in range(2000)}))"],
                                             guardSeconds: 120)
        #expect(result.lines == ["2000"], "\(result)")
        let status = session.status()
        #expect(status.wallFrozen, "the wall still stands still")
        #expect(status.wallClockNanoseconds >= Self.start * Self.second && status.wallClockNanoseconds < (Self.start + 1) * Self.second,
                "crept by far less than a second: \(status.wallClock)")
    }

    @Test("status shows which timeline stands still, in text and JSON")
    func statusShowsIt() throws {
        let (sandbox, _) = try Self.wallFrozen("wall")
        let text = try sandbox.timectl("--session", "wall", "status")
        #expect(text.stdout.contains("2016-01-01T12:00:00Z  (wall frozen)"), "\(text)")
        #expect(text.stdout.contains("rate        1 (monotonic clocks; the wall clock stands still)"), "\(text)")
        let json = try sandbox.timectl("--session", "wall", "status", "--json")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any], "\(json)")
        #expect(object["wall_frozen"] as? Bool == true && object["frozen"] as? Bool == false, "\(json)")
        #expect(try sandbox.timectl("--session", "wall", "freeze").status == 0)
        let frozen = try sandbox.timectl("--session", "wall", "status", "--json")
        let frozenObject = try #require(try JSONSerialization.jsonObject(with: Data(frozen.stdout.utf8)) as? [String: Any])
        #expect(frozenObject["wall_frozen"] as? Bool == true && frozenObject["frozen"] as? Bool == true, "\(frozen)")
    }

    @Test("freeze --wall refuses a bad AT, says what is accepted, and changes nothing")
    func badInput() throws {
        let (sandbox, session) = try Self.wallFrozen("wall")
        let before = session.status()
        let result = try sandbox.timectl("--session", "wall", "freeze", "--wall", "yesterday")
        #expect(result.status == 64, "\(result)")
        #expect(result.stderr.contains("AT") && result.stderr.split(separator: "\n").count == 1, "\(result)")
        let after = session.status()
        #expect(after.wallClockNanoseconds == before.wallClockNanoseconds && after.verbsApplied == before.verbsApplied)
    }
}
