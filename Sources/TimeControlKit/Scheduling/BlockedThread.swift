#if canImport(Glibc)
import Glibc
#endif
import TimeShimC

/// What a blocked thread of a session waits for, and on which side of the
/// session that is (SPEC §8, "Inside and outside"; docs/auto-advance.md).
///
/// Read from `/proc`: the system call the thread is blocked in
/// (`/proc/PID/task/TID/syscall`), the descriptors it waits on (its
/// arguments; a `poll` array or `select` sets read from the process's
/// memory; an epoll set's `fdinfo`), and what each descriptor is — a pipe
/// and the processes that hold it, a socket and the process at its other
/// end (`/proc/net/tcp*`, `/proc/net/udp*`, the kernel's unix-socket
/// diagnostics), a terminal.
public struct BlockedThread: Sendable, Hashable, Codable {
    /// Which side of the session can end the wait.
    public enum Side: String, Sendable, Hashable, Codable {
        /// An attached process (a futex, a pipe or socket whose other end is
        /// attached, a child, a signal), or nothing but time.
        case inside
        /// Anyone at all: a listening socket, an unconnected datagram socket.
        /// Auto-advance may jump past it (nobody promised to come), but it is
        /// never called a deadlock.
        case anyone
        /// The world outside the session: a socket whose peer is not attached
        /// or is on another host, a pipe a process outside holds, a terminal,
        /// or anything that cannot be classified. Auto-advance holds its jumps.
        case outside
    }

    public var pid: Int32
    public var thread: Int32
    /// The process name (`/proc/PID/comm`).
    public var command: String
    /// The thread's own name (`/proc/PID/task/TID/comm`), when it has one other than the process's.
    public var threadName: String?
    public var side: Side
    /// What it waits in, for people: `futex`, `read on pipe:[123] (held by 456 sh, not attached)`, ….
    public var waitsOn: String

    /// One line for people: `4321/4322 python3: outside: recvfrom on socket to 127.0.0.1:8080 (pid 99 nginx, not attached)`.
    public var description: String {
        "\(pid)/\(thread) \(command)\(threadName.map { " (thread \($0))" } ?? ""): \(side.rawValue): \(waitsOn)"
    }

    /// Threads of timectl's own (the shim's helper threads, `timectl run`'s guardian) are named `timectl-…`.
    var isTimectls: Bool { (threadName ?? command).hasPrefix("timectl-") }
}

/// Classifies blocked threads. What it reads of the machine — which
/// processes hold which pipes and sockets, the socket tables — it keeps for
/// up to a second, and reads again at once when it meets a pipe or socket it
/// has not seen: a scheduler classifies the threads a step woke many
/// thousand times a second.
final class WaitClassifier {
    /// The processes of the session: a pipe's or socket's other end held by one of them is "inside". Set from
    /// `classify(pid:tid:attached:)`'s argument when a wait is classified afresh.
    private var attached: Set<Int32> = []
    /// Of those, the ones a scheduler's own run started (docs/scheduler.md, "Who holds a pipe").
    private var inRun: Set<Int32> = []
    /// The pipes and sockets the run inherited (its scheduler's process held them when it started); nil: no run of
    /// its own (a daemon, `status`), so that every pipe's holders are looked for on the whole machine.
    private let inherited: Set<String>?
    private let ownPID = getpid()
    private var everyHolder: Cached<[String: [Int32]]>? = nil
    /// The same, of the run's processes and this one only.
    private var runHolders: Cached<[String: [Int32]]>? = nil
    private var inet: Cached<[UInt64: InetSocket]>? = nil
    private var unix: Cached<[UInt64: (peer: UInt64, state: UInt32)]>? = nil

    private struct Cached<Value> {
        var value: Value
        var read = tc_real_ns(CLOCK_MONOTONIC)
        var fresh: Bool { tc_real_ns(CLOCK_MONOTONIC) - read < 1_000_000_000 }
    }

    /// A table kept in `cache`, read again when older than a second or when `has` finds nothing in it.
    private func lookUp<Value, Result>(_ cache: inout Cached<Value>?, read: () -> Value, has: (Value) -> Result?) -> Result? {
        if let cached = cache, cached.fresh, let found = has(cached.value) { return found }
        let value = read()
        cache = Cached(value: value)
        return has(value)
    }

    /// A classifier for a scheduler whose own run's processes are those `classify`'s `attached` calls in its run
    /// (`inherited`: the pipes and sockets that run inherited), or, without `inherited`, for processes whose
    /// pipes and sockets may come from anywhere.
    init(inherited: Set<String>? = nil) {
        self.inherited = inherited
    }

    /// The pipes and sockets this process holds now: what a run it starts inherits.
    static func ownDescriptors() -> Set<String> { Set(ProcFS.descriptorTargets(of: getpid())) }

    /// The blocked threads of `pids` (those asleep in the kernel), timectl's own left out.
    static func blockedThreads(of pids: [Int32]) -> [BlockedThread] {
        let classifier = WaitClassifier()
        let attached = Attached(all: Set(pids))
        var blocked: [BlockedThread] = []
        for pid in pids {
            for tid in ProcFS.threads(of: pid) {
                guard ProcFS.state(pid: pid, tid: tid) == "S", var wait = classifier.classify(pid: pid, tid: tid, attached: { attached })
                else { continue }
                wait.command = ProcFS.command(of: pid) ?? "?"
                wait.threadName = ProcFS.threadName(pid: pid, tid: tid).flatMap { $0 == wait.command ? nil : $0 }
                if !wait.isTimectls { blocked.append(wait) }
            }
        }
        return blocked
    }

    /// Each classified thread's `syscall` file, kept open, and the last system call it was classified in.
    private var syscallFiles: [Int32: Int32] = [:]
    private var lastCall: [Int32: (number: Int, first: UInt64, read: Int64, side: BlockedThread.Side, what: String)] = [:]

    deinit { for fd in syscallFiles.values { close(fd) } }

    /// Closes what it keeps for threads other than `live`.
    func forget(allBut live: Set<Int32>) {
        commands.removeAll()
        for (tid, fd) in syscallFiles where !live.contains(tid) {
            close(fd)
            syscallFiles[tid] = nil
            lastCall[tid] = nil
        }
    }

    /// The thread's wait (its `command` left empty, its `threadName` nil: the caller names it), or nil when
    /// it is not blocked in a system call (it runs, or is gone). A thread found again in the same call on the
    /// same first argument (the same descriptor) within a second keeps the class it had: a pipe read woken
    /// and entered again, step after step, costs one read of `syscall`. `attached()` (the session's
    /// processes) is asked only for a wait classified afresh.
    /// The processes a scheduler watches (`all`), and those of them that its own run started (`inRun`).
    struct Attached {
        var all: Set<Int32>
        var inRun: Set<Int32> = []
    }

    func classify(pid: Int32, tid: Int32, attached: () -> Attached) -> BlockedThread? {
        if syscallFiles[tid] == nil {
            let fd = ProcFS.openSystemCall(pid: pid, tid: tid)
            if fd >= 0 { syscallFiles[tid] = fd }
        }
        let call = syscallFiles[tid].flatMap(ProcFS.systemCall(reading:))
        if let call, call.number >= 0, let last = lastCall[tid], last.number == call.number, last.first == call.arguments[0],
           tc_real_ns(CLOCK_MONOTONIC) - last.read < 1_000_000_000 {
            return BlockedThread(pid: pid, thread: tid, command: "", side: last.side, waitsOn: last.what)
        }
        guard let call else {
            if let fd = syscallFiles.removeValue(forKey: tid) { close(fd) }
            guard ProcFS.isLive(pid: pid, tid: tid) else { return nil }
            // The kernel would not say (another user's process, one that changed its credentials, a thread on its
            // way out): what it waits on may be anything, so it holds the jump as an outside wait does, and never
            // makes a deadlock.
            return BlockedThread(pid: pid, thread: tid, command: "", side: .outside, waitsOn: "(not readable by this user: taken as outside)")
        }
        guard call.number >= 0 else { return nil }
        let processes = attached()
        (self.attached, inRun) = (processes.all, processes.inRun)
        let (side, what) = classify(call: call, pid: pid)
        lastCall[tid] = (call.number, call.arguments[0], tc_real_ns(CLOCK_MONOTONIC), side, what)
        return BlockedThread(pid: pid, thread: tid, command: "", side: side, waitsOn: what)
    }

    private func classify(call: ProcFS.SystemCall, pid: Int32) -> (BlockedThread.Side, String) {
        let a = call.arguments
        let name = SystemCall.name(of: call.number)
        switch SystemCall(number: call.number) {
        case .read, .write, .pread64, .pwrite64, .readv, .writev, .preadv, .pwritev, .preadv2, .pwritev2, .connect, .accept,
             .sendto, .recvfrom, .sendmsg, .recvmsg, .accept4, .recvmmsg, .sendmmsg, .sendfile, .splice, .tee:
            return descriptors([Int32(truncatingIfNeeded: a[0])], pid: pid, call: name)
        case .poll, .ppoll:  // an array of {int fd; short events; short revents}
            let count = Int(min(a[1], 4096))
            guard let bytes = ProcFS.memory(pid: pid, address: a[0], count: count * 8) else { return (.outside, "\(name) (its descriptors unreadable)") }
            var fds: [Int32] = []
            for i in 0..<count {
                var word: UInt32 = 0
                for byte in (0..<4).reversed() { word = word << 8 | UInt32(bytes[i * 8 + byte]) }
                let fd = Int32(bitPattern: word)
                if fd >= 0 { fds.append(fd) }
            }
            return descriptors(fds, pid: pid, call: name)
        case .select, .pselect6:  // three fd_set bitmaps of `nfds` bits
            let nfds = Int(min(a[0], 65536)), size = (nfds + 7) / 8
            var fds: Set<Int32> = []
            for set in [a[1], a[2], a[3]] where set != 0 {
                guard let bytes = ProcFS.memory(pid: pid, address: set, count: size) else { return (.outside, "\(name) (its descriptors unreadable)") }
                for fd in 0..<nfds where bytes[fd / 8] & (1 << (fd % 8)) != 0 { fds.insert(Int32(fd)) }
            }
            return descriptors(fds.sorted(), pid: pid, call: name)
        case .epoll_wait, .epoll_pwait, .epoll_pwait2:
            return descriptors([Int32(truncatingIfNeeded: a[0])], pid: pid, call: name)
        case .futex, .futex_waitv:
            return (.inside, name)
        case .wait4, .waitid:
            return (.inside, "\(name) (a child)")
        case .pause, .rt_sigtimedwait, .rt_sigsuspend:
            return (.inside, "\(name) (a signal)")
        case .nanosleep, .clock_nanosleep:
            return (.inside, name)
        case .flock:
            return lock(fd: Int32(truncatingIfNeeded: a[0]), pid: pid, call: name)
        case .fcntl where a[1] == 7 || a[1] == 38:  // F_SETLKW (lockf too), F_OFD_SETLKW
            return lock(fd: Int32(truncatingIfNeeded: a[0]), pid: pid, call: a[1] == 7 ? "fcntl(F_SETLKW)" : "fcntl(F_OFD_SETLKW)")
        case .semop, .semtimedop, .msgsnd, .msgrcv, .mq_timedsend, .mq_timedreceive:
            // System V semaphores and message queues, POSIX message queues: whoever may open them can end the
            // wait, as anyone sharing the memory of a futex can; taken, as a futex is, as the session's own.
            let what: String
            switch SystemCall(number: call.number) {
            case .semop, .semtimedop: what = "a System V semaphore"
            case .msgsnd, .msgrcv: what = "a System V message queue"
            default: what = "a POSIX message queue"
            }
            return (.inside, "\(name) (\(what))")
        default:
            return (.outside, "\(name) (not classified: taken as outside)")
        }
    }

    /// A wait for a lock on the file of `fd`: inside when every process holding a lock on it is attached
    /// (a `fcntl` lock is its process's; a `flock` or open-file lock belongs to an open file, and is held by
    /// every attached process whose descriptor shows it, else by the process that took it).
    private func lock(fd: Int32, pid: Int32, call: String) -> (BlockedThread.Side, String) {
        guard let file = ProcFS.fileIdentity(pid: pid, fd: fd) else { return (.outside, "\(call) (its file unreadable)") }
        let path = ProcFS.descriptor(pid: pid, fd: fd) ?? "?"
        let locks = ProcFS.locks(device: file.device, inode: file.inode)
        guard !locks.isEmpty else { return (.inside, "\(call) on \(path)") }  // released meanwhile: the wait ends
        var holders: [Int32] = []
        for lock in locks where !holders.contains(lock.pid) {
            if lock.kind == "POSIX" || attached.contains(lock.pid) {
                holders.append(lock.pid)
            } else {
                // An open file's lock: whoever shares that open file holds it.
                let sharing = ProcFS.lockHolders(device: file.device, inode: file.inode, among: Array(attached).filter { $0 != pid })
                holders.append(contentsOf: sharing.isEmpty ? [lock.pid] : sharing)
            }
        }
        if let stranger = holders.first(where: { !attached.contains($0) }) {
            let who = stranger < 0 ? "a process not attached" : "\(stranger) \(command(of: stranger)), not attached"
            return (.outside, "\(call) on \(path) (locked by \(who))")
        }
        return (.inside, "\(call) on \(path) (locked by \(named(holders)))")
    }

    /// The side of a wait on `fds` (an epoll descriptor stands for its set): outside if any is, else anyone if any is.
    private func descriptors(_ fds: [Int32], pid: Int32, call: String) -> (BlockedThread.Side, String) {
        var worst: (BlockedThread.Side, String)? = nil
        var seen = Set<String>()
        var queue = fds
        while let fd = queue.popLast() {
            guard let target = ProcFS.descriptor(pid: pid, fd: fd), seen.insert(target).inserted else { continue }
            if target == "anon_inode:[eventpoll]" {
                queue.append(contentsOf: ProcFS.epollTargets(pid: pid, fd: fd))
                continue
            }
            let (side, what) = classify(target: target, pid: pid)
            // The shim adds a wake eventfd to every descriptor wait it makes: the program's own descriptors say more.
            let wake = target == "anon_inode:[eventfd]"
            if worst == nil || rank(side) > rank(worst!.0) || (worst!.1 == "anon_inode:[eventfd]" && !wake && side == worst!.0) {
                worst = (side, what)
            }
        }
        guard let worst else { return (.inside, call) }
        return (worst.0, "\(call) on \(worst.1)")
    }

    private func rank(_ side: BlockedThread.Side) -> Int {
        switch side {
        case .inside: return 0
        case .anyone: return 1
        case .outside: return 2
        }
    }

    private func classify(target: String, pid: Int32) -> (BlockedThread.Side, String) {
        if target.hasPrefix("pipe:") { return pipe(target, pid: pid) }
        if target.hasPrefix("socket:["), let inode = UInt64(target.dropFirst(8).dropLast()) { return socket(inode, pid: pid) }
        if target.hasPrefix("anon_inode:") {
            return target.contains("inotify") || target.contains("fanotify") ? (.outside, "\(target) (file changes)") : (.inside, target)
        }
        if target.hasPrefix("/dev/pts/") || target.hasPrefix("/dev/tty") || target == "/dev/console" || target == "/dev/ptmx" {
            return (.outside, "\(target) (a terminal)")
        }
        var info = stat()
        if stat(target, &info) == 0, (info.st_mode & S_IFMT) == S_IFIFO { return pipe(target, pid: pid) }
        if stat(target, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG || target == "/dev/null" { return (.inside, target) }
        return (.outside, "\(target) (not classified: taken as outside)")
    }

    /// A pipe or FIFO: inside when every process holding it is attached.
    private func pipe(_ target: String, pid: Int32) -> (BlockedThread.Side, String) {
        if madeInRun(target, waiter: pid) && !describingHolders {
            // Only the run's processes and this one can hold it: the wait is inside, unless this process is not.
            if !attached.contains(ownPID) && ProcFS.descriptorTargets(of: ownPID).contains(target) {
                return (.outside, "\(target) (held by \(ownPID) \(command(of: ownPID)), not attached)")
            }
            return (.inside, "\(target) (made inside the run)")
        }
        let holders = holders(of: target, waiter: pid).filter { $0 != pid }
        if let stranger = holders.first(where: { !attached.contains($0) }) {
            return (.outside, "\(target) (held by \(stranger) \(command(of: stranger)), not attached)")
        }
        return (.inside, holders.isEmpty ? target : "\(target) (held by \(named(holders)))")
    }

    /// The processes that hold `target` (a pipe, a FIFO, a socket) that a thread of `waiter` waits on. A pipe or
    /// socket the run did not inherit was made inside it, and only the run's processes (and this one) can hold it:
    /// they are all that is read, not every process of the machine — unless the waiter is not the run's own (a
    /// process attached from elsewhere), or the run has no processes of its own. docs/limits.md says what this
    /// misses (a descriptor passed out of the run over a unix socket).
    private func holders(of target: String, waiter: Int32) -> [Int32] {
        if madeInRun(target, waiter: waiter) {
            let scanned = Array(inRun) + [ownPID]
            return lookUp(&runHolders, read: { ProcFS.descriptorHolders(of: scanned) }, has: { $0[target] }) ?? []
        }
        return lookUp(&everyHolder, read: { ProcFS.descriptorHolders(of: ProcFS.allProcesses()) }, has: { $0[target] }) ?? []
    }

    /// Whether `target` (a pipe or socket, not a FIFO, which anyone may open by its path) was made inside the
    /// scheduler's own run, as far as a thread of `waiter` can tell: the run did not inherit it, and the waiter is
    /// one of the run's own processes.
    private func madeInRun(_ target: String, waiter: Int32) -> Bool {
        guard let inherited, !target.hasPrefix("/") else { return false }
        return !inherited.contains(target) && inRun.contains(waiter)
    }

    /// Set while ``describe(pid:tid:attached:)`` classifies: pipes made inside the run are then read for their holders too.
    private var describingHolders = false

    /// The wait of a thread, described for a report (a deadlock): with the holders of a pipe made inside the run,
    /// which classifying alone does not read (every holder of such a pipe is inside).
    func describe(pid: Int32, tid: Int32, attached: () -> Attached) -> BlockedThread? {
        describingHolders = true
        defer { describingHolders = false }
        lastCall[tid] = nil
        return classify(pid: pid, tid: tid, attached: attached)
    }

    /// The first few of `pids` with their names, and how many more: a pipe that 400 idle workers share is
    /// classified 400 times, and reading every holder's name each time would read 160,000 files.
    private func named(_ pids: [Int32], atMost shown: Int = 3) -> String {
        let named = pids.prefix(shown).map { "\($0) \(command(of: $0))" }.joined(separator: ", ")
        return pids.count > shown ? "\(named) and \(pids.count - shown) more" : named
    }

    /// Process names, as the classifier last read them (a description only: a reused pid may show an older name).
    private var commands: [Int32: String] = [:]

    private func command(of pid: Int32) -> String {
        if let known = commands[pid] { return known }
        let name = ProcFS.command(of: pid) ?? "?"
        if commands.count > 4096 { commands.removeAll() }
        commands[pid] = name
        return name
    }

    private func socket(_ inode: UInt64, pid: Int32) -> (BlockedThread.Side, String) {
        if let entry = lookUp(&inet, read: InetSocket.table, has: { $0[inode] }) {
            if entry.listening { return (.anyone, "\(entry.protocolName) socket listening on \(entry.localDescription)") }
            guard entry.remoteIsLoopback else { return (.outside, "\(entry.protocolName) socket to \(entry.remoteDescription) (another host)") }
            let peer = lookUp(&inet, read: InetSocket.table, has: { table in
                table.first { $0.value.local == entry.remote && $0.value.remote == entry.local && $0.value.protocolName == entry.protocolName }?.key
            })
            guard let peer else { return (.outside, "\(entry.protocolName) socket to \(entry.remoteDescription) (no process found at the other end)") }
            return other(end: "socket:[\(peer)]", what: "\(entry.protocolName) socket to \(entry.remoteDescription)", waiter: pid)
        }
        if let entry = lookUp(&unix, read: Self.unixSockets, has: { $0[inode] }) {
            if entry.state == 10 || entry.peer == 0 { return (.anyone, "unix socket socket:[\(inode)] \(entry.state == 10 ? "listening" : "unconnected")") }
            return other(end: "socket:[\(entry.peer)]", what: "unix socket socket:[\(inode)]", waiter: pid)
        }
        return (.outside, "socket:[\(inode)] (not classified: taken as outside)")
    }

    /// The side of the process that holds the other end `target` of a wait on `what`.
    private func other(end target: String, what: String, waiter pid: Int32) -> (BlockedThread.Side, String) {
        let holders = holders(of: target, waiter: pid)
        if let holder = holders.first(where: attached.contains) {
            return (.inside, "\(what) (\(holder) \(command(of: holder)))")
        }
        if let stranger = holders.first {
            return (.outside, "\(what) (\(stranger) \(command(of: stranger)), not attached)")
        }
        return (.outside, "\(what) (no process found at the other end)")
    }

    private static func unixSockets() -> [UInt64: (peer: UInt64, state: UInt32)] {
        var capacity = 4096
        while true {
            var inodes = [UInt64](repeating: 0, count: capacity), peers = inodes
            var states = [UInt32](repeating: 0, count: capacity)
            let count = Int(tc_unix_socket_peers(&inodes, &peers, &states, Int32(capacity)))
            if count < 0 { return [:] }
            if count <= capacity {
                var table: [UInt64: (peer: UInt64, state: UInt32)] = [:]
                for i in 0..<count { table[inodes[i]] = (peers[i], states[i]) }
                return table
            }
            capacity = count + 256
        }
    }
}

/// One row of /proc/net/{tcp,tcp6,udp,udp6}.
struct InetSocket {
    var protocolName: String
    var local: String   // "ADDRESS:PORT" as the kernel prints it (hex)
    var remote: String
    var state: Int

    var listening: Bool { protocolName.hasPrefix("tcp") ? state == 10 : Self.isUnset(remote) }
    var remoteIsLoopback: Bool { Self.isLoopback(remote) }
    var localDescription: String { Self.describe(local) }
    var remoteDescription: String { Self.describe(remote) }

    static func table() -> [UInt64: InetSocket] {
        var table: [UInt64: InetSocket] = [:]
        for name in ["tcp", "tcp6", "udp", "udp6"] {
            guard let text = ProcFS.socketTable(name) else { continue }
            for line in text.split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                guard fields.count > 9, let state = Int(fields[3], radix: 16), let inode = UInt64(fields[9]), inode != 0 else { continue }
                table[inode] = InetSocket(protocolName: name, local: String(fields[1]), remote: String(fields[2]), state: state)
            }
        }
        return table
    }

    static func isUnset(_ address: String) -> Bool {
        address.split(separator: ":").first.map { $0.allSatisfy { $0 == "0" } } ?? true
    }

    /// 127.0.0.0/8 (printed little-endian: "xx00007F" for 127.0.0.x), ::1, and ::ffff:127.x.
    static func isLoopback(_ address: String) -> Bool {
        guard let host = address.split(separator: ":").first else { return false }
        if host.count == 8 { return host.hasSuffix("7F") }
        if host == "00000000000000000000000001000000" { return true }
        return host.count == 32 && host.hasPrefix("0000000000000000FFFF0000") && host.hasSuffix("7F")
    }

    static func describe(_ address: String) -> String {
        let parts = address.split(separator: ":")
        guard parts.count == 2, let port = Int(parts[1], radix: 16) else { return address }
        let host = parts[0]
        if host.count == 8, let value = UInt32(host, radix: 16) {
            return "\(value & 0xff).\(value >> 8 & 0xff).\(value >> 16 & 0xff).\(value >> 24):\(port)"
        }
        return "[\(host)]:\(port)"
    }
}
