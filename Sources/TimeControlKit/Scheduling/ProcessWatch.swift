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
    struct Look {
        /// Every watched thread. After a look that walked them all (``complete``), each with the run count
        /// it read; after a look that read only what the kernel logged as woken, the counts of the last look
        /// that walked them all, except those in ``changed``.
        var threads: [Thread] { snapshot.threads }
        /// The threads this look read afresh, with their run counts: all of them when ``complete``.
        var changed: [Thread]
        /// Whether the look walked every watched thread (a thread not listed in it has exited).
        var complete: Bool
        /// The watched threads, for ``TimeSession/readWaitTable(knownLive:buffer:names:ownPID:)``.
        var live: TimeSession.LiveThreads { snapshot.live }
        var processes: [Int32] { snapshot.processes }
        /// Those of ``processes`` that the run's own roots started (``ProcessWatch/init(roots:runRoots:ownHelper:judgingOwnThreads:)``).
        var inRun: Set<Int32> { snapshot.inRun }
        fileprivate let snapshot: Snapshot
    }

    /// The threads of the last look that walked them all, shared by the looks that follow it until the next.
    fileprivate final class Snapshot {
        let threads: [Thread]
        let live: TimeSession.LiveThreads
        let processes: [Int32]
        let inRun: Set<Int32>

        init(_ threads: [Thread], inRun: Set<Int32> = []) {
            self.threads = threads
            self.inRun = inRun
            var live = TimeSession.LiveThreads()
            for thread in threads { live.insert(pid: thread.pid, tid: thread.tid) }
            self.live = live
            processes = Array(Set(threads.map(\.pid))).sorted()
        }
    }

    let roots: () -> [Int32]
    /// The roots of the scheduler's own run (its command, a harness's spawned processes), among `roots()` or this process.
    let runRoots: () -> [Int32]
    /// A process of timectl's own among its children (`run`'s guardian), never watched; 0: none.
    let ownHelper: () -> Int32
    private let ownPID = getpid()
    /// Whether this process's own threads are judged (all but the looking one).
    private let judgingOwnThreads: Bool
    /// The thread that looks (the one never judged), when this process's threads are judged; 0 otherwise.
    private var lookingThread: Int32 = 0
    private let files = ProcFS.ThreadReader()
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

    // The wake log (docs/scheduler.md, "Looking at what woke"): nil where the kernel does not offer it.
    private var wakeLog: OpaquePointer?
    /// Whether the log may still be opened: wanted, and not refused by the kernel yet.
    private var wakeLogPossible = ProcessWatch.wakeLogSetting != "off"
    /// From how many watched threads on the log is opened. Below, a look that reads every thread costs less than
    /// the log makes every wake-up on the machine cost while it is open (docs/performance.md, "Auto-advance").
    static let wakeLogThreshold = ProcessWatch.wakeLogSetting == "always" ? 0 : 8
    private var woken: [Int32] = Array(repeating: 0, count: ProcessWatch.logCapacity)
    private var starters: [Int32] = Array(repeating: 0, count: ProcessWatch.logCapacity)
    private static let logCapacity = 4096
    /// Every watched thread was proven blocked by a look, and nothing has changed the tree since: each thread not
    /// marked ``WatchedThread/woken`` has stayed blocked since its last check. Only then may a look read the log alone.
    private var proven = false
    /// What that proof assumed: the roots, and the thread that looked (the one not judged).
    private var provenRoots: [Int32] = []
    private var provenLookingThread: Int32 = 0
    /// The judged threads of the proof, by thread id, and those the log named since their last check.
    private var judgedByID: [Int32: WatchedThread] = [:]
    private var wokenThreads: [WatchedThread] = []
    /// The judged threads' ids as a bitmap (bit `tid % 64` of word `tid / 64`), for the log's reader to keep only their records.
    private var watchedBits: [UInt64] = []
    /// The lowest thread id the kernel logs (``tc_wakelog_limit``); `Int32.max`: no limit set yet.
    private var limitedLowest = Int32.max
    /// The threads read since the last look that found everything blocked, with their counts: its ``Look/changed``.
    private var checkedSinceLook: [Thread] = []
    private var snapshot = Snapshot([])
    /// How the last looks went, for the benchmark and the tests: looks that read the log alone, and looks that walked everything.
    private(set) var logLooks = 0
    private(set) var fullLooks = 0

    /// Watches `roots()` (evaluated at every look) and their descendants;
    /// with `judgingOwnThreads`, this process's threads too, when it is a root.
    init(roots: @escaping () -> [Int32], runRoots: @escaping () -> [Int32] = { [] }, ownHelper: @escaping () -> Int32 = { 0 },
         judgingOwnThreads: Bool = false) {
        self.roots = roots
        self.runRoots = runRoots
        self.ownHelper = ownHelper
        self.judgingOwnThreads = judgingOwnThreads
        ownThread = WatchedThread(pid: ownPID, tid: ownPID)
    }

    deinit {
        ownThread.close()
        for process in watched.values { process.close() }
        if let wakeLog { tc_wakelog_close(wakeLog) }
    }

    /// `TIMECTL_WAKE_LOG`, a diagnostic (docs/scheduler.md): `off`, every look walks every thread, as without the
    /// privilege to read the log; `always`, the log is read from the first look, however few the threads.
    private static let wakeLogSetting = getenv("TIMECTL_WAKE_LOG").map { String(cString: $0) } ?? ""

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
    /// judged. `from` are the roots to start from (`roots()` by default). `fully`: a look that reads every
    /// thread, never the wake log alone.
    func look(from start: [Int32]? = nil, ignoring ignored: Set<Int32> = [], fully: Bool = false) -> Look? {
        lookNumber &+= 1
        lookingThread = judgingOwnThreads ? tc_gettid() : 0
        if suspect?.tid == lookingThread { suspect = nil }
        if let wakeLog {
            let roots = start ?? self.roots()
            if proven && !fully && start == nil && ignored.isEmpty && lookingThread == provenLookingThread && roots == provenRoots {
                switch lookAtWoken(wakeLog) {
                case .look(let look):
                    logLooks += 1
                    return look
                case .busy:
                    logLooks += 1
                    return nil
                case .everything: break
                }
            }
            // The kernel logs only the thread ids from the lowest of the roots and this process on (pids are handed out
            // in increasing order: their descendants' come after); set before the proof below, which rests on it.
            limitLog(to: roots.reduce(ownPID) { $1 > 0 ? min($0, $1) : $0 })
            guard let wakeLog = self.wakeLog else {
                fullLooks += 1
                return walk(from: roots, ignoring: ignored)
            }
            // Everything is read below: what was logged until now says nothing more.
            tc_wakelog_skip(wakeLog)
            for thread in wokenThreads { thread.woken = false }
            wokenThreads.removeAll(keepingCapacity: true)
            checkedSinceLook.removeAll(keepingCapacity: true)
            proven = false
            fullLooks += 1
            guard let look = walk(from: roots, ignoring: ignored) else { return nil }
            if start == nil && ignored.isEmpty {
                (proven, provenRoots, provenLookingThread) = (true, roots, lookingThread)
                judgedByID.removeAll(keepingCapacity: true)
                for thread in judged { judgedByID[thread.tid] = thread }
                // The log keeps only records about these threads (and this process's main thread, which starts the command).
                for index in watchedBits.indices { watchedBits[index] = 0 }
                var lowest = ownPID
                for tid in judgedByID.keys.lazy.map(Int.init) + [Int(ownPID)] where tid >= 0 {
                    if tid / 64 >= watchedBits.count { watchedBits += Array(repeating: 0, count: tid / 64 + 1 - watchedBits.count) }
                    watchedBits[tid / 64] |= 1 << UInt64(tid % 64)
                    lowest = min(lowest, Int32(tid))
                }
                // A thread below the kernel's limit (the pids wrapped round): this proof may have missed its wake-ups.
                if lowest < limitedLowest {
                    limitLog(to: lowest)
                    proven = false
                }
            }
            return look
        }
        fullLooks += 1
        let look = walk(from: start ?? roots(), ignoring: ignored)
        if wakeLogPossible && judged.count >= Self.wakeLogThreshold {
            // Opened once the watch is large enough to profit from it; the next look walks every thread again, from
            // which on the log covers what happens. Without the privilege (not root), never asked again.
            wakeLog = tc_wakelog_open()
            wakeLogPossible = wakeLog != nil
        }
        return look
    }

    private enum LogLook { case look(Look), busy, everything }

    /// A look from the wake log alone (docs/scheduler.md, "Looking at what woke"): only the threads the log
    /// names as woken since their last check are read. `.everything` when the log cannot tell (records lost,
    /// a watched thread started a thread or process, a thread is gone).
    private func lookAtWoken(_ log: OpaquePointer) -> LogLook {
        guard absorb(log) else { return .everything }
        // Each is checked blocked after the log was read: from then on, a wake-up of it is a record the next reading sees.
        while let thread = wokenThreads.last {
            guard let process = thread.process, let runs = files.runCount(thread) else { return .everything }
            if runs != thread.lastRuns { ranSeen(thread, of: process) }
            (thread.lastRuns, thread.runs, thread.freshAtLook) = (runs, runs, lookNumber)
            guard blockedNow(thread, of: process) else {
                if thread.stale { return .everything }
                thread.blockedSinceRuns = nil
                suspect = thread
                return .busy
            }
            // Off the CPU from its check on, with at most this count; pass 1 of a later walk reads it afresh if it moved.
            thread.quietRuns = runs
            thread.woken = false
            wokenThreads.removeLast()
            checkedSinceLook.append(Thread(pid: thread.pid, tid: thread.tid, runs: runs))
        }
        // None woken since its check: all were blocked at once, when the log was read last.
        guard absorb(log) else { return .everything }
        guard wokenThreads.isEmpty else {
            suspect = wokenThreads.last
            return .busy
        }
        defer { checkedSinceLook.removeAll(keepingCapacity: true) }
        return .look(Look(changed: checkedSinceLook, complete: false, snapshot: snapshot))
    }

    /// Reads the wake log into ``wokenThreads``; false when it cannot tell what happened (records lost, or a watched
    /// thread, or this process's main thread, started a thread or process: the tree changed).
    private func absorb(_ log: OpaquePointer) -> Bool {
        let reading = woken.withUnsafeMutableBufferPointer { woken in
            starters.withUnsafeMutableBufferPointer { starters in
                watchedBits.withUnsafeBufferPointer { bits in
                    tc_wakelog_read(log, bits.baseAddress, bits.count, woken.baseAddress, starters.baseAddress, Int32(Self.logCapacity))
                }
            }
        }
        if reading.overflowed != 0 { return false }
        for index in 0..<Int(reading.starters) {
            let starter = starters[index]
            if judgedByID[starter] != nil || starter == ownPID { return false }
        }
        for index in 0..<Int(reading.woken) {
            guard let thread = judgedByID[woken[index]], !thread.woken else { continue }
            thread.woken = true
            wokenThreads.append(thread)
        }
        return true
    }

    /// Has the kernel log only thread ids from `lowest` on, when it logs fewer now: on a busy machine the wake-ups
    /// of every other task would fill the rings. A kernel that filters none or only some of the events: no log at
    /// all, rather than one that misses wake-ups.
    private func limitLog(to lowest: Int32) {
        guard let wakeLog, lowest < limitedLowest else { return }
        if tc_wakelog_limit(wakeLog, lowest, Int32.max) == 0 {
            limitedLowest = lowest
        } else {
            tc_wakelog_close(wakeLog)
            (self.wakeLog, wakeLogPossible, proven) = (nil, false, false)
        }
    }

    /// A look that walks every thread, in three passes (docs/scheduler.md).
    private func walk(from start: [Int32], ignoring ignored: Set<Int32>) -> Look? {
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
        guard discover(from: start, ignoring: ignored, countingRuns: true), !threadWentAway else { return nil }
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
        snapshot = Snapshot(threads, inRun: Set(watched.values.lazy.filter(\.inRun).map(\.pid)))
        return Look(changed: threads, complete: true, snapshot: snapshot)
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
        // The wait channel first: a function that only sleeps interruptibly needs no `stat` (the costlier read).
        var channel: ProcFS.ThreadReader.WaitChannel? = nil
        if process.channelsReadable {
            channel = files.waitChannel(thread)
            if channel == .interruptible {
                (thread.blockedSinceRuns, thread.blockedDead) = (thread.runs, false)
                return true
            }
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
            guard channel == .other else { return false }  // `0` while not dead: on the run queue
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
        proven = false
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
        // The run's own processes first, marked as such; then the others.
        queue.append(contentsOf: runRoots())
        var inRun = true
        let helper = ownHelper()
        var complete = true
        while let pid = queue.popLast() ?? (inRun ? nextRoots(start, &inRun) : nil) {
            guard pid != helper, seen.insert(pid).inserted else { continue }
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
            guard let threadCount = ProcFS.threadCount(taskDirectory: process.taskDirectory) else {  // gone
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
            process.inRun = inRun
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

    /// The other roots, once the run's own processes have been walked.
    private func nextRoots(_ start: [Int32], _ inRun: inout Bool) -> Int32? {
        inRun = false
        queue.append(contentsOf: start)
        return queue.popLast()
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
    /// The last walk reached it from the run's own roots.
    var inRun = false

    init(pid: Int32) {
        self.pid = pid
        leader = WatchedThread(pid: pid, tid: pid)
        threads = [leader]
        taskDirectory = ProcFS.openTaskDirectory(of: pid)
        channelsReadable = ProcFS.mayReadMemory(of: pid)
        leader.process = self
        listThreads()
    }

    /// Lists the threads afresh, keeping the open files of those still there;
    /// whether it found threads it did not know.
    @discardableResult
    func listThreads() -> Bool {
        needsListing = false
        let tids = ProcFS.threads(of: pid)
        var kept: [WatchedThread] = []
        for thread in threads {
            if !thread.stale && tids.contains(thread.tid) { kept.append(thread) } else if thread !== leader { thread.close() }
        }
        if leader.stale { leader.close() }  // reopened at the next read
        var found = false
        for tid in tids where !kept.contains(where: { $0.tid == tid }) {
            let thread = tid == pid ? leader : WatchedThread(pid: pid, tid: tid)
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

/// A watched thread: its `/proc` files (kept open, see ``ProcFS/ThreadFiles``),
/// and what the last looks learnt about it.
private final class WatchedThread: ProcFS.ThreadFiles {
    /// The run count of the current look's pass 1.
    var runs: UInt64 = 0
    /// The run count read before the last pass 2 that found it blocked (nil: it ran since, or never was).
    var blockedSinceRuns: UInt64?
    /// That pass 2 found it dead.
    var blockedDead = false
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
    /// The wake log named it since its last check (it is in the watch's ``ProcessWatch/wokenThreads``).
    var woken = false

    func close() {
        closeFiles()
        blockedSinceRuns = nil
        lastRuns = nil
        quietRuns = nil
        childrenRuns = nil
    }
}
