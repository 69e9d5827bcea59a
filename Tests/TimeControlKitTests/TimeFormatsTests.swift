import Testing
@testable import TimeControlKit

@Suite("DURATION, AT and RATE formats (SPEC §2)")
struct TimeFormatsTests {
    @Test("durations: bare seconds and combined units", arguments: [
        ("3", Int64(3_000_000_000)),
        ("1.5", 1_500_000_000),
        (".5", 500_000_000),
        ("0", 0),
        ("+2", 2_000_000_000),
        ("250ms", 250_000_000),
        ("1h30m", 5_400_000_000_000),
        ("1.5h", 5_400_000_000_000),
        ("2d", 172_800_000_000_000),
        ("1m30.5s", 90_500_000_000),
        ("10us", 10_000),
        ("7ns", 7),
        ("0.0000000015", 2),
    ])
    func parsesDurations(text: String, nanoseconds: Int64) throws {
        #expect(try TimeFormats.parseDuration(text) == nanoseconds)
    }

    @Test("bad durations name the value and what is accepted", arguments: [
        "-3", "abc", "1e400", "", "3 5", "1h30", "h", "1.", "1x", "--bogus", "99999999999999999999",
        "300000000000000000s",
    ])
    func rejectsDurations(text: String) {
        #expect {
            _ = try TimeFormats.parseDuration(text)
        } throws: { error in
            let description = String(describing: error)
            return description.contains("'\(text)'") && !description.contains("\n")
                && (description.contains("expected") || description.contains("too large"))
        }
    }

    @Test func negativeDurationsAreNamedAsSuch() {
        #expect(throws: FormatError.self) { try TimeFormats.parseDuration("-3") }
        do {
            _ = try TimeFormats.parseDuration("-3")
        } catch {
            #expect(error.reason.contains("negative"))
        }
        #expect((try? TimeFormats.parseDuration("-3", allowNegative: true)) == -3_000_000_000)
    }

    @Test("instants: ISO 8601, offsets, epoch seconds, relative", arguments: [
        ("2016-01-01T12:00:00Z", WallClockTarget.absolute(nanosecondsSinceEpoch: 1_451_649_600_000_000_000)),
        ("2016-01-01T12:00:00+02:00", .absolute(nanosecondsSinceEpoch: 1_451_642_400_000_000_000)),
        ("2016-01-01T12:00:00-0130", .absolute(nanosecondsSinceEpoch: 1_451_655_000_000_000_000)),
        ("2016-01-01", .absolute(nanosecondsSinceEpoch: 1_451_606_400_000_000_000)),
        ("2016-01-01 12:00", .absolute(nanosecondsSinceEpoch: 1_451_649_600_000_000_000)),
        ("2016-01-01T12:00:00.25Z", .absolute(nanosecondsSinceEpoch: 1_451_649_600_250_000_000)),
        ("2016-02-29T00:00:00Z", .absolute(nanosecondsSinceEpoch: 1_456_704_000_000_000_000)),
        ("1969-12-31T23:59:59Z", .absolute(nanosecondsSinceEpoch: -1_000_000_000)),
        ("@1451649600", .absolute(nanosecondsSinceEpoch: 1_451_649_600_000_000_000)),
        ("@1451649600.5", .absolute(nanosecondsSinceEpoch: 1_451_649_600_500_000_000)),
        ("+1d", .relative(nanoseconds: 86_400_000_000_000)),
        ("-90m", .relative(nanoseconds: -5_400_000_000_000)),
    ])
    func parsesInstants(text: String, expected: WallClockTarget) throws {
        #expect(try TimeFormats.parseInstant(text) == expected)
    }

    @Test("bad instants", arguments: [
        ("2016-13-45", "month 13"), ("2016-02-30", "day 30"), ("2015-02-29", "day 29"),
        ("2016-01-01T24:00:00Z", "hour 24"), ("2016-01-01T12:60:00Z", "minute 60"),
        ("yesterday", "expected"), ("2016-1-1", "expected"), ("@abc", "expected"),
        ("2300-01-01", "supported range"), ("1800-01-01", "supported range"), ("2016-01-01T12:00:00+25:00", "offset"),
    ])
    func rejectsInstants(text: String, reason: String) {
        do {
            _ = try TimeFormats.parseInstant(text)
            Issue.record("'\(text)' was accepted")
        } catch {
            #expect(error.description.contains("'\(text)'"))
            #expect(error.reason.contains(reason), "\(error)")
        }
    }

    @Test("formatted instants parse back to themselves")
    func instantRoundTrip() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let instant = Int64.random(in: -2_208_988_800_000_000_000...7_258_118_399_999_999_999, using: &generator)
            let text = TimeFormats.formatInstant(instant)
            #expect(try TimeFormats.parseInstant(text) == .absolute(nanosecondsSinceEpoch: instant), "\(text)")
        }
        #expect(TimeFormats.formatInstant(1_451_649_600_000_000_000) == "2016-01-01T12:00:00Z")
        #expect(TimeFormats.formatInstant(-1) == "1969-12-31T23:59:59.999999999Z")
    }

    @Test("formatted durations parse back to themselves")
    func durationRoundTrip() throws {
        for nanoseconds: Int64 in [0, 1, 999, 1000, 250_000_000, 1_500_000_000, 5_400_000_000_000, 90_061_000_000_001, Int64.max] {
            #expect(try TimeFormats.parseDuration(TimeFormats.formatDuration(nanoseconds)) == nanoseconds)
        }
        #expect(TimeFormats.formatDuration(5_400_000_000_000) == "1h30m")
        #expect(TimeFormats.formatDuration(.seconds(90) + .nanoseconds(1)) == "1m30.000000001s")
    }

    @Test("seconds at a fixed precision, rounded, with the sign of values under a second kept",
          arguments: [(Int64(0), 3, "0.000s"), (1_500_000_000, 3, "1.500s"), (1_999_600_000, 3, "2.000s"), (-500_000_000, 9, "-0.500000000s"),
                      (-400_000, 3, "0.000s"), (123_456_789, 9, "0.123456789s"), (2_500_000_000, 0, "3s"), (Int64.min, 9, "-9223372036.854775808s")])
    func fixedSeconds(nanoseconds: Int64, decimals: Int, printed: String) {
        #expect(TimeFormats.formatSeconds(nanoseconds, decimals: decimals) == printed)
    }

    @Test("rates", arguments: [("1", "1"), ("2", "2"), ("0.5", "0.5"), ("0.1", "0.1"), ("0.001", "0.001"), ("1000000", "1000000"), ("10.25", "10.25")])
    func rates(text: String, printed: String) throws {
        let fixed = try TimeFormats.parseRate(text)
        #expect(TimeFormats.formatRate(fixed) == printed)
    }

    @Test("bad rates", arguments: ["0", "-1", "abc", "0.0001", "1000001", "", "1e3", "nan"])
    func rejectsRates(text: String) {
        #expect(throws: FormatError.self) { try TimeFormats.parseRate(text) }
    }
}
