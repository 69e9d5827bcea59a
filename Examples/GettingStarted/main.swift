// A first look at TimeControlKit, runnable from the package root:
//
//     scripts/build.sh && swift run timectl-example
//
// A Python worker sleeps 30 seconds and reports; this program's own code
// sleeps 10 seconds on the session's clock. Neither waits in real time:
// the session is frozen, and the program moves it from deadline to deadline.
import Foundation
import TimeControlKit

func main() async throws {
    let began = Date()
    let session = try TimeSession.temporary(frozenAt: Date(timeIntervalSince1970: 1_451_649_600))
    print("session \(session.name), frozen at \(session.date)")

    let worker = try session.spawn("python3", ["-c", """
        import datetime, time
        time.sleep(30)
        print("worker: woke at", datetime.datetime.now(datetime.timezone.utc).isoformat(), flush=True)
        """])
    let clock = session.clock
    let start = clock.now
    let reminder = Task {
        try await clock.sleep(for: .seconds(10))
        print("in-process: woke after \(start.duration(to: clock.now)) of virtual time")
    }

    // The handshake: advance only once both sleeps are registered.
    let waits = try await session.waitForPendingWaits(count: 2)
    for wait in waits {
        print("pending: \(wait.command) (pid \(wait.pid)) \(wait.kind), due in \(TimeFormats.formatDuration(wait.remainingNanoseconds))")
    }

    try session.advanceToNextDeadline()   // +10 s: the in-process sleep
    try await reminder.value
    try session.advanceToNextDeadline()   // +30 s: the worker
    try await worker.waitForExit()
    print(worker.standardOutput, terminator: "")

    // The same, as one check in virtual time.
    let counter = try session.spawn("python3", ["-c", "import time\nfor i in range(1, 4): time.sleep(60); print(i, flush=True)"])
    let run = try await session.run(until: { counter.standardOutput.contains("3") }, within: .seconds(600))
    print("counted to 3 in \(run.steps) steps, \(run.elapsed) of virtual time")

    print(String(format: "all of it took %.3f s of real time", Date().timeIntervalSince(began)))
}

do {
    try await main()
} catch {
    print("timectl-example: \(error)")
    exit(1)
}
