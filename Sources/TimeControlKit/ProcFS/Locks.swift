#if canImport(Glibc)
import Glibc
#endif

extension ProcFS {
    /// A lock the kernel has granted on a file (a line of `/proc/locks` that is not a waiter's `->`).
    struct FileLock: Equatable {
        /// `POSIX` (`fcntl` F_SETLK, `lockf`: held by a process), `FLOCK` (`flock`) or `OFDLCK` (`fcntl`
        /// F_OFD_SETLK): the last two belong to an open file, which every process sharing it holds.
        var kind: String
        /// The process that took it (−1 for an open file's lock: nobody in particular).
        var pid: Int32
    }

    /// The device and inode of the file that descriptor `fd` of `pid` refers to, or nil.
    static func fileIdentity(pid: Int32, fd: Int32) -> (device: UInt64, inode: UInt64)? {
        var info = stat()
        guard stat("/proc/\(pid)/fd/\(fd)", &info) == 0 else { return nil }
        return (UInt64(info.st_dev), UInt64(info.st_ino))
    }

    /// The locks granted on the file at `device`, `inode` (`/proc/locks`: "1: FLOCK  ADVISORY  WRITE 1234 fe:00:5678 0 EOF",
    /// the device as hexadecimal major:minor).
    static func locks(device: UInt64, inode: UInt64) -> [FileLock] {
        let major = (device >> 8) & 0xfff | (device >> 32) & ~0xfff, minor = device & 0xff | (device >> 12) & ~0xff
        let file = String(major, radix: 16).leftPadded(to: 2) + ":" + String(minor, radix: 16).leftPadded(to: 2) + ":\(inode)"
        guard let text = text("/proc/locks") else { return [] }
        return text.split(separator: "\n").compactMap { line -> FileLock? in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 6, fields[1] != "->", fields[5] == file, let pid = Int32(fields[4]) else { return nil }
            return FileLock(kind: String(fields[1]), pid: pid)
        }
    }

    /// The processes among `pids` with a descriptor on the file at `device`, `inode` through which they hold a lock
    /// (their `fdinfo` lists it): the holders of a lock that belongs to an open file.
    static func lockHolders(device: UInt64, inode: UInt64, among pids: [Int32]) -> [Int32] {
        pids.filter { pid in
            numericEntries(of: "/proc/\(pid)/fd").contains { fd in
                guard let identity = fileIdentity(pid: pid, fd: fd), identity == (device, inode) else { return false }
                return text("/proc/\(pid)/fdinfo/\(fd)", limit: 65536)?.split(separator: "\n").contains { $0.hasPrefix("lock:") } == true
            }
        }
    }
}

private extension String {
    func leftPadded(to width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}
