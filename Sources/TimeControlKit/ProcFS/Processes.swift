#if canImport(Glibc)
import Glibc
#endif
import TimeShimC

extension ProcFS {
    /// A process's name (`/proc/PID/comm`), or nil when it is gone.
    static func command(of pid: Int32) -> String? { threadName(pid: pid, tid: pid) }

    /// A thread's own name (`/proc/PID/task/TID/comm`), or nil when it is gone.
    static func threadName(pid: Int32, tid: Int32) -> String? {
        text("/proc/\(pid)/task/\(tid)/comm", limit: 64).map { String($0.prefix { $0 != "\n" }) }
    }

    /// A process's command line (`/proc/PID/cmdline`), its words joined by spaces, cut at 512 bytes
    /// (marked `…`); `?` when it is gone.
    static func commandLine(of pid: Int32) -> String {
        let fd = open("/proc/\(pid)/cmdline", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return "?" }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 512)
        let got = read(fd, &buffer, buffer.count)
        guard got > 0 else { return "?" }
        let words = buffer.prefix(got).split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        let text = words.joined(separator: " ")
        return got == buffer.count ? text + "…" : text
    }

    /// The fields of `/proc/PID/stat` (or of one thread's) that follow the
    /// command name, split at spaces: the state letter first, the start time
    /// (field 22 of the file) 20th. Nil when it cannot be read. The name may
    /// hold anything, spaces and parentheses too, so it ends at the last `)`.
    private static func statFields(pid: Int32, tid: Int32? = nil) -> [Substring]? {
        let path = tid.map { "/proc/\(pid)/task/\($0)/stat" } ?? "/proc/\(pid)/stat"
        guard let stat = text(path, limit: 4096), let close = stat.lastIndex(of: ")") else { return nil }
        return stat[stat.index(after: close)...].split(separator: " ")
    }

    /// A thread's (or, without `tid`, a process's) state letter: `R`, `S`, `D`, `Z`…; nil when it is gone.
    static func state(pid: Int32, tid: Int32? = nil) -> Character? {
        statFields(pid: pid, tid: tid)?.first?.first
    }

    /// Whether a thread exists and is not a zombie (its `stat` state is neither `Z` nor `X`).
    static func isLive(pid: Int32, tid: Int32? = nil) -> Bool {
        guard let state = state(pid: pid, tid: tid) else { return false }
        return state != "Z" && state != "X"
    }

    /// When a live (not zombie) process started, in clock ticks after boot:
    /// field 22 of `/proc/PID/stat`, which an exec does not change and which
    /// tells a process from a later one that reused its pid. Nil when it is gone.
    static func startTicks(of pid: Int32) -> Int64? {
        // The shim reads it too (the segment's lock, the trace registry): one parser, in C.
        var state: CChar = 0
        let ticks = tc_proc_start_ticks(pid, &state)
        guard ticks != 0, state != CChar(UInt8(ascii: "Z")), state != CChar(UInt8(ascii: "X")) else { return nil }
        return Int64(ticks)
    }

    /// Whether thread `tid` of process `pid` exists (a zombie's too).
    static func threadExists(pid: Int32, tid: Int32) -> Bool {
        access("/proc/\(pid)/task/\(tid)", F_OK) == 0
    }

    /// Whether a process is on its way out, so that it will not run on: gone,
    /// a zombie or dead (state `Z` or `X`), or killed. A fatal signal (one
    /// the process neither catches, ignores nor blocks: SIGKILL, or a
    /// SIGTERM it does not handle) puts SIGKILL in every thread's pending
    /// set as it is sent, before the process has run again to act on it.
    static func isExiting(pid: Int32) -> Bool {
        guard let status = text("/proc/\(pid)/status", limit: 8192) else { return true }
        var pending: UInt64 = 0
        for line in status.split(separator: "\n") {
            if line.hasPrefix("State:") {
                let state = line.dropFirst("State:".count).first { $0 != " " && $0 != "\t" }
                if state == "Z" || state == "X" || state == "x" { return true }
            } else if line.hasPrefix("SigPnd:") || line.hasPrefix("ShdPnd:") {
                let hex = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first ?? ""
                pending |= UInt64(hex, radix: 16) ?? 0
            }
        }
        return pending & (1 << (UInt64(SIGKILL) - 1)) != 0
    }

    /// The kernel shows a wait channel (and a system call, and memory) only
    /// to those allowed to read the process's memory (ptrace read access);
    /// `environ` has the same rule and says so plainly, with EACCES.
    static func mayReadMemory(of pid: Int32) -> Bool {
        let fd = open("/proc/\(pid)/environ", O_RDONLY | O_CLOEXEC)
        let readable = fd >= 0 || errno != EACCES
        if fd >= 0 { close(fd) }
        return readable
    }

    /// The thread ids of a process (`/proc/PID/task`).
    static func threads(of pid: Int32) -> [Int32] { numericEntries(of: "/proc/\(pid)/task") }

    static func allProcesses() -> [Int32] { numericEntries(of: "/proc") }

    /// This process's own program file, as the kernel started it.
    static let ownExecutable = "/proc/self/exe"

    /// The path of ``ownExecutable``, or nil (`errno` says why).
    static func ownExecutablePath() -> String? { link(ownExecutable) }
}
