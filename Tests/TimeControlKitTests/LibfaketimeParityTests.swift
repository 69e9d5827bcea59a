import Foundation
import Testing
@testable import TimeControlKit

/// libfaketime's own test suite (its `functests` and `timetest`), each case
/// written anew as the timectl command its user would type instead. Cases
/// with no timectl equivalent are listed in the README ("Coming from
/// libfaketime").
@Suite("libfaketime's test suite, translated to timectl")
struct LibfaketimeParityTests {
    /// functests/test_walkone.sh: `FAKETIME=@2^i date +%s` prints 2^i, for i in 0…30.
    @Test("walking one: run --at @2^i --frozen date prints 2^i", arguments: 0...30)
    func walkingOne(bit: Int) throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let seconds = 1 << bit
        let result = try sandbox.timectl("run", "--at", "@\(seconds)", "--frozen", "--", "date", "+%s")
        #expect(result.status == 0, "\(result)")
        #expect(result.lines == ["\(seconds)"])
    }

    /// functests/test_true.sh and dont_test_false.sh: the command's status comes back unchanged.
    @Test("true and false keep their exit status under run --at", arguments: [("true", Int32(0)), ("false", Int32(1))])
    func exitStatus(command: String, status: Int32) throws {
        try Build.requireShim()
        let result = try Sandbox().timectl("run", "--at", "2016-01-01 12:00:00", "--", command)
        #expect(result.status == status, "\(result)")
    }

    /// libfaketime's FAKETIME formats, as timectl's AT: an absolute date
    /// and time, '@' for "start here and run", and relative offsets.
    @Test("faketime's date formats are timectl's AT", arguments: [
        ("2016-01-01 12:00:00", Int64(1_451_649_600)),
        ("@1451649600", Int64(1_451_649_600)),
        ("2016-01-01", Int64(1_451_606_400)),
    ])
    func dateFormats(at: String, seconds: Int64) throws {
        try Build.requireShim()
        let result = try Sandbox().timectl("run", "--at", at, "--frozen", "--", "date", "+%s")
        #expect(result.status == 0, "\(result)")
        #expect(result.lines == ["\(seconds)"])
    }

    /// FAKETIME="+1d" / "-1d": an offset from now (here checked against the real clock
    /// read by the test, with a generous margin for the time the command takes to start).
    @Test("relative offsets: run --at +1d and --at -10d", arguments: [Int64(86_400), Int64(-864_000)])
    func relativeOffsets(offset: Int64) throws {
        try Build.requireShim()
        let before = Int64(Date().timeIntervalSince1970)
        let at = offset >= 0 ? "+\(offset / 86_400)d" : "-\(-offset / 86_400)d"
        let result = try Sandbox().timectl("run", "--at", at, "--frozen", "--", "date", "+%s")
        let after = Int64(Date().timeIntervalSince1970)
        #expect(result.status == 0, "\(result)")
        let seen = try #require(result.lines.first.flatMap { Int64($0) }, "\(result)")
        #expect(seen >= before + offset && seen <= after + offset, "\(seen) vs \(before + offset)…\(after + offset)")
    }

    /// FAKETIME="@… x10": a clock that runs ten times as fast.
    @Test("a rate: run --at --rate 10 makes a 2 s sleep 2 virtual seconds")
    func rate() throws {
        try Build.requireShim()
        let result = try Sandbox().timectl("run", "--at", "@1451649600", "--rate", "10", "--",
                                           "python3", "-c", "import time; a = time.monotonic(); time.sleep(2); print(time.monotonic() - a >= 2)")
        #expect(result.status == 0, "\(result)")
        #expect(result.lines == ["True"])
    }

    /// functests/test_exclude_mono.sh (`DONT_FAKE_MONOTONIC=1`, `faketime --exclude-monotonic`):
    /// the wall clock is the faked date while the monotonic clock and a sleep run as in real time.
    @Test("exclude monotonic: freeze --wall '2016-01-01 12:00:00'; the wall reads it around a sleep that the monotonic clock measures")
    func excludeMonotonic() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let frozen = try sandbox.timectl("--session", "mono", "freeze", "--wall", "2016-01-01 12:00:00")
        try #require(frozen.status == 0, "\(frozen)")
        let result = try sandbox.runAttached(session: "mono", ["python3", "-c", """
            import time
            wall = int(time.time()); start = time.monotonic()
            time.sleep(1)
            print(wall, int(time.time()), time.monotonic() - start >= 1)
            """])
        #expect(result.lines == ["1451649600 1451649600 True"], "\(result)")
    }

    /// timetest.c: timed condition waits on both clocks, POSIX timer overruns
    /// with the signal blocked, an absolute one-shot timer, and every way of
    /// reading the wall clock — here under auto-advance, so its 4 s of
    /// sleeps and waits take no real time and land exactly.
    @Test("timetest: condition waits, timer overruns and every wall-clock reading")
    func timetest() throws {
        try Build.requireShim()
        let program = try CFixture.path("faketime_timetest", flags: ["-lrt"])
        let result = try Sandbox().runAutoAdvanced([program])
        #expect(result.status == 0, "\(result)")
        let values = keyedValues(result.stdout)
        // Two condition waits of one second each, both timing out exactly.
        #expect(values["cond_realtime"] == "ETIMEDOUT 1000000000", "\(result.stdout)")
        #expect(values["cond_monotonic"] == "ETIMEDOUT 1000000000", "\(result.stdout)")
        // Read after the condition waits (2 s), then after sleep(1) + usleep(1 s).
        for name in ["time", "time_null", "ftime"] { #expect(values[name] == "1451649602", "\(name): \(result.stdout)") }
        for name in ["gettimeofday", "clock_gettime"] { #expect(values[name] == "1451649604", "\(name): \(result.stdout)") }
        #expect(values["overrun_periodic"] == "3", "\(result.stdout)")
        #expect(values["overrun_one_shot"] == "0", "\(result.stdout)")
        #expect(values["one_shot_remaining"] == "1000000000", "\(result.stdout)")
    }
}
