import Testing
@_spi(CommandLine) @testable import TimeControlKit

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

    static let hour: Int64 = 3_600_000_000_000

    static let timesOfDay: [(String, WallClockTarget)] = [
        ("12:00", .timeOfDay(nanosecondsAfterMidnight: 12 * hour, utcOffsetSeconds: 0)),
        ("00:00", .timeOfDay(nanosecondsAfterMidnight: 0, utcOffsetSeconds: 0)),
        ("23:59:59.999999999", .timeOfDay(nanosecondsAfterMidnight: 24 * hour - 1, utcOffsetSeconds: 0)),
        ("23:59:59.9999999999", .timeOfDay(nanosecondsAfterMidnight: 24 * hour - 1, utcOffsetSeconds: 0)),
        ("12:00:30", .timeOfDay(nanosecondsAfterMidnight: 12 * hour + 30_000_000_000, utcOffsetSeconds: 0)),
        ("12:00:30.25", .timeOfDay(nanosecondsAfterMidnight: 12 * hour + 30_250_000_000, utcOffsetSeconds: 0)),
        ("12:00:30,5", .timeOfDay(nanosecondsAfterMidnight: 12 * hour + 30_500_000_000, utcOffsetSeconds: 0)),
        ("T12:00Z", .timeOfDay(nanosecondsAfterMidnight: 12 * hour, utcOffsetSeconds: 0)),
        ("t09:30z", .timeOfDay(nanosecondsAfterMidnight: 9 * hour + 30 * 60_000_000_000, utcOffsetSeconds: 0)),
        ("12:00+02:00", .timeOfDay(nanosecondsAfterMidnight: 12 * hour, utcOffsetSeconds: 7200)),
        ("12:00:00-0130", .timeOfDay(nanosecondsAfterMidnight: 12 * hour, utcOffsetSeconds: -5400)),
        ("T23:00+05", .timeOfDay(nanosecondsAfterMidnight: 23 * hour, utcOffsetSeconds: 18000)),
        (" 12:00 ", .timeOfDay(nanosecondsAfterMidnight: 12 * hour, utcOffsetSeconds: 0)),
    ]

    @Test("a time of day: HH:MM[:SS[.frac]], a leading T, an optional zone (UTC without one)", arguments: timesOfDay)
    func parsesTimesOfDay(text: String, expected: WallClockTarget) throws {
        #expect(try TimeFormats.parseInstant(text) == expected)
    }

    @Test("bad times of day say what is wrong and list every form of AT", arguments: [
        ("24:00", "hour 24 is not 0-23"), ("12:60", "minute 60 is not 0-59"), ("12:00:60", "second 60 is not 0-59"),
        ("1:00", "expected"), ("12:0", "expected"), ("12", "expected"), ("12:00:", "expected"), ("12:00:00.", "expected"),
        ("12:00+24:00", "offset is not -23:59 to +23:59"), ("12:00Zjunk", "expected"), ("12:00 UTC", "expected"),
        ("T", "expected"), ("T1200", "expected"), ("noon", "expected"), ("12h00", "expected"),
    ])
    func rejectsTimesOfDay(text: String, reason: String) {
        do {
            _ = try TimeFormats.parseInstant(text)
            Issue.record("'\(text)' was accepted")
        } catch {
            #expect(error.reason.contains(reason), "\(error)")
            #expect(error.description.hasPrefix("invalid AT '\(text)': "), "\(error)")
            #expect(error.reason.hasSuffix("expected \(TimeFormats.instantHelp)"), "\(error)")
        }
    }

    /// SPEC §7: the one line names every accepted form, whatever was wrong.
    @Test("every AT error lists the accepted forms, on one line", arguments: [
        "2016-13-45", "2016-02-30", "2016-01-01T24:00:00Z", "yesterday", "2016-1-1", "@abc", "@", "+", "-x",
        "2300-01-01", "1800-01-01", "2016-01-01T12:00:00+25:00", "25:00", "12:00+24:00", "", "tomorrow 12:00",
    ])
    func everyInstantErrorListsTheForms(text: String) {
        do {
            _ = try TimeFormats.parseInstant(text)
            Issue.record("'\(text)' was accepted")
        } catch {
            for form in ["ISO 8601", "2016-01-01T12:00:00+02:00", "a time of day", "12:00+02:00", "UTC unless a zone is given",
                         "@SECONDS", "+DURATION/-DURATION"] {
                #expect(error.description.contains(form), "\(form) missing from: \(error)")
            }
            #expect(!error.description.contains("\n"))
            let ascii = error.description.unicodeScalars.allSatisfy { $0.isASCII }
            #expect(ascii, "\(error)")
        }
    }

    static let datesOfTimesOfDay: [(String, Int64, Int64)] = [
        // 2016-01-01T23:30Z: still Jan 1 in UTC and at -05:00, already Jan 2 at +02:00.
        ("12:00", 1_451_691_000_000_000_000, 1_451_649_600_000_000_000),        // 2016-01-01T12:00Z, earlier than now
        ("23:45", 1_451_691_000_000_000_000, 1_451_691_900_000_000_000),        // 2016-01-01T23:45Z
        ("12:00+02:00", 1_451_691_000_000_000_000, 1_451_728_800_000_000_000),  // 2016-01-02T10:00Z
        ("12:00-05:00", 1_451_691_000_000_000_000, 1_451_667_600_000_000_000),  // 2016-01-01T17:00Z
        ("00:00", 1_451_691_000_000_000_000, 1_451_606_400_000_000_000),        // 2016-01-01T00:00Z
        // Before the epoch: 1969-12-31T10:00Z; the date is Dec 31, not Jan 1.
        ("12:00", -50_400_000_000_000, -43_200_000_000_000),
        // 1969-12-31T03:00Z is Dec 30, 22:00 at -05:00: 23:00 there is 1969-12-31T04:00Z.
        ("23:00-05:00", -75_600_000_000_000, -72_000_000_000_000),
    ]

    @Test("a time of day falls on the date the wall clock shows in its zone", arguments: datesOfTimesOfDay)
    func timeOfDayOnTheCurrentDate(text: String, now: Int64, expected: Int64) throws {
        guard case .timeOfDay(let nanoseconds, let offset) = try TimeFormats.parseInstant(text) else {
            Issue.record("'\(text)' is not a time of day")
            return
        }
        let instant = TimeFormats.instant(timeOfDay: nanoseconds, utcOffsetSeconds: offset, onDateAt: now)
        #expect(instant == expected, "\(TimeFormats.formatInstant(instant))")
        // Any moment of the same local date gives the same instant.
        let midnight = TimeFormats.instant(timeOfDay: 0, utcOffsetSeconds: offset, onDateAt: now)
        for moment in [midnight, midnight + 24 * Self.hour - 1] {
            #expect(TimeFormats.instant(timeOfDay: nanoseconds, utcOffsetSeconds: offset, onDateAt: moment) == expected)
        }
    }

    @Test("a printed time of day parses back to itself", arguments: ["12:00", "00:00:00.5", "23:59:59.999999999+02:00", "T08:15-0130", "12:00:30Z"])
    func timeOfDayRoundTrip(text: String) throws {
        guard case .timeOfDay(let nanoseconds, let offset) = try TimeFormats.parseInstant(text) else {
            Issue.record("'\(text)' is not a time of day")
            return
        }
        let printed = TimeFormats.formatTimeOfDay(nanosecondsAfterMidnight: nanoseconds, utcOffsetSeconds: offset)
        #expect(try TimeFormats.parseInstant(printed) == .timeOfDay(nanosecondsAfterMidnight: nanoseconds, utcOffsetSeconds: offset), "\(printed)")
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
