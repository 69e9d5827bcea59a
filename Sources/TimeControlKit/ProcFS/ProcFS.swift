#if canImport(Glibc)
import Glibc
#endif
import TimeShimC

/// Reading `/proc`: small files whole, descriptors' targets, a process's
/// memory. Each read is one system call on a file the kernel makes anew.
enum ProcFS {
    /// A `/proc` file's text (at most `limit` bytes), or nil when it cannot be read.
    static func text(_ path: String, limit: Int = 1 << 20) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: min(limit, 65536))
        while bytes.count < limit {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            bytes.append(contentsOf: chunk[..<count])
        }
        return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
    }

    /// A process's name (`/proc/PID/comm`), or nil when it is gone.
    static func command(of pid: Int32) -> String? { threadName(pid: pid, tid: pid) }

    /// A thread's own name (`/proc/PID/task/TID/comm`), or nil when it is gone.
    static func threadName(pid: Int32, tid: Int32) -> String? {
        text("/proc/\(pid)/task/\(tid)/comm", limit: 64).map { String($0.prefix { $0 != "\n" }) }
    }

    /// The system call a thread is blocked in: `number` −1 while it runs.
    struct SystemCall {
        var number: Int
        var arguments: [UInt64]
    }

    /// `/proc/PID/task/TID/syscall`; nil when the kernel will not say (another user's process) or it is gone.
    static func systemCall(pid: Int32, tid: Int32) -> SystemCall? {
        let fd = open("/proc/\(pid)/task/\(tid)/syscall", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        return systemCall(reading: fd)
    }

    /// The same from a descriptor of that file kept open (the kernel makes it anew at each read from offset 0).
    /// Parsed from the bytes as they come: the scheduler reads it at most steps.
    static func systemCall(reading fd: Int32) -> SystemCall? {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 256) { buffer -> SystemCall? in
            let count = tc_proc_pread(fd, buffer.baseAddress, buffer.count)
            guard count > 0 else { return nil }
            return systemCall(parsing: UnsafeBufferPointer(rebasing: buffer[..<count]))
        }
    }

    /// "running", or "NR 0xARG1 … 0xARG6 0xSP 0xPC" (NR −1, with SP and PC only, outside a system call).
    private static func systemCall(parsing line: UnsafeBufferPointer<UInt8>) -> SystemCall? {
        var at = 0
        func field() -> Slice<UnsafeBufferPointer<UInt8>>? {
            while at < line.count && (line[at] == 0x20 || line[at] == 0x0A) { at += 1 }
            let start = at
            while at < line.count && line[at] != 0x20 && line[at] != 0x0A { at += 1 }
            return at > start ? line[start..<at] : nil
        }
        guard let first = field() else { return nil }
        guard let number = Int(decimal: first), number >= 0 else { return SystemCall(number: -1, arguments: []) }
        var arguments: [UInt64] = []
        arguments.reserveCapacity(6)
        while arguments.count < 6, let next = field() {
            guard next.count > 2, next[next.startIndex] == 0x30, next[next.startIndex + 1] == 0x78,
                  let value = UInt64(hexadecimal: next.dropFirst(2)) else { return nil }
            arguments.append(value)
        }
        return arguments.count == 6 ? SystemCall(number: number, arguments: arguments) : nil
    }

    /// Whether a thread exists and is not a zombie (its `stat` state is neither `Z` nor `X`).
    static func isLive(pid: Int32, tid: Int32? = nil) -> Bool {
        let path = tid.map { "/proc/\(pid)/task/\($0)/stat" } ?? "/proc/\(pid)/stat"
        guard let stat = text(path, limit: 4096), let close = stat.lastIndex(of: ")") else { return false }
        let state = stat[stat.index(after: close)...].dropFirst().first
        return state != "Z" && state != "X"
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

    /// `count` bytes of a process's memory at `address`, or nil.
    static func memory(pid: Int32, address: UInt64, count: Int) -> [UInt8]? {
        guard count > 0 else { return [] }
        let fd = open("/proc/\(pid)/mem", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: count)
        let offset = off_t(Int64(bitPattern: address))
        let read = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, count, offset) }
        return read == count ? bytes : nil
    }

    /// What a descriptor refers to (`pipe:[123]`, `socket:[456]`, a path), or nil.
    static func descriptor(pid: Int32, fd: Int32) -> String? {
        link("/proc/\(pid)/fd/\(fd)")
    }

    /// The descriptors an epoll descriptor watches (the `tfd:` lines of its fdinfo).
    static func epollTargets(pid: Int32, fd: Int32) -> [Int32] {
        guard let info = text("/proc/\(pid)/fdinfo/\(fd)") else { return [] }
        return info.split(separator: "\n").compactMap { line in
            guard line.hasPrefix("tfd:") else { return nil }
            return line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap { Int32($0) }
        }
    }

    /// Which processes hold each pipe, FIFO and socket, of every process this user may look into.
    static func descriptorHolders() -> [String: [Int32]] {
        var holders: [String: [Int32]] = [:]
        for pid in allProcesses() {
            guard let directory = opendir("/proc/\(pid)/fd") else { continue }
            defer { closedir(directory) }
            while let entry = readdir(directory) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                guard name.first?.isNumber == true, let target = link("/proc/\(pid)/fd/\(name)") else { continue }
                guard target.hasPrefix("pipe:") || target.hasPrefix("socket:") || target.hasPrefix("/") else { continue }
                if holders[target]?.last != pid { holders[target, default: []].append(pid) }
            }
        }
        return holders
    }

    /// The thread ids of a process (`/proc/PID/task`).
    static func threads(of pid: Int32) -> [Int32] { numericEntries(of: "/proc/\(pid)/task") }

    static func allProcesses() -> [Int32] { numericEntries(of: "/proc") }

    private static func numericEntries(of path: String) -> [Int32] {
        guard let directory = opendir(path) else { return [] }
        defer { closedir(directory) }
        var pids: [Int32] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if let pid = Int32(name) { pids.append(pid) }
        }
        return pids
    }

    private static func link(_ path: String) -> String? {
        var buffer = [Int8](repeating: 0, count: 4096)
        let length = readlink(path, &buffer, buffer.count - 1)
        guard length > 0 else { return nil }
        return String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

private extension Int {
    /// A decimal number's ASCII digits, with an optional leading '-' (nil for anything else).
    init?(decimal digits: Slice<UnsafeBufferPointer<UInt8>>) {
        var rest = digits[...]
        let negative = rest.first == 0x2D
        if negative { rest = rest.dropFirst() }
        guard !rest.isEmpty, rest.count <= 18 else { return nil }
        var value = 0
        for byte in rest {
            guard byte >= 0x30 && byte <= 0x39 else { return nil }
            value = value * 10 + Int(byte - 0x30)
        }
        self = negative ? -value : value
    }
}

private extension UInt64 {
    /// A hexadecimal number's ASCII digits, lower or upper case (nil for anything else).
    init?(hexadecimal digits: Slice<UnsafeBufferPointer<UInt8>>) {
        guard !digits.isEmpty, digits.count <= 16 else { return nil }
        var value: UInt64 = 0
        for byte in digits {
            let digit: UInt8
            switch byte {
            case 0x30...0x39: digit = byte - 0x30
            case 0x61...0x66: digit = byte - 0x61 + 10
            case 0x41...0x46: digit = byte - 0x41 + 10
            default: return nil
            }
            value = value << 4 | UInt64(digit)
        }
        self = value
    }
}
