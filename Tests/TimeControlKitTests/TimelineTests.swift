import Foundation
import Testing
@testable import TimeControlKit
import TimeShimC

@Suite("The timeline model and its invariants (SPEC §2)")
struct TimelineTests {
    static let y2016: Int64 = 1_451_649_600_000_000_000

    func readAll(_ session: TimeSession) -> [Int64] {
        [VirtualClock.monotonic, .monotonicRaw, .boottime, .realtime, .tai].map { session.mapping.read($0) }
    }

    @Test func freezeStopsEveryClockAndTickMovesThemAll() throws {
        let sandbox = try Sandbox()
        let session = try sandbox.session("t")
        try session.freeze(at: .absolute(nanosecondsSinceEpoch: Self.y2016))
        let before = readAll(session)
        #expect(before[3] == Self.y2016)
        usleep(20_000)
        #expect(readAll(session) == before, "a frozen session does not move with real time")
        try session.advance(by: .seconds(3))
        #expect(readAll(session) == before.map { $0 + 3 * nanosecondsPerSecond })
    }

    @Test func setMovesOnlyTheWallClock() throws {
        let sandbox = try Sandbox()
        let session = try sandbox.session("t")
        try session.freeze(at: .absolute(nanosecondsSinceEpoch: Self.y2016))
        let before = readAll(session)
        try session.setWallClock(to: .relative(nanoseconds: 86_400 * nanosecondsPerSecond))
        let after = readAll(session)
        #expect(Array(after[0...2]) == Array(before[0...2]), "monotonic clocks unaffected")
        #expect(after[3] == before[3] + 86_400 * nanosecondsPerSecond)
        #expect(after[4] - after[3] == before[4] - before[3], "TAI keeps its offset from the wall clock")
        try session.setWallClock(to: .absolute(nanosecondsSinceEpoch: 0))
        #expect(session.wallClockNanoseconds == 0)
    }

    @Test func rateScalesElapsedTime() throws {
        let sandbox = try Sandbox()
        let session = try sandbox.session("t")
        try session.setRate(try TimeRate(parsing: "1000"))
        let realStart = tc_real_ns(CLOCK_MONOTONIC)
        let virtualStart = session.monotonicNanoseconds
        usleep(50_000)
        let virtualElapsed = session.monotonicNanoseconds - virtualStart
        let realElapsed = tc_real_ns(CLOCK_MONOTONIC) - realStart
        // The virtual window lies inside the real one: at most 1000× as long.
        #expect(virtualElapsed <= realElapsed * 1000)
        #expect(virtualElapsed >= 1000 * 50_000_000 - 1_000_000, "at least 1000 × 50 ms passed")
        #expect(session.status().rateText == "1000")
    }

    @Test func resetReturnsWallClockToRealTimeAndKeepsMonotonicGoing() throws {
        let sandbox = try Sandbox()
        let session = try sandbox.session("t")
        try session.freeze(at: .absolute(nanosecondsSinceEpoch: Self.y2016))
        try session.advance(by: .seconds(100))
        let monotonicBefore = session.monotonicNanoseconds
        try session.reset()
        // The session's wall clock against the real one read just before it. A pair
        // this thread was descheduled between (more than 1 ms on the real monotonic
        // clock across it) is read again: the check is on the clocks, not on the
        // scheduler, which on a loaded machine can hold a thread longer than 100 ms.
        var realWall: Int64 = 0, sessionWall: Int64 = 0
        for _ in 0..<100 {
            let pairStart = tc_real_ns(CLOCK_MONOTONIC)
            realWall = tc_real_ns(CLOCK_REALTIME)
            sessionWall = session.wallClockNanoseconds
            if tc_real_ns(CLOCK_MONOTONIC) - pairStart < 1_000_000 { break }
        }
        #expect(abs(sessionWall - realWall) < 100_000_000)
        #expect(session.monotonicNanoseconds >= monotonicBefore)
        #expect(!session.status().frozen)
    }

    @Test func negativeAdvanceIsRefusedAndChangesNothing() throws {
        let sandbox = try Sandbox()
        let session = try sandbox.session("t")
        try session.freeze()
        let before = readAll(session)
        #expect(throws: TimeControlError.self) { try session.advance(by: .seconds(-3)) }
        #expect(readAll(session) == before)
    }

    @Test func verbsOutsideTheSupportedRangeChangeNothing() throws {
        let sandbox = try Sandbox()
        let session = try sandbox.session("t")
        try session.freeze(at: .absolute(nanosecondsSinceEpoch: Self.y2016))
        let before = readAll(session)
        #expect(throws: TimeControlError.self) { try session.advance(by: .seconds(300 * 365 * 86_400)) }
        #expect(throws: TimeControlError.self) { try session.setWallClock(to: .relative(nanoseconds: -200 * 365 * 86_400 * nanosecondsPerSecond)) }
        #expect(readAll(session) == before)
        #expect(session.status().verbsApplied == 1)
    }

    /// Invariant 1: whatever verbs run, no monotonic clock ever decreases —
    /// checked by a reader thread hammering the clocks while random verbs land.
    /// The reads are interleaved with the verbs by construction, not by the
    /// scheduler's good will: on a loaded machine the reader thread could first
    /// get to read after the last verb (the verbs take some 50 ms), leaving
    /// nothing checked. So the verbs begin after the reader's first read, and
    /// each batch of them waits for a whole read of the reader's begun since
    /// the batch began (the last one after the last verb).
    @Test func monotonicClocksNeverDecreaseUnderRandomVerbs() throws {
        let sandbox = try Sandbox()
        let session = try sandbox.session("t")
        let stop = ManagedAtomicFlag()
        let violations = ManagedCounter()
        let reads = ManagedCounter()
        let reader = BackgroundWork {
            var last = [Int64](repeating: .min, count: 3)
            while !stop.isSet {
                for (index, clock) in [VirtualClock.monotonic, .monotonicRaw, .boottime].enumerated() {
                    let value = session.mapping.read(clock)
                    if value < last[index] { violations.increment() }
                    last[index] = value
                }
                reads.increment()
            }
        }
        // A verb refused or a reader that never reads ends the test: the reader stops with it.
        defer {
            stop.set()
            reader.wait()
        }
        let batches = 30, verbsPerBatch = 100
        // The guards only end a test whose reader never runs; they time nothing.
        try #require(reads.wait(untilAbove: 0, guardSeconds: 60), "the reader thread never read the clocks")
        var generator = SystemRandomNumberGenerator()
        var lastSeen = [Int64](repeating: .min, count: 3)
        for batch in 0..<batches {
            let readsBefore = reads.value
            for _ in 0..<verbsPerBatch {
                let verb: TimeVerb
                switch Int.random(in: 0..<6, using: &generator) {
                case 0: verb = .freeze(at: Bool.random() ? nil : .relative(nanoseconds: Int64.random(in: -1_000_000_000_000...1_000_000_000_000)))
                case 1: verb = .run(at: TimeRate(unchecked: UInt64.random(in: TC_RATE_MIN...(TC_RATE_ONE * 10_000))))
                case 2: verb = .advance(nanoseconds: Int64.random(in: 0...10_000_000_000))
                case 3: verb = .setWallClock(.relative(nanoseconds: Int64.random(in: -1_000_000_000_000...1_000_000_000_000)))
                case 4: verb = .reset
                default: verb = .run(at: .realTime)
                }
                try session.apply(verb)
                for (index, clock) in [VirtualClock.monotonic, .monotonicRaw, .boottime].enumerated() {
                    let value = session.mapping.read(clock)
                    #expect(value >= lastSeen[index], "\(verb.commandLine) moved clock \(index) back")
                    lastSeen[index] = value
                }
            }
            // Two more reads end: the second began after the first ended, so after the batch began.
            try #require(reads.wait(untilAbove: readsBefore + 1, guardSeconds: 60),
                         "the reader thread stopped reading during batch \(batch) of the verbs")
        }
        stop.set()
        reader.wait()
        #expect(violations.value == 0)
        #expect(reads.value >= 1 + 2 * batches, "a read before the verbs, two during or after each batch")
    }

    @Test func twoSessionsAreIndependent() throws {
        let sandbox = try Sandbox()
        let first = try sandbox.session("first"), second = try sandbox.session("second")
        try first.freeze(at: .absolute(nanosecondsSinceEpoch: Self.y2016))
        try second.freeze(at: .absolute(nanosecondsSinceEpoch: 0))
        try first.advance(by: .seconds(10))
        #expect(first.wallClockNanoseconds == Self.y2016 + 10 * nanosecondsPerSecond)
        #expect(second.wallClockNanoseconds == 0)
    }

    @Test func sessionNamesAreValidated() throws {
        let sandbox = try Sandbox()
        for name in ["", ".hidden", "-dash", "a/b", "white space", String(repeating: "x", count: 64), "ünïcode"] {
            #expect(throws: TimeControlError.self, "\(name)") { _ = try TimeSession.openOrCreate(named: name, in: sandbox.sessions) }
        }
        _ = try TimeSession.openOrCreate(named: String(repeating: "x", count: 63), in: sandbox.sessions)
        #expect(try sandbox.sessions.sessionNames() == [String(repeating: "x", count: 63)])
    }

    @Test func openingAMissingSessionFailsWithoutCreatingIt() throws {
        let sandbox = try Sandbox()
        #expect(throws: TimeControlError.self) { _ = try TimeSession.open(named: "absent", in: sandbox.sessions) }
        #expect(try sandbox.sessions.sessionNames().isEmpty)
    }
}

final class ManagedAtomicFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var flag = false
    var isSet: Bool { lock.withLock { flag } }
    func set() { lock.withLock { flag = true } }
}

/// A count that another thread can wait on.
final class ManagedCounter: @unchecked Sendable {
    private let condition = NSCondition()
    private var count = 0
    var value: Int { condition.withLock { count } }

    func increment() {
        condition.withLock {
            count += 1
            condition.broadcast()
        }
    }

    /// Waits until the count is above `value`: true once it is, false if
    /// `guardSeconds` of real time pass first (a guard against a hang).
    func wait(untilAbove value: Int, guardSeconds: Double) -> Bool {
        let deadline = Date(timeIntervalSinceNow: guardSeconds)
        return condition.withLock {
            while count <= value {
                if !condition.wait(until: deadline) { return count > value }
            }
            return true
        }
    }
}
