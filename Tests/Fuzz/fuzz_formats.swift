// libFuzzer target (swiftc -sanitize=fuzzer): the DURATION, AT and RATE
// parsers and the formatters of TimeFormats.swift. Any input either parses
// or throws a FormatError; what parses prints and parses back to the same
// value. Built and run by scripts/fuzz.sh with TimeFormats.swift alone.
import TimeShimC

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: count), as: UTF8.self)
    if let duration = try? TimeFormats.parseDuration(text, allowNegative: true) {
        let printed = TimeFormats.formatDuration(duration)
        guard (try? TimeFormats.parseDuration(printed, allowNegative: true)) == duration else {
            fatalError("duration \(text) printed as \(printed) does not parse back")
        }
        _ = TimeFormats.formatSeconds(duration, decimals: Int(count % 12))
    }
    if case .absolute(let instant)? = try? TimeFormats.parseInstant(text) {
        let printed = TimeFormats.formatInstant(instant)
        guard case .absolute(instant)? = try? TimeFormats.parseInstant(printed) else {
            fatalError("instant \(text) printed as \(printed) does not parse back")
        }
    }
    if case .timeOfDay(let nanoseconds, let offset)? = try? TimeFormats.parseInstant(text) {
        let printed = TimeFormats.formatTimeOfDay(nanosecondsAfterMidnight: nanoseconds, utcOffsetSeconds: offset)
        guard case .timeOfDay(nanoseconds, offset)? = try? TimeFormats.parseInstant(printed) else {
            fatalError("time of day \(text) printed as \(printed) does not parse back")
        }
        _ = TimeFormats.instant(timeOfDay: nanoseconds, utcOffsetSeconds: offset, onDateAt: Int64(count & 0xFFFF) * 86_399_999_999_999)
    }
    if let rate = try? TimeFormats.parseRate(text) {
        _ = TimeFormats.formatRate(rate)
        _ = TimeFormats.rateFactor(rate)
    }
    if count >= 8 {
        _ = TimeFormats.formatInstant(data.withMemoryRebound(to: Int64.self, capacity: 1) { $0.pointee })
    }
    return 0
}

// TimeFormats.formatDuration(_: Duration) calls this; the fuzzer never does.
enum SessionClock {
    enum Instant {
        static func nanoseconds(of duration: Duration) -> Int64 { fatalError("not part of the fuzz target") }
    }
}
