#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import TimeShimC

/// The library's own guards against a hang (``ControlledProcess/waitForExit(realTimeLimit:)``
/// and the other `realTimeLimit:`s): actions run once a span of real time
/// has passed, on one thread of their own.
///
/// Not `Task.sleep` or a dispatch timer: in a process the shim controls —
/// a test's own process under TimeControlKitTesting's trait — those wait on
/// the session's time, so a guard would never fire on a frozen session, or
/// fire at once when auto-advance jumps. This thread reads the real clock
/// (``tc_real_ns``) and blocks in raw futex waits, which the shim never sees.
final class RealTimeGuards: @unchecked Sendable {
    // @unchecked: `pokes` is a futex word, only touched through atomic C calls.
    static let shared = RealTimeGuards()

    private struct State {
        var actions: [Int: (deadline: Int64, action: @Sendable () -> Void)] = [:]
        var nextID = 0
        var threadRunning = false
    }

    private let state = Mutex(State())
    private let pokes: UnsafeMutablePointer<UInt32>

    private init() {
        pokes = .allocate(capacity: 1)
        pokes.initialize(to: 0)
    }

    /// Runs `action` on the guards' thread once `duration` of real time has passed, unless cancelled first.
    func schedule(after duration: Duration, _ action: @escaping @Sendable () -> Void) -> Int {
        let deadline = tc_real_ns(CLOCK_MONOTONIC).addingSaturating(SessionClock.Instant.nanoseconds(of: duration))
        let (id, start) = state.withLock { state in
            state.nextID += 1
            state.actions[state.nextID] = (deadline, action)
            let start = !state.threadRunning
            state.threadRunning = true
            return (state.nextID, start)
        }
        if start { startThread { [self] in run() } }
        tc_word_poke(pokes)
        return id
    }

    /// Forgets the action `id`; nothing happens if it ran already.
    func cancel(_ id: Int) {
        _ = state.withLock { $0.actions.removeValue(forKey: id) }
    }

    private func run() {
        while true {
            let poked = tc_word_load(pokes)
            let now = tc_real_ns(CLOCK_MONOTONIC)
            let (due, next): ([@Sendable () -> Void], Int64?) = state.withLock { state in
                let due = state.actions.filter { $0.value.deadline <= now }
                for id in due.keys { state.actions.removeValue(forKey: id) }
                return (due.values.map(\.action), state.actions.values.map(\.deadline).min())
            }
            for action in due { action() }
            if !due.isEmpty { continue }
            tc_word_wait(pokes, poked, next.map { $0 - now } ?? -1)
        }
    }
}
