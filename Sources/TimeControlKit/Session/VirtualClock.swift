import TimeShimC

/// One of a session's virtual clocks (SPEC §2): each reads its track —
/// elapsed (monotonic) or wall — plus a constant fixed when the session was
/// created. The segment stores a clock as this number (`enum tc_vclock`).
public enum VirtualClock: Int32, Sendable, CaseIterable, Codable {
    /// `CLOCK_MONOTONIC` and `_COARSE`.
    case monotonic = 0
    /// `CLOCK_MONOTONIC_RAW`.
    case monotonicRaw = 1
    /// `CLOCK_BOOTTIME` and `_ALARM`.
    case boottime = 2
    /// `CLOCK_REALTIME`, `_COARSE` and `_ALARM`; `time()`, `gettimeofday()` and the like.
    case realtime = 3
    /// `CLOCK_TAI`.
    case tai = 4

    /// The clock a segment value names; an unknown number (a damaged entry) reads as monotonic.
    init(segmentValue: Int32) {
        self = VirtualClock(rawValue: segmentValue) ?? .monotonic
    }

    /// Its POSIX name, as `status` and traces print it: `CLOCK_MONOTONIC`.
    public var name: String {
        switch self {
        case .monotonic: return "CLOCK_MONOTONIC"
        case .monotonicRaw: return "CLOCK_MONOTONIC_RAW"
        case .boottime: return "CLOCK_BOOTTIME"
        case .realtime: return "CLOCK_REALTIME"
        case .tai: return "CLOCK_TAI"
        }
    }

    /// The clock printed as `name`, if it is one of these.
    public init?(named name: String) {
        guard let clock = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = clock
    }

    /// Whether it reads the wall track (its values are instants since the epoch).
    public var isWall: Bool { self == .realtime || self == .tai }
}
