#if canImport(Glibc)
import Glibc
#endif

/// A session's state at one instant, as `timectl status` shows it.
public struct SessionStatus: Sendable, Codable, Hashable {
    public var session: String
    /// Path of the segment file.
    public var segment: String
    /// Virtual wall clock, ISO 8601 UTC.
    public var wallClock: String
    public var wallClockNanoseconds: Int64
    /// Virtual `CLOCK_MONOTONIC`.
    public var monotonicNanoseconds: Int64
    /// Virtual time elapsed since the session was created (E in SPEC §2).
    public var elapsedNanoseconds: Int64
    public var frozen: Bool
    /// 0 when frozen.
    public var rate: Double
    /// The rate as entered (`0.5`, `2`), exactly as the segment holds it.
    public var rateText: String
    /// Real wall-clock time at which the session was created.
    public var createdAt: String
    /// Number of verbs applied since creation.
    public var verbsApplied: UInt64
    public var processes: [AttachedProcess]
}

/// A running process attached to a session.
public struct AttachedProcess: Sendable, Codable, Hashable {
    public var pid: Int32
    /// The process name (`/proc/PID/comm`).
    public var command: String

    /// The process, if `pid` still runs and is the one that registered
    /// (not a zombie, not a later process that reused the pid).
    static func ifRunning(pid: Int32, registeredBoottime: Int64) -> AttachedProcess? {
        if kill(pid, 0) != 0 && errno == ESRCH { return nil }
        guard let stat = readProcFile(pid: pid, name: "stat"),
              let afterName = stat.lastIndex(of: ")")
        else { return nil }
        // Fields after "(comm)": state is the first, starttime the 20th.
        let fields = stat[stat.index(after: afterName)...].split(separator: " ")
        guard fields.count > 19, fields[0] != "Z", fields[0] != "X",
              let startTicks = Int64(fields[19])
        else { return nil }
        let ticksPerSecond = Int64(sysconf(Int32(_SC_CLK_TCK)))
        let started = startTicks * (1_000_000_000 / max(ticksPerSecond, 1))
        // One tick of slack: starttime is rounded down to a tick.
        if registeredBoottime > 0 && started > registeredBoottime + 1_000_000_000 / max(ticksPerSecond, 1) {
            return nil
        }
        let command = readProcFile(pid: pid, name: "comm").map { String($0.prefix { $0 != "\n" }) } ?? "?"
        return AttachedProcess(pid: pid, command: command)
    }

    private static func readProcFile(pid: Int32, name: String) -> String? {
        let fd = open("/proc/\(pid)/\(name)", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count], as: UTF8.self)
    }
}
