#if canImport(Glibc)
import Glibc
#endif

/// Whether a set of processes has settled: every one of their threads is
/// blocked, decided from the kernel's own state, not from a real-time guess.
///
/// A thread counts as blocked when `/proc/PID/task/TID/status` says it is
/// sleeping (`S`), stopped (`T`, `t`), idle (`I`) or a zombie (`Z`). A thread
/// in uninterruptible sleep (`D`: paging in, disk I/O) is about to go on, so
/// it counts as running. Two looks are compared: if every thread was
/// blocked both times and none was scheduled in between (its voluntary and
/// involuntary context-switch counts did not move), nothing ran. A thread
/// woken by another always becomes runnable before its waker blocks again,
/// so a chain of wake-ups between processes shows up as a running thread.
enum Quiescence {
    struct ThreadState: Equatable {
        var blocked: Bool
        var switches: Int64
    }

    /// One look at the threads of `pids`, keyed by "PID/TID"; nil if one of them is running.
    static func look(at pids: [Int32]) -> [String: ThreadState]? {
        var threads: [String: ThreadState] = [:]
        for pid in pids {
            guard let directory = opendir("/proc/\(pid)/task") else { continue }  // gone
            defer { closedir(directory) }
            while let entry = readdir(directory) {
                let tid = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
                }
                guard tid.first?.isNumber == true, let state = threadState(pid: pid, tid: tid) else { continue }
                if !state.blocked { return nil }
                threads["\(pid)/\(tid)"] = state
            }
        }
        return threads
    }

    /// Whether `pids` are quiescent: two looks, `gap` real nanoseconds apart, see the same blocked threads.
    static func settled(_ pids: [Int32], gapNanoseconds: Int64 = 1_000_000) -> Bool {
        guard let first = look(at: pids) else { return false }
        var pause = timespec(tv_sec: 0, tv_nsec: Int(gapNanoseconds))
        nanosleep(&pause, nil)
        guard let second = look(at: pids) else { return false }
        return first == second
    }

    /// Every process in the process groups `groups` (attached to a session yet or not).
    static func members(ofProcessGroups groups: Set<Int32>) -> [Int32] {
        guard !groups.isEmpty, let directory = opendir("/proc") else { return [] }
        defer { closedir(directory) }
        var members: [Int32] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard let pid = Int32(name), let group = processGroup(of: pid), groups.contains(group) else { continue }
            members.append(pid)
        }
        return members
    }

    /// Field 5 of /proc/PID/stat.
    private static func processGroup(of pid: Int32) -> Int32? {
        let fd = open("/proc/\(pid)/stat", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 1024)
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0, let close = buffer[..<count].lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = buffer[(close + 1)..<count].split(separator: UInt8(ascii: " "))
        guard fields.count > 2 else { return nil }
        return Int32(String(decoding: fields[2], as: UTF8.self))
    }

    private static func threadState(pid: Int32, tid: String) -> ThreadState? {
        let fd = open("/proc/\(pid)/task/\(tid)/status", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        var blocked = false
        var switches: Int64 = 0
        for line in String(decoding: buffer[..<count], as: UTF8.self).split(separator: "\n") {
            if line.hasPrefix("State:") {
                let state = line.dropFirst("State:".count).drop { $0 == " " || $0 == "\t" }.first
                blocked = state.map { "STtIZX".contains($0) } ?? false
            } else if line.hasPrefix("voluntary_ctxt_switches:") || line.hasPrefix("nonvoluntary_ctxt_switches:") {
                switches += Int64(line.split(separator: "\t").last.map(String.init) ?? "") ?? 0
            }
        }
        return ThreadState(blocked: blocked, switches: switches)
    }
}
