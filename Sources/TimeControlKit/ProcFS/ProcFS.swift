#if canImport(Glibc)
import Glibc
#endif

/// Every read of `/proc` in TimeControlKit, one file per concern: processes
/// and threads (`Processes.swift`), system calls and memory
/// (`SystemCalls.swift`), descriptors and sockets (`Descriptors.swift`), and
/// the scheduler's kept-open thread files (`ThreadFiles.swift`). Each read is
/// one system call on a file the kernel makes anew; only the thread files
/// stay open, because the scheduler reads them thousands of times a second.
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

    /// A symbolic link's target (a descriptor's, `/proc/self/exe`), or nil; `errno` says why.
    static func link(_ path: String) -> String? {
        var buffer = [Int8](repeating: 0, count: 4096)
        let length = readlink(path, &buffer, buffer.count - 1)
        guard length > 0 else { return nil }
        return String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The entries of a directory whose names are numbers (pids, thread ids, descriptors).
    static func numericEntries(of path: String) -> [Int32] {
        guard let directory = opendir(path) else { return [] }
        defer { closedir(directory) }
        var pids: [Int32] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if let pid = Int32(name) { pids.append(pid) }
        }
        return pids
    }
}
