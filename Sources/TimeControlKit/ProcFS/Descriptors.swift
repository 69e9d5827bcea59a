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

    /// Which of `pids` (those this user may look into) hold each pipe, FIFO and socket.
    static func descriptorHolders(of pids: [Int32]) -> [String: [Int32]] {
        var holders: [String: [Int32]] = [:]
        for pid in pids {
            for target in descriptorTargets(of: pid) where holders[target]?.last != pid { holders[target, default: []].append(pid) }
        }
        return holders
    }

    /// The pipes, FIFOs (and other files by path) and sockets a process holds, once each in the order of its descriptors.
    static func descriptorTargets(of pid: Int32) -> [String] {
        if pid == getpid() { return ownDescriptorTargets() }
        guard let directory = opendir("/proc/\(pid)/fd") else { return [] }
        defer { closedir(directory) }
        var targets: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard name.first?.isNumber == true, let target = link("/proc/\(pid)/fd/\(name)") else { continue }
            guard target.hasPrefix("pipe:") || target.hasPrefix("socket:") || target.hasPrefix("/") else { continue }
            if targets.last != target { targets.append(target) }
        }
        return targets
    }

    /// `/proc/net/NAME` (`tcp`, `tcp6`, `udp`, `udp6`): the sockets of this network namespace, one a line.
    static func socketTable(_ name: String) -> String? { text("/proc/net/\(name)") }

    /// The same for this process, from `fstat` of each descriptor: a scheduler keeps a few files open for each
    /// thread it watches, and reading each one's link would cost more than the rest of a scan. Only pipes,
    /// FIFOs and sockets are named (a FIFO by its path, as its link would).
    private static func ownDescriptorTargets() -> [String] {
        guard let directory = opendir("/proc/self/fd") else { return [] }
        defer { closedir(directory) }
        let listing = dirfd(directory)
        var targets: [String] = []
        var status = stat()
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard let fd = Int32(name), fd != listing, fstat(fd, &status) == 0 else { continue }
            let target: String
            switch status.st_mode & S_IFMT {
            case S_IFSOCK: target = "socket:[\(status.st_ino)]"
            case S_IFIFO:
                guard let linked = link("/proc/self/fd/\(fd)") else { continue }
                target = linked
            default: continue
            }
            if targets.last != target { targets.append(target) }
        }
        return targets
    }
}
