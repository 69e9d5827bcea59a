#if canImport(Glibc)
import Glibc
#endif
import TimeShimC

/// A session's state at one instant, as `timectl status` shows it.
public struct SessionStatus: Sendable, Codable, Hashable {
    /// The session's name.
    public var session: String
    /// Path of the segment file.
    public var segment: String
    /// Virtual wall clock, ISO 8601 UTC.
    public var wallClock: String
    /// Virtual wall clock, in nanoseconds since the epoch.
    public var wallClockNanoseconds: Int64
    /// Virtual `CLOCK_MONOTONIC`.
    public var monotonicNanoseconds: Int64
    /// Virtual time elapsed since the session was created (E in SPEC §2).
    public var elapsedNanoseconds: Int64
    /// Whether every clock stands still (`freeze`).
    public var frozen: Bool
    /// Whether the wall clocks stand still: after `freeze --wall`, while the
    /// monotonic clocks run at ``rate``, and whenever ``frozen``.
    public var wallFrozen: Bool
    /// The monotonic clocks' rate (and the wall clocks' unless ``wallFrozen``); 0 when frozen.
    public var rate: Double
    /// The rate as entered (`0.5`, `2`), exactly as the segment holds it.
    public var rateText: String
    /// Real wall-clock time at which the session was created.
    public var createdAt: String
    /// Number of verbs applied since creation.
    public var verbsApplied: UInt64
    /// The processes attached to the session that still run.
    public var processes: [RunningProcess]
    /// Pending waits and armed timers, earliest first.
    public var waits: [PendingWait]
    /// The attached processes' blocked threads, with what each waits on and on which side of the session.
    public var blocked: [BlockedThread]
    /// The auto-advance scheduler that owns the session, if one runs.
    public var scheduler: SchedulerStatus?
}

/// The auto-advance scheduler of a session (`timectl run --auto-advance`, `timectl daemon`).
public struct SchedulerStatus: Sendable, Codable, Hashable {
    /// Its process id.
    public var pid: Int32
    /// Its process name.
    public var command: String
    /// The steps it has taken since it started.
    public var steps: UInt64
    /// What runs it, and so how it ends.
    public var kind: SchedulerKind
}

/// What runs a session's scheduler, and so how it ends.
public enum SchedulerKind: String, Sendable, Codable, Hashable {
    /// One command's (`timectl run --auto-advance`, `timectl replay`): it ends when the command exits.
    case command
    /// `timectl daemon`: it ends with `timectl daemon --stop`.
    case daemon
    /// ``TimeSession/startAutoAdvance(keepRate:maxSteps:)`` in a test process: it ends with ``AutoAdvance/stop()``.
    case harness
    /// Not known yet (the scheduler is starting).
    case unknown

    init(_ raw: UInt32) {
        switch raw {
        case TC_SCHEDULER_COMMAND.rawValue: self = .command
        case TC_SCHEDULER_DAEMON.rawValue: self = .daemon
        case TC_SCHEDULER_HARNESS.rawValue: self = .harness
        default: self = .unknown
        }
    }

    var raw: UInt32 {
        switch self {
        case .command: TC_SCHEDULER_COMMAND.rawValue
        case .daemon: TC_SCHEDULER_DAEMON.rawValue
        case .harness: TC_SCHEDULER_HARNESS.rawValue
        case .unknown: TC_SCHEDULER_UNKNOWN.rawValue
        }
    }
}

/// A wait with a virtual deadline — a sleeping thread, a timed poll, an
/// armed timer — as the session's wait table lists it: what `status`
/// shows, what `tick --to-next` and the scheduler advance to.
public struct PendingWait: Sendable, Hashable {
    /// The process that waits.
    public var pid: Int32
    /// The waiting thread; 0 for a timer, which belongs to the process.
    public var thread: Int32
    /// The process name (`/proc/PID/comm`).
    public var command: String
    /// `sleep`, `poll`, `select`, `epoll`, `cond`, `sem`, `mutex`, `timerfd`, `timer`, `alarm` or `futex` (a raw futex wait: through `syscall()`, as Rust and the BEAM wait, or trapped in a Go or static program).
    public var kind: String
    /// The clock of the deadline.
    public var virtualClock: VirtualClock
    /// The deadline, in virtual nanoseconds on ``virtualClock``.
    public var deadlineNanoseconds: Int64
    /// Virtual time until it is due (0 when due).
    public var remainingNanoseconds: Int64
    /// Its wait-table slot.
    var slot: Int32
    /// The same in every run of the same program (its process's place in the tree, its thread's in the process):
    /// a seeded scheduler orders waits due together by it.
    var identity: UInt64 = 0
    /// Held by a seeded scheduler: due, it waits until released.
    var held = false

    /// The clock's name, e.g. `CLOCK_MONOTONIC`.
    public var clock: String { virtualClock.name }

    /// The deadline as an instant, for wall clocks.
    public var deadline: String? {
        virtualClock.isWall ? TimeFormats.formatInstant(deadlineNanoseconds) : nil
    }

    /// Its owner in the wait table (`pid << 32 | thread`).
    var owner: UInt64 { tc_wait_owner(pid, thread) }

    static func kindName(_ kind: Int32) -> String {
        switch UInt32(kind) {
        case TC_WAIT_SLEEP.rawValue: return "sleep"
        case TC_WAIT_POLL.rawValue: return "poll"
        case TC_WAIT_SELECT.rawValue: return "select"
        case TC_WAIT_EPOLL.rawValue: return "epoll"
        case TC_WAIT_COND.rawValue: return "cond"
        case TC_WAIT_SEM.rawValue: return "sem"
        case TC_WAIT_MUTEX.rawValue: return "mutex"
        case TC_WAIT_TIMERFD.rawValue: return "timerfd"
        case TC_WAIT_TIMER.rawValue: return "timer"
        case TC_WAIT_ALARM.rawValue: return "alarm"
        case TC_WAIT_FUTEX.rawValue: return "futex"
        case TC_WAIT_MQUEUE.rawValue: return "mqueue"
        case TC_WAIT_SIGNAL.rawValue: return "sigwait"
        default: return "wait"
        }
    }
}

extension PendingWait: Codable {
    // `status --json` shows the clock by name and, for wall clocks, the deadline as an instant.
    private enum CodingKeys: String, CodingKey {
        case pid, thread, command, kind, clock, deadlineNanoseconds, remainingNanoseconds, deadline
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(pid, forKey: .pid)
        try container.encode(thread, forKey: .thread)
        try container.encode(command, forKey: .command)
        try container.encode(kind, forKey: .kind)
        try container.encode(clock, forKey: .clock)
        try container.encode(deadlineNanoseconds, forKey: .deadlineNanoseconds)
        try container.encode(remainingNanoseconds, forKey: .remainingNanoseconds)
        try container.encodeIfPresent(deadline, forKey: .deadline)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let clockName = try container.decode(String.self, forKey: .clock)
        guard let clock = VirtualClock(named: clockName) else {
            throw DecodingError.dataCorruptedError(forKey: .clock, in: container,
                                                   debugDescription: "'\(clockName)' is not a session clock: expected one of \(VirtualClock.allCases.map(\.name).joined(separator: ", "))")
        }
        self.init(pid: try container.decode(Int32.self, forKey: .pid),
                  thread: try container.decode(Int32.self, forKey: .thread),
                  command: try container.decode(String.self, forKey: .command),
                  kind: try container.decode(String.self, forKey: .kind),
                  virtualClock: clock,
                  deadlineNanoseconds: try container.decode(Int64.self, forKey: .deadlineNanoseconds),
                  remainingNanoseconds: try container.decode(Int64.self, forKey: .remainingNanoseconds),
                  slot: -1)
    }
}

/// A process that runs now, by pid and name: one attached to a session,
/// or the one that drives its scheduler.
public struct RunningProcess: Sendable, Codable, Hashable {
    /// Its process id.
    public var pid: Int32
    /// The process name (`/proc/PID/comm`).
    public var command: String

    /// The process, if `pid` still runs and is the one that registered
    /// (not a zombie, not a later process that reused the pid) — and, given
    /// `thread`, if that thread still runs in it.
    static func ifRunning(pid: Int32, registeredBoottime: Int64, thread: Int32 = 0) -> RunningProcess? {
        if thread != 0 && thread != pid && !ProcFS.threadExists(pid: pid, tid: thread) { return nil }
        if kill(pid, 0) != 0 && errno == ESRCH { return nil }
        guard let startTicks = ProcFS.startTicks(of: pid) else { return nil }
        let ticksPerSecond = Int64(sysconf(Int32(_SC_CLK_TCK)))
        let started = startTicks * (1_000_000_000 / max(ticksPerSecond, 1))
        // One tick of slack: starttime is rounded down to a tick.
        if registeredBoottime > 0 && started > registeredBoottime + 1_000_000_000 / max(ticksPerSecond, 1) {
            return nil
        }
        return RunningProcess(pid: pid, command: ProcFS.command(of: pid) ?? "?")
    }
}

/// The old name of ``RunningProcess``.
@available(*, deprecated, renamed: "RunningProcess")
public typealias AttachedProcess = RunningProcess

/// Process names read once per pid, for a reader that looks at the same
/// processes again and again (the scheduler, many times a second).
struct ProcessNames {
    private var names: [Int32: String] = [:]

    mutating func name(of pid: Int32) -> String {
        if let known = names[pid] { return known }
        if names.count > 4096 { names.removeAll() }
        let name = ProcFS.command(of: pid) ?? "?"
        names[pid] = name
        return name
    }
}
