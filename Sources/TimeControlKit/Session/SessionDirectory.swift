#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SystemPackage
import TimeShimC

/// The per-user directory that holds session segments (SPEC §4):
/// `$TIMECTL_DIR` if set, else `$XDG_RUNTIME_DIR/timectl`, else
/// `/dev/shm/timectl-UID`. It is created with mode 0700 and refused if it is
/// a symbolic link, belongs to someone else or is open to other users.
public struct SessionDirectory: Sendable, Hashable {
    /// The directory's path.
    public let path: String

    /// A session directory at `path` (it is created, mode 0700, when a session is).
    public init(path: String) {
        self.path = path
    }

    /// The directory the environment selects.
    public init(environment: ProcessEnvironment.Lookup = ProcessEnvironment.value) {
        // The rule is the core's (timectl_session_directory.h): the shim finds this directory by it too.
        let explicit = environment("TIMECTL_DIR"), runtime = environment("XDG_RUNTIME_DIR")
        let capacity = 3 + (explicit?.utf8.count ?? 0) + (runtime?.utf8.count ?? 0) + 32
        path = String(unsafeUninitializedCapacity: capacity) { buffer in
            buffer.withMemoryRebound(to: CChar.self) { characters in
                tc_session_directory(explicit, runtime, geteuid(), characters.baseAddress, capacity)
            }
        }
    }

    /// The segment file of session `name`.
    public func segmentPath(for name: String) -> String {
        path + "/" + Self.fileName(for: name)
    }

    static func fileName(for name: String) -> String { name + ".seg" }

    /// Checks a session name: 1–63 characters from `A-Za-z0-9._-`, not starting with `.` or `-`.
    public static func validate(name: String) throws(TimeControlError) {
        let allowed = name.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == 0x2E || byte == 0x5F || byte == 0x2D
        }
        guard allowed, (1..<Int(TC_SESSION_NAME_MAX)).contains(name.utf8.count),
              let first = name.first, first != ".", first != "-"
        else { throw .invalidSessionName(name) }
    }

    /// Opens the directory, creating it (mode 0700) when `create` is set, and
    /// checks that it is private to this user.
    func open(create: Bool) throws(TimeControlError) -> FileDescriptor? {
        let flags: Int32 = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
        var fd = Glibc.open(path, flags)
        if fd < 0 && errno == ENOENT {
            guard create else { return nil }
            if mkdir(path, 0o700) != 0 && errno != EEXIST {
                // Only the last component is created: a TIMECTL_DIR whose parent is missing is a mistake to name.
                if errno == ENOENT {
                    throw .sessionDirectoryParentMissing(path: path)
                }
                throw .system(call: "mkdir", path: path, errno: Errno(rawValue: errno))
            }
            fd = Glibc.open(path, flags)
        }
        if fd < 0 {
            let error = errno
            if error == ELOOP { throw .unsafeSessionDirectory(path: path, problem: "is a symbolic link") }
            if error == ENOTDIR { throw .unsafeSessionDirectory(path: path, problem: "is not a directory") }
            // Another user created it first (a fixed name in a shared /dev/shm): say so, not just EACCES.
            var info = stat()
            if error == EACCES && lstat(path, &info) == 0 && info.st_uid != geteuid() {
                throw .unsafeSessionDirectory(path: path, problem: "belongs to uid \(info.st_uid), another user")
            }
            throw .system(call: "open", path: path, errno: Errno(rawValue: error))
        }
        let descriptor = FileDescriptor(rawValue: fd)
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let error = errno
            try? descriptor.close()
            throw .system(call: "fstat", path: path, errno: Errno(rawValue: error))
        }
        if info.st_uid != geteuid() {
            try? descriptor.close()
            throw .unsafeSessionDirectory(path: path, problem: "belongs to uid \(info.st_uid), another user")
        }
        if info.st_mode & 0o077 != 0 {
            try? descriptor.close()
            throw .unsafeSessionDirectory(path: path, problem: "is accessible to other users (mode \(String(info.st_mode & 0o777, radix: 8)))")
        }
        return descriptor
    }

    /// The names of the sessions in the directory, sorted.
    public func sessionNames() throws(TimeControlError) -> [String] {
        guard let descriptor = try open(create: false) else { return [] }
        defer { try? descriptor.close() }
        guard let stream = fdopendir(dup(descriptor.rawValue)) else {
            throw .system(call: "opendir", path: path, errno: Errno(rawValue: errno))
        }
        defer { closedir(stream) }
        var names: [String] = []
        while let entry = readdir(stream) {
            let fileName = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard fileName.hasSuffix(".seg") else { continue }
            let name = String(fileName.dropLast(4))
            if (try? Self.validate(name: name)) != nil { names.append(name) }
        }
        return names.sorted()
    }
}

/// The process environment.
public enum ProcessEnvironment {
    /// Looks up one variable; tests substitute their own.
    public typealias Lookup = @Sendable (String) -> String?

    /// The variable's value in this process (getenv).
    @Sendable public static func value(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }

    /// `environ`, in order, as `KEY=VALUE` strings.
    public static var entries: [String] {
        var result: [String] = []
        var cursor = environ
        while let entry = cursor.pointee {
            result.append(String(cString: entry))
            cursor += 1
        }
        return result
    }
}

/// The names in a directory, "." and ".." left out; none if it cannot be read.
func directoryEntries(of path: String) -> [String] {
    guard let directory = opendir(path) else { return [] }
    defer { closedir(directory) }
    var names: [String] = []
    while let entry = readdir(directory) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        if name != "." && name != ".." { names.append(name) }
    }
    return names
}

/// Removes a directory that holds only files (a recording's or a test case's scratch directory), and them.
func removeFlatDirectory(_ path: String) {
    for name in directoryEntries(of: path) { unlink(path + "/" + name) }
    rmdir(path)
}

/// A new private directory for scratch files (`timectl-PURPOSE-XXXXXX` under `$TMPDIR`, else /tmp), removed
/// with its files by ``remove()``.
public struct ScratchDirectory: Sendable {
    public let path: String

    public init(purpose: String) throws(TimeControlError) {
        let base = ProcessEnvironment.value("TMPDIR").flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array((base + "/timectl-\(purpose)-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else {
            throw .system(call: "mkdtemp", path: base, errno: .init(rawValue: errno))
        }
        path = String(cString: made)
    }

    /// Removes the directory and the files in it.
    public func remove() { removeFlatDirectory(path) }
}
