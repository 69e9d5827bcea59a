import TimeShimC

// The formats of SPEC §2, parsed and printed in one place:
//
//   DURATION  a bare number of seconds (`3`, `1.5`), or numbers with units
//             ns us ms s m h d, combined (`1h30m`, `250ms`, `1.5h`).
//   AT        ISO 8601 (`2016-01-01T12:00:00Z`, `…+02:00`, `2016-01-01`),
//             a time of day (`12:00`, `12:00:30.5`, `T12:00Z`, `12:00+02:00`)
//             on the date the session's virtual wall clock shows in that
//             zone, `@SECONDS[.frac]` since the epoch, or `±DURATION`
//             relative to the current virtual wall time.
//   RATE      a decimal factor in 0.001 ... 1000000.
//
// A date or time without an offset is UTC: timectl never depends on the
// machine's time zone.

/// A point on the wall clock, as given on a command line or to the library.
public enum WallClockTarget: Sendable, Hashable {
    /// An absolute instant, in nanoseconds since the Unix epoch.
    case absolute(nanosecondsSinceEpoch: Int64)
    /// A shift relative to the session's current virtual wall time, in nanoseconds.
    case relative(nanoseconds: Int64)
    /// A time of day on the session's current virtual date (`timectl freeze 12:00`):
    /// `nanosecondsAfterMidnight` (0 ..< 24 h) on the date the virtual wall
    /// clock shows, both read in the zone `utcOffsetSeconds` east of UTC (0
    /// is UTC; -86399 ... 86399). The date is the one the wall clock shows
    /// when the verb is applied, so the wall clock may move back.
    case timeOfDay(nanosecondsAfterMidnight: Int64, utcOffsetSeconds: Int32)
}

/// Why a value could not be parsed; the description is one line that names
/// what was given and what is accepted.
public struct FormatError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of value: `DURATION`, `AT` or `RATE`.
    public let kind: String
    /// The text as given.
    public let value: String
    /// What is wrong and what is accepted, e.g. "expected a number of seconds …".
    public let reason: String

    /// An error about `value`, a `kind`, with the `reason` it was refused.
    public init(kind: String, value: String, reason: String) {
        self.kind = kind
        self.value = value
        self.reason = reason
    }

    /// "invalid KIND 'VALUE': REASON", with a long VALUE cut (see ``quoted(_:)``).
    public var description: String { "invalid \(kind) \(Self.quoted(value)): \(reason)" }

    /// `'text'` for a message, cut to its first 40 characters and its length
    /// when longer, so that an error about a huge argument stays one readable line.
    public static func quoted(_ text: String) -> String {
        let limit = 40
        guard text.count > limit else { return "'\(text)'" }
        return "'\(text.prefix(limit))…' (\(text.count) characters)"
    }
}

/// Parsing and printing the formats of SPEC §2: DURATION, AT (as a
/// ``WallClockTarget``) and RATE. Every parser throws a ``FormatError``
/// whose description names what was given and what is accepted.
public enum TimeFormats {
    @_spi(CommandLine)
    public static let durationHelp = "a number of seconds (3, 1.5) or numbers with units ns, us, ms, s, m, h, d (1h30m, 250ms)"
    /// Every form of AT, in one line: the end of every AT error message.
    @_spi(CommandLine)
    public static let instantHelp = "an ISO 8601 date and time (2016-01-01, 2016-01-01T12:00:00Z, 2016-01-01T12:00:00+02:00, '2016-01-01 12:00:00'), "
        + "a time of day on the current virtual date (12:00, 12:00:30.5, 12:00+02:00; UTC unless a zone is given), "
        + "@SECONDS since the epoch, or +DURATION/-DURATION from the current virtual time"
    @_spi(CommandLine)
    public static let rateHelp = "a factor from 0.001 to 1000000 (2 runs twice as fast, 0.5 half as fast)"
    static let supportedRange = "1900-01-01T00:00:00Z..2200-01-01T00:00:00Z"

    // MARK: Durations

    /// Parses a DURATION into nanoseconds. A leading `-` is accepted only
    /// when `allowNegative` is set; `+` is always accepted.
    public static func parseDuration(_ text: String, allowNegative: Bool = false) throws(FormatError) -> Int64 {
        let invalid = FormatError(kind: "DURATION", value: text, reason: "expected \(durationHelp)")
        var body = Substring(text.trimmingSpaces)
        var negative = false
        if body.first == "+" || body.first == "-" {
            negative = body.first == "-"
            body = body.dropFirst()
        }
        guard !body.isEmpty else { throw invalid }

        var total: Int128 = 0
        var rest = body[...]
        var sawUnit = false
        while !rest.isEmpty {
            guard let (whole, fraction, afterNumber) = scanDecimal(rest) else { throw invalid }
            let (unit, afterUnit) = scanUnit(afterNumber)
            if unit == nil && (sawUnit || !afterNumber.isEmpty) { throw invalid }
            let scale = unit ?? 1_000_000_000
            guard let amount = nanoseconds(whole: whole, fraction: fraction, unit: scale) else {
                throw FormatError(kind: "DURATION", value: text, reason: "too large (at most about 292 years)")
            }
            total += amount
            guard total <= Int128(Int64.max) else {
                throw FormatError(kind: "DURATION", value: text, reason: "too large (at most about 292 years)")
            }
            sawUnit = unit != nil
            rest = afterUnit
        }
        if negative && !allowNegative && total > 0 {
            throw FormatError(kind: "DURATION", value: text, reason: "negative durations are refused (monotonic time cannot go back); expected \(durationHelp)")
        }
        return negative ? -Int64(total) : Int64(total)
    }

    /// Prints nanoseconds as a DURATION that parses back to the same value, e.g. `1h30m`, `1.5s`, `250ms`.
    public static func formatDuration(_ nanoseconds: Int64) -> String {
        if nanoseconds == 0 { return "0s" }
        let sign = nanoseconds < 0 ? "-" : ""
        var rest = nanoseconds.magnitude
        if rest < 1_000_000_000 {
            for (unit, size) in [("ms", UInt64(1_000_000)), ("us", 1_000)] where rest % size == 0 {
                return sign + String(rest / size) + unit
            }
            return sign + String(rest) + "ns"
        }
        var text = sign
        for (unit, size) in [("d", UInt64(86_400_000_000_000)), ("h", 3_600_000_000_000), ("m", 60_000_000_000)]
        where rest >= size {
            text += String(rest / size) + unit
            rest %= size
        }
        if rest > 0 {
            text += String(rest / 1_000_000_000) + fractionDigits(rest % 1_000_000_000) + "s"
        }
        return text
    }

    /// Prints a `Duration` as a DURATION, to the nanosecond, as the nanosecond form does.
    public static func formatDuration(_ duration: Duration) -> String {
        formatDuration(SessionClock.Instant.nanoseconds(of: duration))
    }

    /// Prints nanoseconds as seconds with `decimals` digits after the point
    /// (0–9, rounded half away from zero), e.g. `0.250s`, `-0.500000000s`:
    /// for columns and reports, where every value shows the same precision.
    static func formatSeconds(_ nanoseconds: Int64, decimals: Int) -> String {
        let decimals = min(max(decimals, 0), 9)
        var scale: UInt64 = 1
        for _ in 0..<decimals { scale *= 10 }
        let unit = 1_000_000_000 / scale
        let rounded = (nanoseconds.magnitude + unit / 2) / unit
        let sign = nanoseconds < 0 && rounded > 0 ? "-" : ""
        guard decimals > 0 else { return "\(sign)\(rounded)s" }
        let fraction = String(rounded % scale + scale).dropFirst()
        return "\(sign)\(rounded / scale).\(fraction)s"
    }

    // MARK: Counts

    /// "1 image", "2 images": a count and its noun, for messages.
    public static func count(_ number: some BinaryInteger, _ singular: String, plural: String? = nil) -> String {
        "\(number) \(number == 1 ? singular : plural ?? singular + "s")"
    }

    // MARK: Instants

    /// Parses an AT: absolute, or relative to the current virtual wall time.
    public static func parseInstant(_ text: String) throws(FormatError) -> WallClockTarget {
        let trimmed = text.trimmingSpaces
        let invalid = FormatError(kind: "AT", value: text, reason: "expected \(instantHelp)")
        if trimmed.first == "+" || trimmed.first == "-" {
            do {
                return .relative(nanoseconds: try parseDuration(trimmed, allowNegative: true))
            } catch {
                throw invalid
            }
        }
        if isTimeOfDay(Substring(trimmed)) {
            var scanner = DigitScanner(Substring(trimmed))
            _ = scanner.take("T") || scanner.take("t")
            let (nanosecondOfDay, offsetSeconds) = try scanTime(&scanner, original: text, invalid: invalid)
            guard scanner.atEnd else { throw invalid }
            // 23:59:59.9999999999 rounds to the nanosecond before midnight, not to a 24:00 that does not print back.
            let lastNanosecond: Int128 = 86_400_000_000_000 - 1
            return .timeOfDay(nanosecondsAfterMidnight: Int64(min(nanosecondOfDay, lastNanosecond)), utcOffsetSeconds: Int32(offsetSeconds))
        }
        let instant: Int128
        if trimmed.first == "@" {
            instant = try parseEpochSeconds(trimmed.dropFirst(), original: text, invalid: invalid)
        } else {
            instant = try parseISO8601(Substring(trimmed), original: text, invalid: invalid)
        }
        guard instant >= Int128(TC_INSTANT_MIN), instant <= Int128(TC_INSTANT_MAX) else {
            throw FormatError(kind: "AT", value: text, reason: "outside the supported range \(supportedRange); expected \(instantHelp)")
        }
        return .absolute(nanosecondsSinceEpoch: Int64(instant))
    }

    /// `12:00`, `T12:00Z`, `12:00:30.5+02:00`: a time with no date in front
    /// (a date starts with its four-digit year and a '-').
    static func isTimeOfDay(_ text: Substring) -> Bool {
        let time = text.first == "T" || text.first == "t" ? text.dropFirst() : text
        return time.dropFirst(2).first == ":"
    }

    /// Where a time of day falls: the instant at which a clock in the zone
    /// `utcOffsetSeconds` east of UTC shows `nanosecondsAfterMidnight` on the
    /// date it shows at `now` (all in nanoseconds since the epoch).
    public static func instant(timeOfDay nanosecondsAfterMidnight: Int64, utcOffsetSeconds: Int32,
                               onDateAt now: Int64) -> Int64 {
        let day: Int128 = 86_400_000_000_000
        let offset = Int128(utcOffsetSeconds) * 1_000_000_000
        let local = Int128(now) + offset
        var midnight = local / day * day
        if local < 0 && local % day != 0 { midnight -= day }
        let instant = midnight + Int128(nanosecondsAfterMidnight) - offset
        return Int64(clamping: instant)
    }

    /// Prints a time of day as `12:00:00Z`, `12:00:00.5+02:00`: the form it parses from.
    public static func formatTimeOfDay(nanosecondsAfterMidnight: Int64, utcOffsetSeconds: Int32) -> String {
        let nanoseconds = nanosecondsAfterMidnight.magnitude
        let seconds = nanoseconds / 1_000_000_000
        func two(_ value: UInt64) -> String { value < 10 ? "0\(value)" : String(value) }
        var text = "\(two(seconds / 3600 % 100)):\(two(seconds / 60 % 60)):\(two(seconds % 60))"
            + fractionDigits(nanoseconds % 1_000_000_000)
        if utcOffsetSeconds == 0 {
            text += "Z"
        } else {
            let minutes = UInt64(utcOffsetSeconds.magnitude) / 60
            text += (utcOffsetSeconds < 0 ? "-" : "+") + two(minutes / 60 % 100) + ":" + two(minutes % 60)
        }
        return text
    }

    /// Prints an instant as ISO 8601 in UTC, with a fraction only when there is one.
    public static func formatInstant(_ nanosecondsSinceEpoch: Int64) -> String {
        // Any Int64 prints (a damaged wait-table deadline included): the remainder never overflows.
        let seconds = nanosecondsSinceEpoch.floorDivided(by: 1_000_000_000)
        let remainder = nanosecondsSinceEpoch % 1_000_000_000
        let nanos = remainder < 0 ? remainder + 1_000_000_000 : remainder
        let days = seconds.floorDivided(by: 86_400)
        let secondOfDay = seconds - days * 86_400
        let (year, month, day) = civilDate(daysSinceEpoch: days)
        func pad(_ value: Int64, _ width: Int) -> String {
            let digits = String(value.magnitude)
            return (value < 0 ? "-" : "") + String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(secondOfDay / 3600, 2)):\(pad(secondOfDay / 60 % 60, 2)):\(pad(secondOfDay % 60, 2))"
            + fractionDigits(UInt64(nanos)) + "Z"
    }

    // MARK: Rates

    /// Parses a RATE into the segment's fixed-point form.
    public static func parseRate(_ text: String) throws(FormatError) -> UInt64 {
        let trimmed = text.trimmingSpaces
        guard let (whole, fraction, rest) = scanDecimal(Substring(trimmed)), rest.isEmpty else {
            throw FormatError(kind: "RATE", value: text, reason: "expected \(rateHelp)")
        }
        // whole.fraction × 2^32, exactly, then rounded to the nearest step.
        var fixed = whole << 32
        if !fraction.isEmpty {
            let digits = fraction.prefix(18)
            var scale: Int128 = 1
            for _ in digits { scale *= 10 }
            fixed += ((Int128(digits)! << 32) + scale / 2) / scale
        }
        guard fixed >= Int128(TC_RATE_MIN), fixed <= Int128(TC_RATE_MAX) else {
            let problem = fixed == 0 ? "a rate of 0 would freeze the clock (use freeze)" : "out of range"
            throw FormatError(kind: "RATE", value: text, reason: "\(problem); expected \(rateHelp)")
        }
        return UInt64(fixed)
    }

    /// The rate as a decimal, to 9 significant fraction digits (`2`, `0.5`, `0.001`).
    public static func formatRate(_ fixed: UInt64) -> String {
        let whole = fixed >> 32
        let nanos = ((UInt128(fixed & 0xFFFF_FFFF) * 1_000_000_000) + (1 << 31)) >> 32
        if nanos >= 1_000_000_000 { return String(whole + 1) }
        return String(whole) + fractionDigits(UInt64(nanos))
    }

    /// A rate as a floating-point factor, for JSON and arithmetic.
    public static func rateFactor(_ fixed: UInt64) -> Double {
        Double(fixed) / 4_294_967_296
    }

    // MARK: Pieces

    /// `.5`, `.25`, … for a nanosecond count below one second; empty for 0.
    static func fractionDigits(_ nanos: UInt64) -> String {
        guard nanos > 0 else { return "" }
        var digits = String(nanos)
        digits = String(repeating: "0", count: 9 - digits.count) + digits
        while digits.last == "0" { digits.removeLast() }
        return "." + digits
    }

    /// Scans `123`, `1.5` or `.5`: the whole part, the fraction digits, and the rest.
    static func scanDecimal(_ text: Substring) -> (whole: Int128, fraction: Substring, rest: Substring)? {
        var index = text.startIndex
        var whole: Int128 = 0
        var digits = 0
        while index < text.endIndex, let digit = text[index].wholeNumberValue, text[index].isASCII {
            whole = whole * 10 + Int128(digit)
            if whole > Int128(Int64.max) { return nil }
            digits += 1
            index = text.index(after: index)
        }
        var fraction = text[index..<index]
        if index < text.endIndex, text[index] == "." {
            let start = text.index(after: index)
            var end = start
            while end < text.endIndex, text[end].isASCII, text[end].isNumber { end = text.index(after: end) }
            fraction = text[start..<end]
            if fraction.isEmpty { return nil }
            index = end
        }
        if digits == 0 && fraction.isEmpty { return nil }
        return (whole, fraction, text[index...])
    }

    static func scanUnit(_ text: Substring) -> (unit: Int128?, rest: Substring) {
        for (name, size) in [("ns", Int128(1)), ("us", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000),
                             ("m", 60_000_000_000), ("h", 3_600_000_000_000), ("d", 86_400_000_000_000)]
        where text.hasPrefix(name) {
            return (size, text.dropFirst(name.count))
        }
        return (nil, text)
    }

    /// whole.fraction × unit, rounded to the nearest nanosecond; nil past Int64.
    static func nanoseconds(whole: Int128, fraction: Substring, unit: Int128) -> Int128? {
        var value = whole * unit
        if !fraction.isEmpty {
            let digits = fraction.prefix(18)
            var scale: Int128 = 1
            var numerator: Int128 = 0
            for character in digits {
                numerator = numerator * 10 + Int128(character.wholeNumberValue!)
                scale *= 10
            }
            value += (numerator * unit + scale / 2) / scale
        }
        return value <= Int128(Int64.max) ? value : nil
    }

    static func parseEpochSeconds(_ text: Substring, original: String, invalid: FormatError) throws(FormatError) -> Int128 {
        var body = text
        var negative = false
        if body.first == "-" || body.first == "+" {
            negative = body.first == "-"
            body = body.dropFirst()
        }
        guard let (whole, fraction, rest) = scanDecimal(body), rest.isEmpty,
              let value = nanoseconds(whole: whole, fraction: fraction, unit: 1_000_000_000)
        else { throw invalid }
        return negative ? -value : value
    }

    static func parseISO8601(_ text: Substring, original: String, invalid: FormatError) throws(FormatError) -> Int128 {
        var scanner = DigitScanner(text)
        guard let year = scanner.number(digits: 4), scanner.take("-"),
              let month = scanner.number(digits: 2), scanner.take("-"),
              let day = scanner.number(digits: 2)
        else { throw invalid }
        func outOfRange(_ what: String) -> FormatError {
            FormatError(kind: "AT", value: original, reason: "\(what); expected \(instantHelp)")
        }
        guard (1...12).contains(month) else { throw outOfRange("month \(month) is not 1-12") }
        guard (1...daysIn(month: month, year: year)).contains(day) else {
            throw outOfRange("day \(day) does not exist in \(year)-\(month < 10 ? "0" : "")\(month)")
        }
        var nanosecondOfDay: Int128 = 0
        var offsetSeconds: Int128 = 0
        if scanner.take("T") || scanner.take("t") || scanner.take(" ") {
            (nanosecondOfDay, offsetSeconds) = try scanTime(&scanner, original: original, invalid: invalid)
        }
        guard scanner.atEnd else { throw invalid }
        let days = Int128(daysSinceEpoch(year: year, month: month, day: day))
        return (days * 86_400 - offsetSeconds) * 1_000_000_000 + nanosecondOfDay
    }

    /// Scans `hh:mm[:ss[.frac]]` and an optional zone (`Z`, `±hh`, `±hhmm`,
    /// `±hh:mm`; UTC without one), for a date's time and a time of day alike.
    /// Returns the nanoseconds after midnight and the zone's offset east of UTC, in seconds.
    static func scanTime(_ scanner: inout DigitScanner, original: String, invalid: FormatError) throws(FormatError)
        -> (nanosecondOfDay: Int128, offsetSeconds: Int128) {
        func outOfRange(_ what: String) -> FormatError {
            FormatError(kind: "AT", value: original, reason: "\(what); expected \(instantHelp)")
        }
        guard let hour = scanner.number(digits: 2), scanner.take(":"),
              let minute = scanner.number(digits: 2)
        else { throw invalid }
        var second: Int64 = 0
        var fractionNanos: Int128 = 0
        if scanner.take(":") {
            guard let value = scanner.number(digits: 2) else { throw invalid }
            second = value
            if scanner.take(".") || scanner.take(",") {
                let digits = scanner.digits()
                guard !digits.isEmpty,
                      let nanos = nanoseconds(whole: 0, fraction: digits, unit: 1_000_000_000)
                else { throw invalid }
                fractionNanos = nanos
            }
        }
        guard hour < 24 else { throw outOfRange("hour \(hour) is not 0-23") }
        guard minute < 60 else { throw outOfRange("minute \(minute) is not 0-59") }
        guard second < 60 else { throw outOfRange("second \(second) is not 0-59") }
        var offsetSeconds: Int128 = 0
        if scanner.take("Z") || scanner.take("z") {
            // UTC
        } else if let sign = scanner.takeSign() {
            guard let hours = scanner.number(digits: 2) else { throw invalid }
            var minutes: Int64 = 0
            if scanner.take(":") {
                guard let value = scanner.number(digits: 2) else { throw invalid }
                minutes = value
            } else if let value = scanner.number(digits: 2) {
                minutes = value
            }
            guard hours <= 23, minutes <= 59 else { throw outOfRange("offset is not -23:59 to +23:59") }
            offsetSeconds = Int128(sign * (hours * 3600 + minutes * 60))
        }
        let nanosecondOfDay = Int128(hour * 3600 + minute * 60 + second) * 1_000_000_000 + fractionNanos
        return (nanosecondOfDay, offsetSeconds)
    }

    static func isLeap(_ year: Int64) -> Bool { year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) }

    static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: return isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days from 1970-01-01 to a proleptic Gregorian date (years counted from March, so leap days come last).
    static func daysSinceEpoch(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = y.floorDivided(by: 400)
        let yearOfEra = y - era * 400
        let shiftedMonth = (month + 9) % 12
        let dayOfYear = (153 * shiftedMonth + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The inverse of daysSinceEpoch.
    static func civilDate(daysSinceEpoch days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = z.floorDivided(by: 146_097)
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

/// Reads fixed-width digit groups and separators from the front of a string.
struct DigitScanner {
    private var rest: Substring
    init(_ text: Substring) { rest = text }

    var atEnd: Bool { rest.isEmpty }

    mutating func take(_ character: Character) -> Bool {
        guard rest.first == character else { return false }
        rest = rest.dropFirst()
        return true
    }

    mutating func takeSign() -> Int64? {
        if take("+") { return 1 }
        if take("-") { return -1 }
        return nil
    }

    mutating func number(digits count: Int) -> Int64? {
        let candidate = rest.prefix(count)
        guard candidate.count == count, candidate.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        rest = rest.dropFirst(count)
        return Int64(candidate)
    }

    mutating func digits() -> Substring {
        let run = rest.prefix { $0.isASCII && $0.isNumber }
        rest = rest.dropFirst(run.count)
        return run
    }
}

extension Int64 {
    func floorDivided(by divisor: Int64) -> Int64 {
        let quotient = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }
}

extension String {
    var trimmingSpaces: String {
        String(drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed())
    }
}
