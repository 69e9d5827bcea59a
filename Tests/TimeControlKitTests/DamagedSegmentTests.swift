import Foundation
import Testing
import TimeShimC
@testable import TimeControlKit

/// SPEC §7 (issue 13): a damaged segment is refused, never trusted. Each
/// damage below is made to a real segment frozen at a known instant; four
/// consumers — `timectl status`, a verb, `timectl run -- date` and `date`
/// attached directly — must all refuse it with one line (and the verb must
/// write nothing), or, for damage to a field that does not decide the time,
/// all serve the right time. scripts/damage-segment does the same with
/// random bit flips, in bulk.
@Suite("Damaged segments")
struct DamagedSegmentTests {
    static let frozenSeconds: Int64 = 1_451_649_600  // 2016-01-01T12:00:00Z

    enum Damage: String, CaseIterable, CustomTestStringConvertible {
        case headerBitFlipped, clockOffsetOutOfRange, tableOutsideFile, stateBitFlipped,
             stateNanosecondsOutOfRange, stateRateOutOfRange, stateAnchoredInTheFuture,
             lockGarbage, schedulerPidNegative
        case sequenceFlipped, lockOfDeadProcess, lockOfReusedPid, countersFlipped

        var testDescription: String { rawValue }

        /// Damage to a field that does not decide the time, or that a writer recovers from.
        var harmless: Bool {
            [.sequenceFlipped, .lockOfDeadProcess, .lockOfReusedPid, .countersFlipped].contains(self)
        }

        func apply(to segment: UnsafeMutablePointer<tc_segment>) throws {
            let bytes = UnsafeMutableRawPointer(segment)
            let timeline = MemoryLayout<tc_segment>.offset(of: \tc_segment.timeline)!
            let seq = timeline + MemoryLayout<tc_timeline>.offset(of: \tc_timeline.seq)!
            let index = Int(bytes.load(fromByteOffset: seq, as: UInt32.self) & 1)
            func withCurrentState(_ change: (inout tc_clock_state) -> Void) {
                withUnsafeMutablePointer(to: &segment.pointee.timeline.copy) { copies in
                    copies.withMemoryRebound(to: tc_published.self, capacity: 2) { copy in
                        change(&copy[index].state)
                        copy[index].check = tc_state_check(&copy[index].state, nil)
                    }
                }
            }
            switch self {
            case .headerBitFlipped:
                segment.pointee.header.created_realtime ^= 1 << 20
            case .clockOffsetOutOfRange:
                segment.pointee.header.clock_offset.1.nsec = 2_000_000_000
                segment.pointee.header.check = tc_header_check(&segment.pointee.header)
            case .tableOutsideFile:
                segment.pointee.header.wait_capacity = 4096
                segment.pointee.header.wait_offset = UInt32(segment.pointee.header.total_size) - 4096
                segment.pointee.header.check = tc_header_check(&segment.pointee.header)
            case .stateBitFlipped:
                withUnsafeMutablePointer(to: &segment.pointee.timeline.copy) { copies in
                    copies.withMemoryRebound(to: tc_published.self, capacity: 2) { $0[index].state.offset.1.sec ^= 1 << 33 }
                }
            case .stateNanosecondsOutOfRange:
                withCurrentState { $0.offset.1.nsec = 1_500_000_000 }
            case .stateRateOutOfRange:
                withCurrentState { $0.rate = TC_RATE_MAX * 2 }
            case .stateAnchoredInTheFuture:
                withCurrentState { $0.t0.sec += 86_400 }
            case .lockGarbage:
                segment.pointee.writer_lock = UInt64.max
            case .schedulerPidNegative:
                segment.pointee.scheduler_pid = -1
            case .sequenceFlipped:
                bytes.storeBytes(of: bytes.load(fromByteOffset: seq, as: UInt32.self) ^ 1, toByteOffset: seq, as: UInt32.self)
            case .lockOfDeadProcess:
                let gone = Process()
                gone.executableURL = URL(fileURLWithPath: "/bin/true")
                try launch(gone)
                gone.waitUntilExit()
                segment.pointee.writer_lock = tc_lock_owner(gone.processIdentifier, 1)
            case .lockOfReusedPid:
                // pid 1 runs, but did not start at tick 1: its holder died and the pid was reused.
                segment.pointee.writer_lock = tc_lock_owner(1, 1)
            case .countersFlipped:
                segment.pointee.generation ^= 1 << 7
                segment.pointee.verbs_applied ^= 1 << 40
                segment.pointee.wait_map.5 ^= 1 << 3
            }
        }
    }

    /// Maps the segment file itself, as another process that damaged it would (TimeControlKit's own mapping is its own).
    static func withSegmentFile(_ path: String, _ body: (UnsafeMutablePointer<tc_segment>) throws -> Void) throws {
        let fd = open(path, O_RDWR | O_CLOEXEC)
        try #require(fd >= 0, "open \(path): errno \(errno)")
        defer { close(fd) }
        var info = stat()
        try #require(fstat(fd, &info) == 0)
        let size = Int(info.st_size)
        let base = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
        try #require(base != MAP_FAILED, "mmap \(path): errno \(errno)")
        defer { munmap(base, size) }
        try body(base!.bindMemory(to: tc_segment.self, capacity: 1))
    }

    @Test("every consumer refuses a damaged segment, or serves the right time", arguments: Damage.allCases)
    func consumers(damage: Damage) throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let session = try sandbox.session("s")
        try session.freeze(at: .absolute(nanosecondsSinceEpoch: Self.frozenSeconds * nanosecondsPerSecond))
        try Self.withSegmentFile(session.segmentPath) { try damage.apply(to: $0) }
        let path = session.segmentPath
        let damaged = try Data(contentsOf: URL(fileURLWithPath: path))

        var attached = sandbox.environment
        attached["LD_PRELOAD"] = Build.shim
        attached["TIMECTL_SEGMENT"] = path
        let direct = try runProgram("/bin/date", ["+%s.%N"], environment: attached, guardSeconds: 10)
        let status = try sandbox.timectl(["--session", "s", "status"], guardSeconds: 10)
        let run = try sandbox.timectl(["--session", "s", "run", "--", "date", "+%s.%N"], guardSeconds: 10)
        let verb = try sandbox.timectl(["--session", "s", "tick", "1"], guardSeconds: 10)
        for result in [direct, status, run, verb] {
            #expect(!result.timedOut)
            #expect(result.status >= 0 && result.status < 128, "no crash: \(result)")
        }
        if damage.harmless {
            #expect(direct.stdout == "\(Self.frozenSeconds).000000000\n", "\(direct)")
            #expect(status.stdout.contains("wall clock  2016-01-01T12:00:00Z  (frozen)"), "\(status)")
            #expect(run.stdout == "\(Self.frozenSeconds).000000000\n", "\(run)")
            #expect(verb.status == 0, "\(verb)")
            #expect(session.wallClockNanoseconds == (Self.frozenSeconds + 1) * nanosecondsPerSecond)
        } else {
            #expect(direct.status == 120 && direct.stdout.isEmpty, "\(direct)")
            for result in [direct, status, run, verb] {
                #expect(result.status != 0)
                #expect(result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
                #expect(result.stderr.contains("is damaged"), "\(result.stderr)")
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == damaged, "a refused verb writes nothing")
        }
    }

    /// A refused verb (here, out of range) leaves every byte of the segment as it was.
    @Test("a verb refused for its range leaves the segment untouched")
    func refusedVerbWritesNothing() throws {
        let sandbox = try Sandbox()
        let session = try sandbox.session("s")
        try session.freeze(at: .absolute(nanosecondsSinceEpoch: Self.frozenSeconds * nanosecondsPerSecond))
        let before = try Data(contentsOf: URL(fileURLWithPath: session.segmentPath))
        let refused = try sandbox.timectl("--session", "s", "tick", "300y")
        #expect(refused.status != 0)
        let huge = try sandbox.timectl("--session", "s", "tick", "100000d")
        #expect(huge.status != 0, "\(huge)")
        #expect(huge.stderr.contains("outside the supported range"), "\(huge.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: session.segmentPath)) == before)
    }

    /// `status` prints a wait-table entry with any deadline (here the extremes) instead of trapping.
    @Test("status shows extreme wait deadlines without crashing", arguments: [Int64.max, Int64.min, -1])
    func extremeWaitDeadline(deadline: Int64) throws {
        let sandbox = try Sandbox()
        let session = try sandbox.session("s")
        try session.freeze(at: .absolute(nanosecondsSinceEpoch: Self.frozenSeconds * nanosecondsPerSecond))
        let sleeper = Process()
        sleeper.executableURL = URL(fileURLWithPath: "/bin/sleep")
        sleeper.arguments = ["30"]
        try launch(sleeper)
        defer { kill(sleeper.processIdentifier, SIGKILL); sleeper.waitUntilExit() }  // SIGTERM: children inherit it blocked
        for clock in [VirtualClock.realtime, .monotonic] {
            let slot = session.mapping.claimWait(pid: sleeper.processIdentifier, thread: sleeper.processIdentifier,
                                                 kind: TC_WAIT_SLEEP, clock: clock, deadline: deadline)
            try #require(slot >= 0)
            let status = try sandbox.timectl("--session", "s", "status")
            #expect(status.status == 0, "\(status)")
            #expect(status.stdout.contains("sleep on CLOCK_"), "\(status)")
            let next = try sandbox.timectl("--session", "s", "tick", "--to-next")
            #expect(next.status >= 0 && next.status < 128, "\(next)")
            session.mapping.releaseWait(slot: slot, owner: tc_wait_owner(sleeper.processIdentifier, sleeper.processIdentifier))
        }
    }

    /// Another user created the session directory first (a fixed name in a shared /dev/shm).
    @Test("a session directory created by another user is named, with the way out",
          .enabled(if: OtherUser.unavailable == nil, "needs root to make a directory for another user (CI runs as root)"))
    func directoryOfAnotherUser() throws {
        let nobody = try OtherUser()
        let directory = try nobody.rootDirectory("taken")
        var environment = try Sandbox().environment
        environment["TIMECTL_DIR"] = directory
        // As root: the directory is another user's.
        try #require(chown(directory, OtherUser.uid, OtherUser.uid) == 0)
        let asRoot = try runProgram(Build.timectl, ["freeze"], environment: environment)
        // As another user: the directory is root's, and not even readable.
        try #require(chown(directory, 0, 0) == 0)
        let asNobody = try nobody.run(nobody.timectl, ["freeze"], environment: environment)
        for (result, owner) in [(asRoot, OtherUser.uid), (asNobody, 0)] {
            #expect(result.status != 0)
            #expect(result.stderr == "timectl: session directory \(directory) belongs to uid \(owner), another user; it must be a directory owned by you with mode 0700 (remove it, or set TIMECTL_DIR to a private directory of yours)\n", "\(result.stderr)")
        }
    }
}
