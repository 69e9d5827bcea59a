import Foundation
import Testing
@testable import TimeControlKit

/// The host's `CLOCK_REALTIME − CLOCK_BOOTTIME` in ns, read in the test process
/// (never attached): what setting the host's wall clock changes, and nothing else.
func hostWallClockOffset() -> Int64 {
    var realtime = timespec(), boottime = timespec()
    clock_gettime(CLOCK_BOOTTIME, &boottime)
    clock_gettime(CLOCK_REALTIME, &realtime)
    return (Int64(realtime.tv_sec) - Int64(boottime.tv_sec)) * nanosecondsPerSecond
        + Int64(realtime.tv_nsec) - Int64(boottime.tv_nsec)
}

/// Runs `body`, in which controlled programs set their clock, so that a
/// regression cannot leave the test machine's clock moved (CI runs as
/// root): if the host's wall clock moved against CLOCK_BOOTTIME by more than
/// half a second (NTP slews it far less), it is put back where it was, and
/// the test fails.
func guardingHostClock<T>(sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> T) throws -> T {
    let before = hostWallClockOffset()
    defer {
        let moved = hostWallClockOffset() - before
        if abs(moved) > nanosecondsPerSecond / 2 {
            var boottime = timespec()
            clock_gettime(CLOCK_BOOTTIME, &boottime)
            let restored = Int64(boottime.tv_sec) * nanosecondsPerSecond + Int64(boottime.tv_nsec) + before
            var value = timespec(tv_sec: Int(restored / nanosecondsPerSecond), tv_nsec: Int(restored % nanosecondsPerSecond))
            let outcome = clock_settime(CLOCK_REALTIME, &value) == 0 ? "it was put back" : "putting it back failed (errno \(errno))"
            Issue.record("a controlled program moved the host's wall clock by \(Double(moved) / 1e9) s; \(outcome)",
                         sourceLocation: sourceLocation)
        }
    }
    return try body()
}
