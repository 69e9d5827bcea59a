// A compiled Swift program for the end-to-end tests: it reads the clocks
// Swift programs use, and sleeps the way they sleep.
//   timectl-swift-probe clocks               prints "date NS" and "continuous NS"
//   timectl-swift-probe task-sleep S         Task.sleep(for: .seconds(S)), then prints "slept NS" (virtual, continuous clock)
//   timectl-swift-probe dispatch-after S     DispatchQueue.main.asyncAfter(deadline: .now() + S), then prints "fired NS"
//   timectl-swift-probe task-loops N S...    one task per S, each doing N × Task.sleep(for: .seconds(S)),
//                                            printing "task S lap K at NS" after each sleep
import Dispatch
import Foundation

@inline(never)
func nanoseconds(_ instant: ContinuousClock.Instant) -> Int64 {
    // ContinuousClock.Instant stores its offset from the clock's origin (CLOCK_BOOTTIME on Linux) as a Duration.
    let duration = unsafeBitCast(instant, to: Duration.self)
    return duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
}

/// One line on stdout, written at once (the tests read it while the probe waits).
func say(_ line: String) {
    FileHandle.standardOutput.write((line + "\n").data(using: .utf8)!)
}

func usage() -> Never {
    FileHandle.standardError.write("usage: timectl-swift-probe clocks | task-sleep SECONDS | dispatch-after SECONDS | task-loops N SECONDS...\n".data(using: .utf8)!)
    exit(2)
}

let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "clocks":
    let date = Date()
    let seconds = date.timeIntervalSince1970.rounded(.down)
    let nanos = Int64(seconds) * 1_000_000_000 + Int64(((date.timeIntervalSince1970 - seconds) * 1e9).rounded())
    say("date \(nanos)")
    say("continuous \(nanoseconds(ContinuousClock.now))")
case "task-sleep":
    guard arguments.count == 2, let seconds = Int64(arguments[1]) else { usage() }
    let start = ContinuousClock.now
    say("sleeping")
    let done = DispatchSemaphore(value: 0)
    // Detached: top-level code is on the main actor, whose thread waits below.
    Task.detached {
        try await Task.sleep(for: .seconds(seconds))
        say("slept \(nanoseconds(ContinuousClock.now) - nanoseconds(start))")
        done.signal()
    }
    done.wait()
case "dispatch-after":
    guard arguments.count == 2, let seconds = Double(arguments[1]) else { usage() }
    let start = ContinuousClock.now
    say("waiting")
    DispatchQueue.main.asyncAfter(deadline: .now() + seconds) {
        say("fired \(nanoseconds(ContinuousClock.now) - nanoseconds(start))")
        exit(0)
    }
    dispatchMain()
case "task-loops":
    guard arguments.count >= 3, let laps = Int(arguments[1]) else { usage() }
    let periods = arguments.dropFirst(2).compactMap { Int64($0) }
    guard periods.count == arguments.count - 2 else { usage() }
    let start = ContinuousClock.now
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        await withTaskGroup(of: Void.self) { group in
            for period in periods {
                group.addTask {
                    for lap in 1...laps {
                        try? await Task.sleep(for: .seconds(period))
                        say("task \(period) lap \(lap) at \(nanoseconds(ContinuousClock.now) - nanoseconds(start))")
                    }
                }
            }
        }
        done.signal()
    }
    done.wait()
default:
    usage()
}
