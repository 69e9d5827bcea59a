#if canImport(Glibc)
import Glibc
#endif

/// The processes a scheduler is responsible for, and whether every one of
/// their threads is blocked — decided from the kernel's own state of those
/// threads, never from a real-time guess.
///
/// **Which processes.** The `roots` (the session's attached processes, the
/// processes a harness spawned, `timectl run`'s own process) and everything
/// descended from them, found through `/proc/PID/task/TID/children`. The
/// scheduler's own process is a root for its children only: its threads are
/// never judged, and only its main thread's children are followed — the
/// thread that spawns the command, and the one the kernel re-parents
/// orphans to when the process is their subreaper.
///
/// **Blocked** means `/proc/PID/task/TID/stat` says sleeping (`S`), stopped
/// (`T`, `t`), idle (`I`) or parked (`P`), and `/proc/PID/task/TID/wchan`
/// names what it waits in; or that it is dead (`Z`, `X`). A thread in
/// uninterruptible sleep (`D`: paging in, disk I/O) goes on by itself, so it
/// counts as running. The state letter alone is not enough: a thread
/// preempted between marking itself asleep and calling into the scheduler
/// stays runnable, on the run queue, while `stat` already says `S`; since
/// Linux 5.16 `wchan` reads `0` for any thread on the run queue. For a
/// process whose wait channel this user may not read (another user's, a
/// setuid program's), `wchan` always reads `0`, and the state letter is all
/// there is.
///
/// **Quiescent** means two looks in a row found the same processes and
/// threads, every thread blocked both times, and no thread scheduled in
/// between (its run count, the third field of `/proc/.../schedstat`, did not
/// move). Wake-ups are synchronous in the kernel: a thread woken by another
/// is runnable before its waker blocks again. So any activity during the two
/// looks — a chain of wake-ups across processes, a fork, a thread created —
/// shows up as a running thread, a changed run count, or a changed set.
final class ProcessWatch {
    /// One thread, as one look saw it: blocked, with its run count.
    struct Thread: Equatable {
        var pid: Int32
        var tid: Int32
        var runs: UInt64
    }

    /// Everything one look saw, when every thread was blocked.
    struct Look: Equatable {
        var threads: [Thread]
        var processes: [Int32] { Array(Set(threads.map(\.pid))).sorted() }
    }

    let roots: () -> [Int32]
    private let ownPID = getpid()
    private var files = ProcFiles()
    /// Thread ids per process, re-listed when the thread count changes.
    private var threadLists: [Int32: [Int32]] = [:]
    /// Whether this user may read a process's wait channels (checked once per process).
    private var channelsReadable: [Int32: Bool] = [:]

    /// Watches `roots()` (evaluated at every look) and their descendants.
    init(roots: @escaping () -> [Int32]) {
        self.roots = roots
    }

    /// One look: every watched thread, or nil as soon as one is running.
    /// `ignoring` processes are still followed to their children, but their
    /// threads are not judged. `from` are the roots to start from (`roots()` by default).
    func look(from start: [Int32]? = nil, ignoring ignored: Set<Int32> = []) -> Look? {
        defer { files.sweep() }
        var threads: [Thread] = []
        var seen: Set<Int32> = []
        var queue = start ?? roots()
        while let pid = queue.popLast() {
            guard seen.insert(pid).inserted else { continue }
            if pid == ownPID {
                queue += files.children(pid: pid, tid: pid)
                continue
            }
            let judged = !ignored.contains(pid)
            guard let leader = files.stat(pid: pid, tid: pid) else { continue }  // gone
            if judged && !leader.blocked { return nil }
            let channels = judged && canReadChannels(of: pid)
            for tid in threadIDs(of: pid, count: leader.threadCount) {
                // stat first: it is what finds a stale descriptor (see ProcFiles.read).
                guard let state = tid == pid ? leader : files.stat(pid: pid, tid: tid) else {
                    // Exited meanwhile — and another may have started in its place, with the
                    // count unchanged: list the threads afresh, and count the process as busy.
                    threadLists[pid] = nil
                    return nil
                }
                if judged {
                    if !state.blocked { return nil }
                    if channels && !state.dead && !files.waitsInKernel(pid: pid, tid: tid) { return nil }
                    guard let runs = files.runCount(pid: pid, tid: tid) else { continue }
                    threads.append(Thread(pid: pid, tid: tid, runs: runs))
                }
                queue += files.children(pid: pid, tid: tid)
            }
        }
        return Look(threads: threads.sorted { ($0.pid, $0.tid) < ($1.pid, $1.tid) })
    }

    /// The watched processes now (not this one), whether they run or not.
    func processes() -> [Int32] {
        defer { files.sweep() }
        var seen: Set<Int32> = []
        var queue = roots()
        while let pid = queue.popLast() {
            guard seen.insert(pid).inserted else { continue }
            if pid == ownPID {
                queue += files.children(pid: pid, tid: pid)
                continue
            }
            guard let leader = files.stat(pid: pid, tid: pid) else { continue }
            threadLists[pid] = nil  // rarely asked: list the threads afresh
            for tid in threadIDs(of: pid, count: leader.threadCount) where tid == pid || files.stat(pid: pid, tid: tid) != nil {
                queue += files.children(pid: pid, tid: tid)
            }
        }
        seen.remove(ownPID)
        return seen.sorted()
    }

    /// The kernel shows a wait channel only to those allowed to read the
    /// process's memory (ptrace read access); `environ` has the same rule and
    /// says so plainly, with EACCES.
    private func canReadChannels(of pid: Int32) -> Bool {
        if let known = channelsReadable[pid] { return known }
        let fd = open("/proc/\(pid)/environ", O_RDONLY | O_CLOEXEC)
        let readable = fd >= 0 || errno != EACCES
        if fd >= 0 { close(fd) }
        if channelsReadable.count > 4096 { channelsReadable.removeAll() }
        channelsReadable[pid] = readable
        return readable
    }

    private func threadIDs(of pid: Int32, count: Int) -> [Int32] {
        if count <= 1 { return [pid] }
        if let known = threadLists[pid], known.count == count { return known }
        var tids: [Int32] = []
        if let directory = opendir("/proc/\(pid)/task") {
            while let entry = readdir(directory) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
                }
                if let tid = Int32(name) { tids.append(tid) }
            }
            closedir(directory)
        }
        threadLists[pid] = tids
        if threadLists.count > 4096 { threadLists = [pid: tids] }
        return tids
    }
}

/// Open `/proc` files, read again with `pread` (the kernel regenerates them
/// on every read from offset 0), closed when a thread goes away or a look
/// no longer needs them.
private struct ProcFiles {
    struct ThreadState {
        var blocked: Bool
        var dead: Bool
        var threadCount: Int
    }

    private enum File: UInt8 {
        case stat, schedstat, status, children, wchan
    }

    private struct Key: Hashable {
        var pid: Int32
        var tid: Int32
        var file: File

        var path: String { "/proc/\(pid)/task/\(tid)/\(file)" }
    }

    private struct Entry {
        var fd: Int32
        var used: UInt64
    }

    private var open: [Key: Entry] = [:]
    private var generation: UInt64 = 0
    private var buffer = [UInt8](repeating: 0, count: 4096)
    /// Whether `schedstat` exists (the kernel may be built without it).
    private var hasSchedstat = true

    mutating func stat(pid: Int32, tid: Int32) -> ThreadState? {
        guard let count = read(Key(pid: pid, tid: tid, file: .stat)) else { return nil }
        // "PID (COMM) S ...": the command may hold anything, so parse after its last ')'.
        guard let close = buffer[..<count].lastIndex(of: UInt8(ascii: ")")) else { return nil }
        var field = 0, index = close + 1, threadCount = 1
        var state: UInt8 = UInt8(ascii: "R")
        while index < count {
            while index < count && buffer[index] == UInt8(ascii: " ") { index += 1 }
            let start = index
            while index < count && buffer[index] != UInt8(ascii: " ") { index += 1 }
            if field == 0 && start < count { state = buffer[start] }
            if field == 17 {  // num_threads, field 20 of stat(5)
                threadCount = Self.number(buffer[start..<index]) ?? 1
                break
            }
            field += 1
        }
        return ThreadState(blocked: Self.blockedStates.contains(state),
                           dead: state == UInt8(ascii: "Z") || state == UInt8(ascii: "X"), threadCount: threadCount)
    }

    /// Whether the thread is off the run queue, waiting in the kernel: its
    /// wait channel is a symbol, not `0`.
    mutating func waitsInKernel(pid: Int32, tid: Int32) -> Bool {
        guard let count = read(Key(pid: pid, tid: tid, file: .wchan)) else { return true }  // gone: it runs nothing
        return !(count == 1 && buffer[0] == UInt8(ascii: "0"))
    }

    /// How many times the thread has been scheduled onto a CPU.
    mutating func runCount(pid: Int32, tid: Int32) -> UInt64? {
        if hasSchedstat, let count = read(Key(pid: pid, tid: tid, file: .schedstat)) {
            // "RUNTIME WAIT TIMESLICES\n"
            let fields = buffer[..<count].split(separator: UInt8(ascii: " "))
            guard fields.count >= 3 else { return nil }
            return Self.number(fields[2].prefix { $0 != UInt8(ascii: "\n") }).map(UInt64.init)
        }
        if hasSchedstat && access("/proc/self/schedstat", F_OK) != 0 { hasSchedstat = false }
        // Without schedstat: the voluntary and involuntary context switches.
        guard let count = read(Key(pid: pid, tid: tid, file: .status)) else { return nil }
        var total: UInt64 = 0
        for line in buffer[..<count].split(separator: UInt8(ascii: "\n"))
        where line.starts(with: Self.voluntary) || line.starts(with: Self.involuntary) {
            total += UInt64(Self.number(line.drop { $0 < UInt8(ascii: "0") || $0 > UInt8(ascii: "9") }) ?? 0)
        }
        return total
    }

    mutating func children(pid: Int32, tid: Int32) -> [Int32] {
        guard let count = read(Key(pid: pid, tid: tid, file: .children)) else { return [] }
        return buffer[..<count].split(separator: UInt8(ascii: " ")).compactMap { Self.number($0).map(Int32.init) }
    }

    /// Closes the files the last two looks did not read (their threads are gone, or no longer watched).
    mutating func sweep() {
        generation += 1
        guard open.count > 64 || generation % 16 == 0 else { return }
        for (key, entry) in open where entry.used + 2 < generation {
            Glibc.close(entry.fd)
            open.removeValue(forKey: key)
        }
    }

    /// Reads the whole file into `buffer`; nil if it cannot be read (the thread is gone).
    private mutating func read(_ key: Key) -> Int? {
        for attempt in 0..<2 {
            let fd: Int32
            if let entry = open[key] {
                fd = entry.fd
            } else {
                fd = Glibc.open(key.path, O_RDONLY | O_CLOEXEC)
                guard fd >= 0 else { return nil }
            }
            var count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
            // A long children list (hundreds of them) fills the buffer: grow it and read again.
            while count == buffer.count {
                buffer += [UInt8](repeating: 0, count: buffer.count)
                count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
            }
            // An empty children list reads as 0 bytes: that is an answer, not a failure.
            if count > 0 || (count == 0 && key.file == .children) {
                open[key] = Entry(fd: fd, used: generation)
                return count
            }
            // A stale descriptor: the thread exited, and its id may now be
            // another's. Only stat says so (a dead thread's children file
            // reads as empty), and it is read first: drop every file of the
            // thread, then open once more.
            Glibc.close(fd)
            open.removeValue(forKey: key)
            if key.file == .stat {
                for file in [File.schedstat, .status, .children, .wchan] {
                    if let other = open.removeValue(forKey: Key(pid: key.pid, tid: key.tid, file: file)) { Glibc.close(other.fd) }
                }
            }
            if attempt == 1 { return nil }
        }
        return nil
    }

    private static let blockedStates: Set<UInt8> = Set("STtIPZX".utf8)
    private static let voluntary = Array("voluntary_ctxt_switches:".utf8)
    private static let involuntary = Array("nonvoluntary_ctxt_switches:".utf8)

    private static func number<C: Collection>(_ digits: C) -> Int? where C.Element == UInt8 {
        guard !digits.isEmpty else { return nil }
        var value = 0
        for digit in digits {
            guard digit >= UInt8(ascii: "0"), digit <= UInt8(ascii: "9") else { return nil }
            value = value &* 10 &+ Int(digit - UInt8(ascii: "0"))
        }
        return value
    }
}
