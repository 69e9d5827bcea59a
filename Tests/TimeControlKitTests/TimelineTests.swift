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
        let realWall = tc_real_ns(CLOCK_REALTIME)
        #expect(abs(session.wallClockNanoseconds - realWall) < 100_000_000)
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
        var generator = SystemRandomNumberGenerator()
        var lastSeen = [Int64](repeating: .min, count: 3)
        for _ in 0..<3000 {
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
        stop.set()
        reader.wait()
        #expect(violations.value == 0)
        #expect(reads.value > 0)
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

final class ManagedCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    var value: Int { lock.withLock { count } }
    func increment() { lock.withLock { count += 1 } }
}
