#if canImport(Glibc)
import Glibc
#endif
import SystemPackage

/// A path `LD_PRELOAD` can carry for the shim. The dynamic loader splits
/// `LD_PRELOAD` at ':' and ' ', so a shim whose path holds either (a
/// checkout in `~/time ctl`, an install prefix with a space) cannot be named
/// there as it is. It is preloaded instead through a symbolic link to its
/// directory, made in a directory of the user's whose path holds neither:
/// the per-user cache (``ShimBuild/cacheDirectory(environment:)``), else the
/// session directory, else `/dev/shm/timectl-UID`.
///
/// A link to the directory, not a copy of the shim: what it leads to is the
/// shim as it is now, so a rebuilt shim is never shadowed by an old copy, and
/// what lives beside the shim (`timectl-static-loader`, which the shim and
/// timectl find beside the path in `LD_PRELOAD`) is reached through it too.
/// The link is named after the directory it leads to, lives in a directory
/// owned by the user that no one else may write (checked at every use), and
/// is replaced by a rename when it leads elsewhere: processes making it at
/// once agree, and no other user can make a process preload another file.
enum ShimLink {
    static let directoryName = "shim-links"

    /// Whether `LD_PRELOAD` would split `path`.
    static func splitsPreload(_ path: String) -> Bool {
        path.utf8.contains { $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: " ") }
    }

    /// `shim` itself when `LD_PRELOAD` can carry it, else the same file through a link (made now if needed).
    static func preloadablePath(for shim: String, environment: ProcessEnvironment.Lookup) throws(TimeControlError) -> String {
        guard splitsPreload(shim) else { return shim }
        let directory = FilePaths.parent(of: shim)
        let name = String(shim[shim.index(after: shim.lastIndex(of: "/") ?? shim.startIndex)...])
        if splitsPreload(name) {
            throw .shimUnusable(path: shim, problem: "LD_PRELOAD cannot name a file whose own name contains ':' or ' ' (rename it to libTimeShim.so)")
        }
        var problems: [String] = []
        for base in bases(environment: environment, problems: &problems) {
            do throws(TimeControlError) {
                return try link(to: directory, in: base) + "/" + name
            } catch {
                problems.append(error.description)
            }
        }
        throw .shimUnusable(path: shim, problem: "LD_PRELOAD cannot name a path that contains ':' or ' ', and no directory of yours without them could hold a link to it: \(problems.joined(separator: "; "))")
    }

    /// The directories of the user's that may hold the links, best first; why others were passed over goes to `problems`.
    private static func bases(environment: ProcessEnvironment.Lookup, problems: inout [String]) -> [String] {
        var bases: [String] = []
        do throws(TimeControlError) {
            bases.append(try ShimBuild.cacheDirectory(environment: environment))
        } catch {
            problems.append(error.description)
        }
        for sessions in [SessionDirectory(environment: environment), SessionDirectory(environment: { _ in nil })] {
            guard !bases.contains(sessions.path), !splitsPreload(sessions.path) else { continue }
            do throws(TimeControlError) {
                if let descriptor = try sessions.open(create: true) { try? descriptor.close() }
                bases.append(sessions.path)
            } catch {
                problems.append(error.description)
            }
        }
        return bases.filter { base in
            if splitsPreload(base) { problems.append("\(base) contains ':' or ' ' too") }
            return !splitsPreload(base)
        }
    }

    /// `BASE/shim-links/KEY`, a link to `target`, as it is or made anew.
    private static func link(to target: String, in base: String) throws(TimeControlError) -> String {
        let links = base + "/" + directoryName
        if mkdir(links, 0o700) != 0 && errno != EEXIST {
            throw .system(call: "mkdir", path: links, errno: Errno(rawValue: errno))
        }
        var info = stat()
        guard lstat(links, &info) == 0 else { throw .system(call: "lstat", path: links, errno: Errno(rawValue: errno)) }
        guard info.st_mode & S_IFMT == S_IFDIR, info.st_uid == geteuid(), info.st_mode & 0o022 == 0 else {
            throw .shimUnusable(path: links, problem: "not a directory of yours that only you can write to")
        }
        var key = FNV1a()
        key.mix(target.utf8)
        let link = links + "/" + key.hex
        if currentTarget(of: link) == target { return link }
        // A name of its own per call (threads of one process may make it at once), renamed over the link in one step.
        let temporary = link + ".\(getpid()).\(UInt32.random(in: 0...UInt32.max)).tmp"
        guard symlink(target, temporary) == 0 else {
            throw .system(call: "symlink", path: temporary, errno: Errno(rawValue: errno))
        }
        guard rename(temporary, link) == 0 else {
            let error = errno
            unlink(temporary)
            throw .system(call: "rename", path: link, errno: Errno(rawValue: error))
        }
        return link
    }

    private static func currentTarget(of link: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink(link, &buffer, buffer.count - 1)
        guard length > 0 else { return nil }
        return String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// FNV-1a, 64-bit: a short, stable name for some bytes (not a defence against anyone).
struct FNV1a {
    private(set) var hash: UInt64 = 0xcbf2_9ce4_8422_2325

    /// Mixes `bytes` in, then a separator, so that ("ab", "c") and ("a", "bc") differ.
    mutating func mix<Bytes: Sequence<UInt8>>(_ bytes: Bytes) {
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        hash ^= 0xff
        hash = hash &* 0x0000_0100_0000_01b3
    }

    /// The hash as 16 hexadecimal digits.
    var hex: String {
        let digits = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}
