import TimeShimC

/// How fast virtual time runs against real time, as the segment stores it
/// (fixed point, 32 fraction bits). `1` is real time; frozen is not a rate.
public struct TimeRate: Sendable, Hashable, CustomStringConvertible {
    /// The factor × 2^32.
    public let fixedPoint: UInt64

    /// Rate 1: virtual time runs as fast as real time.
    public static let realTime = TimeRate(unchecked: TC_RATE_ONE)

    init(unchecked fixedPoint: UInt64) {
        self.fixedPoint = fixedPoint
    }

    /// Parses a RATE such as `2`, `0.5` or `10`.
    public init(parsing text: String) throws(TimeControlError) {
        do {
            fixedPoint = try TimeFormats.parseRate(text)
        } catch {
            throw .invalidInput(error)
        }
    }

    /// A rate from a factor in 0.001 ... 1000000.
    public init(_ factor: Double) throws(TimeControlError) {
        guard factor.isFinite else {
            throw .invalidInput(FormatError(kind: "RATE", value: "\(factor)", reason: "expected \(TimeFormats.rateHelp)"))
        }
        try self.init(parsing: String(factor))
    }

    /// The rate as a factor (2 is twice as fast as real time).
    public var factor: Double { TimeFormats.rateFactor(fixedPoint) }
    /// The rate as `timectl` prints it: `2`, `0.5`.
    public var description: String { TimeFormats.formatRate(fixedPoint) }
}

/// A change to a session's timeline (SPEC §2). Each is applied atomically.
public enum TimeVerb: Sendable, Hashable {
    /// Stops the clocks, wall and monotonic; with a target, the wall clock jumps there first.
    case freeze(at: WallClockTarget?)
    /// Stops the wall clocks only (`freeze --wall`); with a target, they jump there first.
    /// Monotonic clocks, sleeps, timeouts and timers go on at the session's rate.
    case freezeWall(at: WallClockTarget?)
    /// Sets the rate of the clocks that run (`rate`): a wall clock stopped by
    /// ``freezeWall(at:)`` stays stopped; a frozen session runs again.
    case run(at: TimeRate)
    /// Lets every clock run at `rate` (`resume`), a stopped wall clock
    /// included, from where it stands.
    case resume(at: TimeRate)
    /// Moves every clock forward by a non-negative number of nanoseconds (`tick`).
    case advance(nanoseconds: Int64)
    /// Moves the wall clock, forward or back; monotonic clocks are untouched (`set`).
    case setWallClock(WallClockTarget)
    /// Wall clock back to real time, rate 1; monotonic clocks keep going forward.
    case reset
    /// Moves every clock forward until `clock` reads `nanoseconds` — a
    /// pending wait's deadline (`tick --to-next`, a scheduler's step);
    /// nothing happens if it already does (time never goes back).
    case advanceToDeadline(nanoseconds: Int64, on: VirtualClock)

    /// The verb as the command line spells it, for messages.
    public var commandLine: String {
        switch self {
        case .freeze(nil): return "freeze"
        case .freeze(let target?): return "freeze \(Self.describe(target))"
        case .freezeWall(nil): return "freeze --wall"
        case .freezeWall(let target?): return "freeze --wall \(Self.describe(target))"
        case .run(let rate): return rate == .realTime ? "resume" : "rate \(rate)"
        case .resume(let rate): return rate == .realTime ? "resume" : "resume \(rate)"
        case .advance(let nanoseconds): return "tick \(TimeFormats.formatDuration(nanoseconds))"
        case .setWallClock(let target): return "set \(Self.describe(target))"
        case .reset: return "reset"
        case .advanceToDeadline(let nanoseconds, let clock):
            return "advance to \(clock.name) \(clock.isWall ? TimeFormats.formatInstant(nanoseconds) : TimeFormats.formatDuration(nanoseconds))"
        }
    }

    private static func describe(_ target: WallClockTarget) -> String {
        switch target {
        case .absolute(let instant): return TimeFormats.formatInstant(instant)
        case .relative(let shift): return (shift >= 0 ? "+" : "") + TimeFormats.formatDuration(shift)
        case .timeOfDay(let nanoseconds, let offset):
            return TimeFormats.formatTimeOfDay(nanosecondsAfterMidnight: nanoseconds, utcOffsetSeconds: offset)
        }
    }

    /// The verb for the segment. A time of day becomes an absolute instant
    /// on the date `wallClockNow()` shows (called only then).
    func cVerb(wallClockNow: () -> Int64) -> tc_verb {
        var verb = tc_verb()
        func wall(_ target: WallClockTarget?) {
            switch target {
            case nil: verb.wall = Int32(TC_WALL_KEEP.rawValue)
            case .absolute(let instant)?:
                verb.wall = Int32(TC_WALL_ABSOLUTE.rawValue)
                verb.value = instant
            case .timeOfDay(let nanoseconds, let offset)?:
                verb.wall = Int32(TC_WALL_ABSOLUTE.rawValue)
                verb.value = TimeFormats.instant(timeOfDay: nanoseconds, utcOffsetSeconds: offset, onDateAt: wallClockNow())
            case .relative(let shift)?:
                verb.wall = Int32(TC_WALL_RELATIVE.rawValue)
                verb.value = shift
            }
        }
        switch self {
        case .freeze(let target):
            verb.kind = Int32(TC_VERB_FREEZE.rawValue)
            wall(target)
        case .freezeWall(let target):
            verb.kind = Int32(TC_VERB_FREEZE_WALL.rawValue)
            wall(target)
        case .run(let rate):
            verb.kind = Int32(TC_VERB_SET_RATE.rawValue)
            verb.rate = rate.fixedPoint
        case .resume(let rate):
            verb.kind = Int32(TC_VERB_RESUME.rawValue)
            verb.rate = rate.fixedPoint
        case .advance(let nanoseconds):
            verb.kind = Int32(TC_VERB_ADVANCE.rawValue)
            verb.value = nanoseconds
        case .setWallClock(let target):
            verb.kind = Int32(TC_VERB_SET_WALL.rawValue)
            wall(target)
        case .reset:
            verb.kind = Int32(TC_VERB_RESET.rawValue)
        case .advanceToDeadline(let nanoseconds, let clock):
            verb.kind = Int32(TC_VERB_ADVANCE_TO.rawValue)
            verb.vclock = clock.rawValue
            verb.value = nanoseconds
        }
        return verb
    }
}
