// The driving side of scripts/bench-wake: issues verbs through
// TimeControlKit and measures how long a blocked waiter in another process
// takes to return, on the real clock (this program is a controller, so its
// clock is never virtual).
//   timectl-bench-wake WAITER latency sleep|timerfd|poll ITERATIONS
//   timectl-bench-wake WAITER idle THREADS:KIND SECONDS   (KIND sleep|poll|cond)
import Foundation
import TimeControlKit

func realNanoseconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write("timectl-bench-wake: \(message)\n".data(using: .utf8)!)
    exit(1)
}

/// Lines from a pipe, read as they come.
final class LineReader {
    let fd: Int32
    var pending = [UInt8]()
    init(fd: Int32) { self.fd = fd }
    func next() -> String? {
        while true {
            if let newline = pending.firstIndex(of: 10) {
                let line = String(decoding: pending[..<newline], as: UTF8.self)
                pending.removeSubrange(...newline)
                return line
            }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = read(fd, &chunk, chunk.count)
            if count <= 0 { return nil }
            pending += chunk[..<count]
        }
    }
}

let arguments = CommandLine.arguments
guard arguments.count == 5 else { fail("usage: timectl-bench-wake WAITER latency MODE ITERATIONS | WAITER idle THREADS:KIND SECONDS") }
let waiterPath = arguments[1], measure = arguments[2], mode = arguments[3]
guard let count = Int(arguments[4]), count > 0 else { fail("a positive count is needed") }

var template = Array("/tmp/timectl-bench-XXXXXX".utf8CString)
guard let directory = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }).map({ String(cString: $0) }) else {
    fail("mkdtemp failed")
}
defer { try? FileManager.default.removeItem(atPath: directory) }
let session: TimeSession
let shimEnvironment: ShimEnvironment
do {
    session = try TimeSession.create(named: "bench", in: SessionDirectory(path: directory))
    try session.freeze()
    shimEnvironment = try ShimEnvironment(session: session)
} catch {
    fail("\(error)")
}

let process = Process()
process.executableURL = URL(fileURLWithPath: waiterPath)
let idle = mode.split(separator: ":").map(String.init)
process.arguments = measure == "idle" ? ["idle"] + idle : [mode]
var environment: [String: String] = [:]
for entry in shimEnvironment.environmentEntries() {
    let parts = entry.split(separator: "=", maxSplits: 1)
    if parts.count == 2 { environment[String(parts[0])] = String(parts[1]) }
}
process.environment = environment
let pipe = Pipe()
process.standardOutput = pipe
do { try process.run() } catch { fail("cannot start \(waiterPath): \(error)") }
defer { process.terminate() }
let reader = LineReader(fd: pipe.fileHandleForReading.fileDescriptor)
let pid = process.processIdentifier

/// Until the waiter's next one-second wait is listed, i.e. it is (about to be) blocked.
func waitUntilBlocked(expectedWaits: Int = 1) {
    let deadline = realNanoseconds() + 10_000_000_000
    while realNanoseconds() < deadline {
        let waits = session.pendingWaits().filter { $0.pid == pid && $0.remainingNanoseconds > 0 }
        if waits.count >= expectedWaits { return }
        usleep(200)
    }
    fail("the waiter never blocked")
}

if measure == "latency" {
    var samples: [Int64] = []
    for iteration in 0..<(count + 20) {
        waitUntilBlocked()
        let issued = realNanoseconds()
        do { try session.advance(by: .seconds(1)) } catch { fail("\(error)") }
        guard let line = reader.next(), let woke = Int64(line) else { fail("the waiter stopped") }
        if iteration >= 20 { samples.append(woke - issued) }  // the first ones warm up
    }
    samples.sort()
    func percentile(_ p: Double) -> Double { Double(samples[min(samples.count - 1, Int(Double(samples.count) * p))]) / 1000 }
    print(String(format: "%@ p50 %.1f p90 %.1f p99 %.1f max %.1f us (%d wakes)", mode, percentile(0.5), percentile(0.9),
                 percentile(0.99), Double(samples.last!) / 1000, samples.count))
} else {
    guard idle.count == 2, let threads = Int(idle[0]), reader.next() == "ready" else { fail("the idle waiter did not start") }
    waitUntilBlocked(expectedWaits: threads)
    func cpuTicks() -> Int64 {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return (Int64(fields[11]) ?? 0) + (Int64(fields[12]) ?? 0)
    }
    let before = cpuTicks(), started = realNanoseconds()
    sleep(UInt32(count))
    let used = Double(cpuTicks() - before) / Double(sysconf(Int32(_SC_CLK_TCK)))
    let wall = Double(realNanoseconds() - started) / 1e9
    print(String(format: "%d threads in %@, frozen: %.3f%% of a core over %.1f s", threads, idle[1], used / wall * 100, wall))
}
