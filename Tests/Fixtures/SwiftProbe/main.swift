// A compiled Swift program for the end-to-end tests: it reads the clocks
// Swift programs use, and (for the waits issue) sleeps the way they sleep.
//   timectl-swift-probe clocks    prints "date NS" and "continuous NS"
import Foundation

@inline(never)
func nanoseconds(_ instant: ContinuousClock.Instant) -> Int64 {
    // ContinuousClock.Instant stores its offset from the clock's origin (CLOCK_BOOTTIME on Linux) as a Duration.
    let duration = unsafeBitCast(instant, to: Duration.self)
    return duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
}

let mode = CommandLine.arguments.dropFirst().first ?? "clocks"
switch mode {
case "clocks":
    let date = Date()
    let seconds = date.timeIntervalSince1970.rounded(.down)
    let nanos = Int64(seconds) * 1_000_000_000 + Int64(((date.timeIntervalSince1970 - seconds) * 1e9).rounded())
    print("date \(nanos)")
    print("continuous \(nanoseconds(ContinuousClock.now))")
default:
    FileHandle.standardError.write("usage: timectl-swift-probe clocks\n".data(using: .utf8)!)
    exit(2)
}
