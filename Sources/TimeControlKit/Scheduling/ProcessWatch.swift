#if canImport(Glibc)
import Glibc
#endif
import TimeShimC

/// The processes a scheduler is responsible for, and whether every one of
/// their threads is blocked, decided from the kernel's own state of those
/// threads and never from a real-time guess. docs/scheduler.md explains
/// which processes, what counts as blocked, why one look makes three passes,
/// and each shortcut that keeps a look cheap; read it before changing a
/// pass, since each rests on what the kernel guarantees there.
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
    /// Whether this process's own threads are judged (all but the looking one).
    private let judgingOwnThreads: Bool
    /// The thread that looks (the one never judged), when this process's threads are judged; 0 otherwise.
    private var lookingThread: Int32 = 0
    private let files = ProcFiles()
    /// The processes of the last walk, by pid, with their threads' open files.
    private var watched: [Int32: WatchedProcess] = [:]
    /// This process's main thread: only its children are followed.
    private var ownThread: WatchedThread
    /// Pass 1's threads to judge, in order (kept to reuse its storage).
    private var judged: [WatchedThread] = []
    private var queue: [Int32] = []
    /// Where a read that only serves as a barrier puts its answer.
    private var barrier: [Int32] = []
    private var seen: Set<Int32> = []
    private var generation: UInt64 = 0
    /// Counts looks; a thread whose run count changed within the last ``lately`` looks is read afresh in pass 1.
    private var lookNumber: UInt64 = 0
    private static let lately: UInt64 = 16
    /// Bumped when a watched thread or process goes away: every `children` list is read again.
    private var childrenEpoch: UInt64 = 0
    /// Orders what the watch learns: a children list read before a process in it was last seen to run is read again.
    private var sequence: UInt64 = 0
    /// The thread pass 2 checks first: the one that made the last look fail, or that the last step woke.
    private var suspect: WatchedThread?

    /// Watches `roots()` (evaluated at every look) and their descendants;
    /// with `judgingOwnThreads`, this process's threads too, when it is a root.
    init(roots: @escaping () -> [Int32], judgingOwnThreads: Bool = false) {
        self.roots = roots
        self.judgingOwnThreads = judgingOwnThreads
        ownThread = WatchedThread(pid: ownPID, tid: ownPID, directory: "/proc/\(ownPID)/task/\(ownPID)/")
    }

    deinit {
        ownThread.close()
        for process in watched.values { process.close() }
    }

    /// Tells the watch that thread `tid` of `pid` was just woken (a step
    /// reached its wait): the next look reads its run count afresh and checks it first.
    func expectRunning(pid: Int32, tid: Int32) {
        guard let process = watched[pid], let thread = process.threads.first(where: { $0.tid == tid }) else { return }
        thread.ranAtLook = lookNumber &+ 1
        suspect = thread
    }

    /// One look (three passes, docs/scheduler.md): every watched thread, or nil as
    /// soon as one is running or ran during the look. `ignoring` processes
    /// are still followed to their children, but their threads are not
    /// judged. `from` are the roots to start from (`roots()` by default).
    func look(from start: [Int32]? = nil, ignoring ignored: Set<Int32> = []) -> Look? {
        lookNumber &+= 1
        lookingThread = judgingOwnThreads ? tc_gettid() : 0
        if suspect?.tid == lookingThread { suspect = nil }
        // Pass 1: the run counts of the threads that ran lately, read afresh before the walk checks the number of
        // threads; first the suspect's, checked blocked whatever its count: a look that fails usually fails there.
        var threadWentAway = false
        if let thread = suspect, let process = thread.process, watched[process.pid] === process, !ignored.contains(process.pid),
           process.threads.contains(where: { $0 === thread }) {
            switch countWhileBlocked(thread, of: process, checkingQuiet: true) {
            case .blocked: break
            case .running: return busy(thread, process)
            case .gone:
                _ = gone(thread, of: process)
                suspect = nil
                threadWentAway = true
            }
        }
        for process in watched.values {
            if ignored.contains(process.pid) {  // not counted: taken as having run (CLONE_PARENT: docs/scheduler.md, "Children lists")
                sequence &+= 1
                process.ranAt = sequence
                continue
            }
            for thread in process.threads
            where thread.freshAtLook != lookNumber && thread.tid != lookingThread
                && (thread.quietRuns == nil || lookNumber &- thread.ranAtLook <= Self.lately) {
                switch countWhileBlocked(thread, of: process) {
                case .blocked: continue
                case .running: return busy(thread, process)
                case .gone:
                    _ = gone(thread, of: process)  // the walk lists the threads again
                    threadWentAway = true
                }
            }
        }
        guard discover(from: start ?? roots(), ignoring: ignored, countingRuns: true), !threadWentAway else { return nil }
        // Pass 2: every one blocked — first the thread that made the last look fail, or that the last step woke,
        // then the others that ran lately: a look that fails usually fails there, before the quiet threads are read.
        var recent = 0
        for index in judged.indices where lookNumber &- judged[index].ranAtLook <= Self.lately {
            judged.swapAt(recent, index)
            recent += 1
        }
        if let thread = suspect, let index = judged.firstIndex(where: { $0 === thread }), index > 0 {
            judged.swapAt(0, index)
        }
        suspect = nil
        for thread in judged {
            guard let process = thread.process else { return nil }
            guard blockedNow(thread, of: process) else { return busy(thread, process) }
        }
        // Pass 3: none ran meanwhile.
        var threads: [Thread] = []
        threads.reserveCapacity(judged.count)
        for thread in judged {
            guard let runs = files.runCount(thread) else {
                if let process = thread.process { return gone(thread, of: process) }
                return nil
            }
            if runs != thread.runs {
                thread.lastRuns = runs
                guard let process = thread.process else { return nil }
                ranSeen(thread, of: process)
                return busy(thread, process)
            }
            thread.quietRuns = runs  // off the CPU since its check in pass 1 or 2, with this count
            threads.append(Thread(pid: thread.pid, tid: thread.tid, runs: runs))
        }
        return Look(threads: threads)
    }

    private enum FreshCount { case blocked, running, gone }

    /// Pass 1 for a thread that ran lately: its run count, then whether it
    /// is blocked. A count read while the thread was on a CPU proves
    /// nothing (the kernel counts a thread's arrivals on a CPU, and one that
    /// runs on blocks without arriving again), so the count must be followed
    /// by a blocked thread: then, if pass 3 reads the same count, the thread
    /// was off the CPU from that check on.
    ///
    /// A count equal to the thread's last one read off the CPU (``WatchedThread/quietRuns``) needs no check:
    /// the thread has not been put on a CPU since, so it is still off it — unless `checkingQuiet` (the suspect,
    /// which is likely to have been woken: it fails the look here, before the walk).
    private func countWhileBlocked(_ thread: WatchedThread, of process: WatchedProcess, checkingQuiet: Bool = false) -> FreshCount {
        guard let runs = files.runCount(thread) else { return .gone }
        if runs != thread.lastRuns { ranSeen(thread, of: process) }
        (thread.lastRuns, thread.runs, thread.freshAtLook) = (runs, runs, lookNumber)
        if runs == thread.quietRuns && !checkingQuiet { return .blocked }
        guard blockedNow(thread, of: process) else { return thread.stale ? .gone : .running }
        return .blocked
    }

    /// Whether the thread is blocked now (`stat`, and `wchan` where readable;
    /// `wchan` alone for one blocked at an earlier check that has not run since).
    private func blockedNow(_ thread: WatchedThread, of process: WatchedProcess) -> Bool {
        if thread.blockedSinceRuns == thread.runs {
            if thread.blockedDead { return true }
            if process.channelsReadable { return files.waitsInKernel(thread) == true }
        }
        guard let state = files.stat(thread), state.blocked else { return false }
        if state.dead {
            // A thread reads `Z` from the moment its exit marks it a zombie, while it is still on its CPU, about to
            // wake its parent from `wait` (the kernel does both under the write lock of its task list, irqs off:
            // microseconds, unless the hypervisor takes the CPU away). Reading a `children` file takes that lock
            // for reading: after it, the parent has been woken, so pass 2 (after all of pass 1's checks) finds it
            // runnable, or pass 3 finds that it ran.
            barrier.removeAll(keepingCapacity: true)
            files.appendChildren(of: ownThread, to: &barrier)
        } else if process.channelsReadable {
            guard files.waitsInKernel(thread) == true else { return false }
        }
        thread.blockedSinceRuns = thread.runs
        thread.blockedDead = state.dead
        return true
    }

    /// A new run count of `thread` was read: it ran since the one before.
    private func ranSeen(_ thread: WatchedThread, of process: WatchedProcess) {
        thread.ranAtLook = lookNumber
        sequence &+= 1
        process.ranAt = sequence
    }

    /// The thread runs: it must be checked in full next time, and first.
    private func busy(_ thread: WatchedThread, _ process: WatchedProcess) -> Look? {
        thread.blockedSinceRuns = nil
        if thread.stale { return gone(thread, of: process) }
        suspect = thread
        return nil
    }

    /// The thread went away: its process lists its threads again, and every
    /// children list is read again (its children moved to another thread, or to a reaper).
    private func gone(_ thread: WatchedThread, of process: WatchedProcess) -> Look? {
        thread.blockedSinceRuns = nil
        process.needsListing = true
        childrenEpoch &+= 1
        return nil
    }

    /// The watched processes now (not this one), whether they run or not.
    func processes() -> [Int32] {
        for process in watched.values { process.needsListing = true }  // rarely asked: list the threads afresh
        _ = discover(from: roots(), ignoring: [], countingRuns: false)
        return watched.keys.sorted()
    }

    /// The rest of pass 1: walks the process tree from `start`, keeping
    /// `watched` to the processes it finds and `judged` to the threads to
    /// judge, with a run count for each when `countingRuns`. False when a
    /// look can already tell that something ran (a thread or process went
    /// away, or a process has other threads than it had).
    private func discover(from start: [Int32], ignoring ignored: Set<Int32>, countingRuns: Bool) -> Bool {
        generation &+= 1
        judged.removeAll(keepingCapacity: true)
        seen.removeAll(keepingCapacity: true)
        queue.removeAll(keepingCapacity: true)
        queue.append(contentsOf: start)
        var complete = true
        while let pid = queue.popLast() {
            guard seen.insert(pid).inserted else { continue }
            if pid == ownPID && !judgingOwnThreads {
                files.appendChildren(of: ownThread, to: &queue)
                continue
            }
            let process = watchedProcess(pid)
            let judging = countingRuns && !ignored.contains(pid)
            if judging {
                // Counts not read afresh above: the count of the last look that found the thread off the CPU.
                for thread in process.threads where thread.freshAtLook != lookNumber && thread.tid != lookingThread {
                    if let runs = thread.quietRuns {
                        thread.runs = runs
                        continue
                    }
                    switch countWhileBlocked(thread, of: process) {
                    case .blocked: continue
                    case .running:
                        _ = busy(thread, process)
                        complete = false
                    case .gone:
                        _ = gone(thread, of: process)
                        complete = false
                    }
                }
            }
            // After those counts: the number of threads (docs/scheduler.md, "Threads per process").
            guard let threadCount = files.threadCount(process) else {  // gone
                if process.seenAlive {
                    // It ran to its end since the last walk, and any children it had moved to a reaper
                    // whose list may have been read already: look again. (A pid that was never seen
                    // alive — a root the session's table still lists — is simply not watched.)
                    childrenEpoch &+= 1
                    complete = false
                }
                process.close()
                watched[pid] = nil
                continue
            }
            process.seenAlive = true
            process.generation = generation
            if process.needsListing || process.threads.count != threadCount {
                // New threads' counts would be read after the number of threads: look again.
                if process.listThreads() && judging { complete = false }
            }
            for thread in process.threads {
                let judged = judging && thread.tid != lookingThread
                if judged { self.judged.append(thread) }
                // Only a count read while the thread was off the CPU dates a children list: a count read while it
                // ran (found running above, or never read: a thread just listed) is the one it keeps while it forks
                // and blocks, so a list read under that count is read again next time.
                let offCPU = judged && (thread.freshAtLook == lookNumber ? thread.blockedSinceRuns == thread.runs
                                                                          : thread.quietRuns == thread.runs)
                if offCPU && thread.childrenRuns == thread.runs && thread.childrenEpoch == childrenEpoch
                    && !thread.children.contains(where: { (watched[$0]?.ranAt ?? 0) > thread.childrenReadAt }) {
                    queue.append(contentsOf: thread.children)
                    continue
                }
                thread.children.removeAll(keepingCapacity: true)
                files.appendChildren(of: thread, to: &thread.children)
                sequence &+= 1
                thread.childrenReadAt = sequence
                if offCPU { (thread.childrenRuns, thread.childrenEpoch) = (thread.runs, childrenEpoch) } else { thread.childrenRuns = nil }
                queue.append(contentsOf: thread.children)
            }
        }
        if complete { sweep() }
        return complete
    }

    private func watchedProcess(_ pid: Int32) -> WatchedProcess {
        if let known = watched[pid] { return known }
        let process = WatchedProcess(pid: pid)
        watched[pid] = process
        return process
    }

    /// Closes the files of processes the last walk did not reach (gone, or no longer descendants).
    private func sweep() {
        guard watched.count > 0 else { return }
        var gone: [Int32] = []
        for (pid, process) in watched where process.generation != generation { gone.append(pid) }
        for pid in gone {
            watched[pid]?.close()
            watched[pid] = nil
        }
    }
}

/// A watched process: its task directory and its threads, with their open files.
private final class WatchedProcess {
    let pid: Int32
    let leader: WatchedThread
    var threads: [WatchedThread]
    /// `/proc/PID/task`, open: its link count is 2 + the number of threads (-1: could not be opened).
    private(set) var taskDirectory: Int32
    /// Whether this user may read the process's wait channels (checked once).
    let channelsReadable: Bool
    /// Set when a thread went away: list them again at the next walk.
    var needsListing = false
    var generation: UInt64 = 0
    /// When a thread of it was last seen to have run (the watch's sequence).
    var ranAt: UInt64 = 0
    /// A walk found it alive (its number of threads read).
    var seenAlive = false

    init(pid: Int32) {
        self.pid = pid
        leader = WatchedThread(pid: pid, tid: pid, directory: "/proc/\(pid)/task/\(pid)/")
        threads = [leader]
        taskDirectory = open("/proc/\(pid)/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        channelsReadable = Self.canReadChannels(of: pid)
        leader.process = self
        listThreads()
    }

    /// The kernel shows a wait channel only to those allowed to read the
    /// process's memory (ptrace read access); `environ` has the same rule and
    /// says so plainly, with EACCES.
    private static func canReadChannels(of pid: Int32) -> Bool {
        let fd = open("/proc/\(pid)/environ", O_RDONLY | O_CLOEXEC)
        let readable = fd >= 0 || errno != EACCES
        if fd >= 0 { Glibc.close(fd) }
        return readable
    }

    /// Lists the threads afresh, keeping the open files of those still there;
    /// whether it found threads it did not know.
    @discardableResult
    func listThreads() -> Bool {
        needsListing = false
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
        var kept: [WatchedThread] = []
        for thread in threads {
            if !thread.stale && tids.contains(thread.tid) { kept.append(thread) } else if thread !== leader { thread.close() }
        }
        if leader.stale { leader.close() }  // reopened at the next read
        var found = false
        for tid in tids where !kept.contains(where: { $0.tid == tid }) {
            let thread = tid == pid ? leader : WatchedThread(pid: pid, tid: tid, directory: "/proc/\(pid)/task/\(tid)/")
            thread.process = self
            kept.append(thread)
            found = true
        }
        threads = kept
        return found
    }

    func close() {
        for thread in threads { thread.close() }
        leader.close()
        if taskDirectory >= 0 { Glibc.close(taskDirectory) }
        taskDirectory = -1
    }
}

/// A watched thread: its `/proc` files, opened at first read and read
/// again with `pread`, and what the last looks learnt about it.
private final class WatchedThread {
    let pid: Int32
    let tid: Int32
    let directory: String
    /// Open descriptors by ``ProcFile`` (-1: not open yet).
    var files: (Int32, Int32, Int32, Int32, Int32) = (-1, -1, -1, -1, -1)
    /// The run count of the current look's pass 1.
    var runs: UInt64 = 0
    /// The run count read before the last pass 2 that found it blocked (nil: it ran since, or never was).
    var blockedSinceRuns: UInt64?
    /// That pass 2 found it dead.
    var blockedDead = false
    /// A read failed: the thread is gone (its descriptors never show another thread that took its id).
    var stale = false
    weak var process: WatchedProcess?
    /// The run count read last (nil: never), the look that found it changed, and the look that read it afresh.
    var lastRuns: UInt64?
    /// Its run count at an instant it was known to be off the CPU (nil: none known); it has been off since, while the count stays.
    var quietRuns: UInt64?
    var ranAtLook: UInt64 = 0
    var freshAtLook: UInt64 = 0
    /// Its children as last read, with the run count read before that read (nil: read unjudged) and the watch's children epoch then.
    var children: [Int32] = []
    var childrenRuns: UInt64?
    var childrenEpoch: UInt64 = 0
    var childrenReadAt: UInt64 = 0

    init(pid: Int32, tid: Int32, directory: String) {
        self.pid = pid
        self.tid = tid
        self.directory = directory
    }

    func close() {
        for fd in [files.0, files.1, files.2, files.3, files.4] where fd >= 0 { Glibc.close(fd) }
        files = (-1, -1, -1, -1, -1)
        blockedSinceRuns = nil
        stale = false
        lastRuns = nil
        quietRuns = nil
        childrenRuns = nil
    }

    func descriptor(_ file: ProcFile) -> Int32 {
        switch file {
        case .stat: files.0
        case .schedstat: files.1
        case .status: files.2
        case .children: files.3
        case .wchan: files.4
        }
    }

    func setDescriptor(_ file: ProcFile, _ fd: Int32) {
        switch file {
        case .stat: files.0 = fd
        case .schedstat: files.1 = fd
        case .status: files.2 = fd
        case .children: files.3 = fd
        case .wchan: files.4 = fd
        }
    }
}

/// The `/proc/PID/task/TID/` files a watch reads.
private enum ProcFile: String {
    case stat, schedstat, status, children, wchan
}

/// Reads and parses the `/proc` files of watched threads, into one buffer.
private final class ProcFiles {
    struct ThreadState {
        var blocked: Bool
        var dead: Bool
    }

    private var buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 8)
    /// Whether `schedstat` exists (the kernel may be built without it).
    private let hasSchedstat = access("/proc/self/schedstat", F_OK) == 0

    deinit { buffer.deallocate() }

    func stat(_ thread: WatchedThread) -> ThreadState? {
        guard let count = read(thread, .stat) else { return nil }
        // "PID (COMM) S ...": the command may hold anything, so the state follows its last ')'.
        var close = count - 1
        while close >= 0 && buffer[close] != UInt8(ascii: ")") { close -= 1 }
        guard close >= 0, close + 2 < count else { return nil }
        let state = buffer[close + 2]
        let dead = state == UInt8(ascii: "Z") || state == UInt8(ascii: "X")
        let blocked = dead || state == UInt8(ascii: "S") || state == UInt8(ascii: "T") || state == UInt8(ascii: "t")
            || state == UInt8(ascii: "I") || state == UInt8(ascii: "P")
        return ThreadState(blocked: blocked, dead: dead)
    }

    /// Whether the thread is off the run queue, waiting in the kernel: its
    /// wait channel is a symbol, not `0`. Nil when it is gone.
    func waitsInKernel(_ thread: WatchedThread) -> Bool? {
        guard let count = read(thread, .wchan) else { return nil }
        return !(count == 1 && buffer[0] == UInt8(ascii: "0"))
    }

    /// How many times the thread has been scheduled onto a CPU; nil when it is gone.
    func runCount(_ thread: WatchedThread) -> UInt64? {
        if hasSchedstat {
            // "RUNTIME WAIT TIMESLICES\n"
            guard let count = read(thread, .schedstat) else { return nil }
            var index = 0, field = 0
            while index < count && field < 2 {
                if buffer[index] == UInt8(ascii: " ") { field += 1 }
                index += 1
            }
            var end = index
            while end < count && buffer[end] >= UInt8(ascii: "0") && buffer[end] <= UInt8(ascii: "9") { end += 1 }
            return number(from: index, to: end).map(UInt64.init)
        }
        // Without schedstat: the voluntary and involuntary context switches.
        guard let count = read(thread, .status) else { return nil }
        var total: UInt64 = 0
        var lineStart = 0
        while lineStart < count {
            var lineEnd = lineStart
            while lineEnd < count && buffer[lineEnd] != UInt8(ascii: "\n") { lineEnd += 1 }
            if starts(at: lineStart, with: Self.voluntary) || starts(at: lineStart, with: Self.involuntary) {
                var digit = lineStart
                while digit < lineEnd && (buffer[digit] < UInt8(ascii: "0") || buffer[digit] > UInt8(ascii: "9")) { digit += 1 }
                total += UInt64(number(from: digit, to: lineEnd) ?? 0)
            }
            lineStart = lineEnd + 1
        }
        return total
    }

    /// The number of the process's threads, nil when it is gone.
    func threadCount(_ process: WatchedProcess) -> Int? {
        var status = Glibc.stat()
        guard process.taskDirectory >= 0, fstat(process.taskDirectory, &status) == 0, status.st_nlink > 2 else { return nil }
        return Int(status.st_nlink) - 2
    }

    /// Appends the thread's children to `pids` (none if it is gone).
    func appendChildren(of thread: WatchedThread, to pids: inout [Int32]) {
        guard let count = read(thread, .children) else { return }
        var index = 0
        while index < count {
            while index < count && buffer[index] == UInt8(ascii: " ") { index += 1 }
            let start = index
            while index < count && buffer[index] != UInt8(ascii: " ") { index += 1 }
            if let pid = number(from: start, to: index) { pids.append(Int32(pid)) }
        }
    }

    /// Reads the whole file into `buffer`; nil if it cannot be read (the
    /// thread is gone: marked stale, its descriptors closed at its next listing).
    private func read(_ thread: WatchedThread, _ file: ProcFile) -> Int? {
        if thread.stale { return nil }
        var fd = thread.descriptor(file)
        if fd < 0 {
            fd = Glibc.open(thread.directory + file.rawValue, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else {
                thread.stale = true
                return nil
            }
            thread.setDescriptor(file, fd)
        }
        var count = readFromStart(fd)
        // A long children list (hundreds of them) fills the buffer: grow it and read again.
        while count == buffer.count {
            let larger = UnsafeMutableRawBufferPointer.allocate(byteCount: buffer.count * 2, alignment: 8)
            buffer.deallocate()
            buffer = larger
            count = readFromStart(fd)
        }
        if count > 0 || (count == 0 && file == .children) { return count }
        // An empty children list reads as 0 bytes: that is an answer, not a failure.
        // Otherwise a stale descriptor: the thread exited (its id may now be another's).
        thread.stale = true
        return nil
    }

    /// pread(2) itself: libc's wrapper is a cancellation point, which costs a little on each of the many reads of a look.
    private func readFromStart(_ fd: Int32) -> Int {
        let result = tc_proc_pread(fd, buffer.baseAddress, buffer.count)
        return result < 0 ? -1 : result
    }

    private func starts(at index: Int, with prefix: [UInt8]) -> Bool {
        guard index + prefix.count <= buffer.count else { return false }
        for (offset, byte) in prefix.enumerated() where buffer[index + offset] != byte { return false }
        return true
    }

    private func number(from start: Int, to end: Int) -> Int? {
        guard start < end else { return nil }
        var value = 0
        for index in start..<end {
            let digit = buffer[index]
            guard digit >= UInt8(ascii: "0"), digit <= UInt8(ascii: "9") else { return nil }
            value = value &* 10 &+ Int(digit - UInt8(ascii: "0"))
        }
        return value
    }

    private static let voluntary = Array("voluntary_ctxt_switches:".utf8)
    private static let involuntary = Array("nonvoluntary_ctxt_switches:".utf8)
}
