#if canImport(Glibc)
import Glibc
#endif
import TimeShimC

extension ProcFS {
    /// The system call a thread is blocked in: `number` −1 while it runs.
    struct SystemCall {
        var number: Int
        var arguments: [UInt64]
    }

    /// `/proc/PID/task/TID/syscall`; nil when the kernel will not say (another user's process) or it is gone.
    static func systemCall(pid: Int32, tid: Int32) -> SystemCall? {
        let fd = openSystemCall(pid: pid, tid: tid)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        return systemCall(reading: fd)
    }

    /// That file opened, to be read again and again with ``systemCall(reading:)``; -1 when it cannot be.
    static func openSystemCall(pid: Int32, tid: Int32) -> Int32 {
        open("/proc/\(pid)/task/\(tid)/syscall", O_RDONLY | O_CLOEXEC)
    }

    /// The same from a descriptor of that file kept open (the kernel makes it anew at each read from offset 0).
    /// Parsed from the bytes as they come: the scheduler reads it at most of its steps.
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
