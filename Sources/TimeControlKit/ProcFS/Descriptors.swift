#if canImport(Glibc)
import Glibc
#endif

extension ProcFS {
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

    /// `/proc/net/NAME` (`tcp`, `tcp6`, `udp`, `udp6`): the sockets of this network namespace, one a line.
    static func socketTable(_ name: String) -> String? { text("/proc/net/\(name)") }
}
