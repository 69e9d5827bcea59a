#if canImport(Glibc)
import Glibc
#endif
import TimeShimC

extension ProcFS {
    /// The `/proc/PID/task/TID/` files the scheduler reads of one thread.
    enum ThreadFile: String {
        case stat, schedstat, status, children, wchan
    }

    /// One thread's ``ThreadFile``s, each opened at its first read and then
    /// kept open: the kernel makes a `/proc` file anew at every read from
    /// offset 0, so a look costs one `pread` per file, with no path to build.
    /// ``ProcessWatch`` keeps what it learns of a thread in a subclass, so
    /// that a read reaches the descriptor without a second object.
    class ThreadFiles {
        final let pid: Int32
        final let tid: Int32
        final let directory: String
        /// Open descriptors by ``ThreadFile`` (-1: not open yet).
        final var descriptors: (Int32, Int32, Int32, Int32, Int32) = (-1, -1, -1, -1, -1)
        /// A read failed: the thread is gone (its descriptors never show another thread that took its id).
        final var stale = false

        init(pid: Int32, tid: Int32) {
            self.pid = pid
            self.tid = tid
            directory = "/proc/\(pid)/task/\(tid)/"
        }

        /// Closes the descriptors; the next read opens them again.
        final func closeFiles() {
            for fd in [descriptors.0, descriptors.1, descriptors.2, descriptors.3, descriptors.4] where fd >= 0 { Glibc.close(fd) }
            descriptors = (-1, -1, -1, -1, -1)
            stale = false
        }

        final func descriptor(_ file: ThreadFile) -> Int32 {
            switch file {
            case .stat: descriptors.0
            case .schedstat: descriptors.1
            case .status: descriptors.2
            case .children: descriptors.3
            case .wchan: descriptors.4
            }
        }

        final func setDescriptor(_ file: ThreadFile, _ fd: Int32) {
            switch file {
            case .stat: descriptors.0 = fd
            case .schedstat: descriptors.1 = fd
            case .status: descriptors.2 = fd
            case .children: descriptors.3 = fd
            case .wchan: descriptors.4 = fd
            }
        }
    }

    /// `/proc/PID/task` opened as a directory, for ``threadCount(taskDirectory:)``; -1 when it cannot be.
    static func openTaskDirectory(of pid: Int32) -> Int32 {
        open("/proc/\(pid)/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    }

    /// The number of a process's threads, from its open task directory's
    /// link count (2 + the threads); nil when the process is gone.
    static func threadCount(taskDirectory: Int32) -> Int? {
        var status = Glibc.stat()
        guard taskDirectory >= 0, fstat(taskDirectory, &status) == 0, status.st_nlink > 2 else { return nil }
        return Int(status.st_nlink) - 2
    }

    /// Reads and parses ``ThreadFiles``, into one buffer kept from read to
    /// read, as bytes: a look reads hundreds of these files and makes no string.
    final class ThreadReader {
        struct ThreadState {
            var blocked: Bool
            var dead: Bool
        }

        private var buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 8)
        /// Whether `schedstat` exists (the kernel may be built without it).
        private let hasSchedstat = access("/proc/self/schedstat", F_OK) == 0

        deinit { buffer.deallocate() }

        func stat(_ thread: ThreadFiles) -> ThreadState? {
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
        func waitsInKernel(_ thread: ThreadFiles) -> Bool? {
            waitChannel(thread).map { $0 != .none }
        }

        /// What a thread's wait channel says.
        enum WaitChannel: Equatable {
            /// `0`: on the run queue, woken and not run yet, or dead.
            case none
            /// A kernel function that only ever sleeps interruptibly (a futex, poll, epoll, select, a pipe, a
            /// sleep, a child or signal wait): the thread is asleep, state `S`, without reading its `stat`.
            case interruptible
            /// Another function, which may also be an uninterruptible (`D`) sleep: `stat` says which.
            case other
        }

        /// The thread's ``WaitChannel``; nil when it is gone.
        func waitChannel(_ thread: ThreadFiles) -> WaitChannel? {
            guard let count = read(thread, .wchan) else { return nil }
            if count == 1 && buffer[0] == UInt8(ascii: "0") { return WaitChannel.none }
            // The symbol up to a compiler's suffix ("do_sigtimedwait.isra.0").
            var end = 0
            while end < count && buffer[end] != UInt8(ascii: ".") && buffer[end] != UInt8(ascii: "\n") { end += 1 }
            let symbol = UnsafeRawBufferPointer(rebasing: buffer[..<end])
            return Self.interruptibleChannels.contains { $0.elementsEqual(symbol) } ? .interruptible : .other
        }

        /// The kernel functions a thread waits in that put it to sleep interruptibly and nothing else.
        private static let interruptibleChannels: [[UInt8]] = [
            "futex_wait_queue", "futex_wait_multiple", "do_epoll_wait", "ep_poll", "do_select", "do_sys_poll",
            "do_nanosleep", "hrtimer_nanosleep", "pipe_read", "anon_pipe_read", "pipe_write", "anon_pipe_write",
            "do_wait", "do_sigtimedwait", "sigsuspend",
        ].map { Array($0.utf8) }

        /// How many times the thread has been scheduled onto a CPU; nil when it is gone.
        func runCount(_ thread: ThreadFiles) -> UInt64? {
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

        /// Appends the thread's children to `pids` (none if it is gone).
        func appendChildren(of thread: ThreadFiles, to pids: inout [Int32]) {
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
        private func read(_ thread: ThreadFiles, _ file: ThreadFile) -> Int? {
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
}
