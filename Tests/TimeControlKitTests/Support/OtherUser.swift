import Foundation
import Testing
@testable import TimeControlKit

/// What a test needs to act as another user — nobody, uid and gid 65534,
/// an ordinary user with nothing of root's — wherever the checkout and the
/// temporary directory are: the checkout's build folder, the fixtures and
/// `$TMPDIR` may sit under a directory only their owner can enter (root's
/// home, anything `mktemp -d` made), and nobody cannot reach them there.
///
/// So the programs that user runs are copied into a directory of their own,
/// made by root (mode 0711, its files 0755: nobody may run them, not change
/// them) inside the first of `$TMPDIR`, /tmp, /var/tmp and /dev/shm that
/// every user can enter; nobody's own directories (its home, sessions) are
/// made inside it, then given to it. The directory is removed at the end.
final class OtherUser: @unchecked Sendable {
    static let uid: uid_t = 65534

    /// Why no test can act as another user here; nil when one can.
    static let unavailable: String? = geteuid() == 0 ? nil : "needs root to act as another user (CI runs as root)"

    /// The directory everything of this test lives in.
    let directory: String
    /// timectl, with the shim and the static loader beside it.
    let timectl: String
    /// A home directory (and `XDG_CACHE_HOME`, `TMPDIR`) of nobody's own.
    let home: String

    init() throws {
        try #require(Self.unavailable == nil, "\(Self.unavailable ?? "")")
        let base = try #require(Self.reachableBase, "no temporary directory that every user can enter: \(Self.candidates)")
        directory = try makeScratchDirectory("timectl-other-user", in: base)
        try #require(chmod(directory, 0o711) == 0, "chmod \(directory): errno \(errno)")
        try FileManager.default.createDirectory(atPath: directory + "/bin", withIntermediateDirectories: false,
                                                attributes: [.posixPermissions: 0o755])
        timectl = directory + "/bin/timectl"
        home = directory + "/home"
        for file in [Build.timectl, Build.builtShim, Build.binDirectory + "/" + ShimEnvironment.staticLoaderName] {
            _ = try copy(file)
        }
        _ = try ownDirectory("home")
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    static let candidates = [FileManager.default.temporaryDirectory.path, "/tmp", "/var/tmp", "/dev/shm"]

    /// The first candidate that every user can enter, with every directory on the way.
    static let reachableBase: String? = candidates.first { candidate in
        var path = ""
        for component in [""] + candidate.split(separator: "/").map(String.init) {
            path += component.isEmpty ? "/" : (path.hasSuffix("/") ? "" : "/") + component
            var info = stat()
            guard stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, info.st_mode & 0o001 != 0 else { return false }
        }
        return true
    }

    /// A copy of the program (or file) at `path` in this directory's `bin`, which nobody may run; its path.
    func copy(_ path: String) throws -> String {
        let target = directory + "/bin/" + (path as NSString).lastPathComponent
        try FileManager.default.copyItem(atPath: path, toPath: target)
        try #require(chmod(target, 0o755) == 0, "chmod \(target): errno \(errno)")
        return target
    }

    /// A new directory `NAME` here, mode 0700, owned by root: nobody can reach it but not enter it.
    func rootDirectory(_ name: String) throws -> String {
        let path = directory + "/" + name
        try #require(mkdir(path, 0o700) == 0, "mkdir \(path): errno \(errno)")
        return path
    }

    /// A new directory `NAME` here, mode 0700, given to nobody.
    func ownDirectory(_ name: String) throws -> String {
        let path = try rootDirectory(name)
        try #require(chown(path, Self.uid, Self.uid) == 0, "chown \(path): errno \(errno)")
        return path
    }

    /// `base` (a sandbox's environment, say) as nobody's: its home, cache and temporary directory its own.
    func environment(_ base: [String: String]) -> [String: String] {
        base.merging(["HOME": home, "XDG_CACHE_HOME": home, "TMPDIR": home]) { $1 }
    }

    /// Runs `executable` as nobody (user and group 65534, no supplementary groups), in ``environment(_:)``.
    func run(_ executable: String, _ arguments: [String], environment base: [String: String]) throws -> ProcessResult {
        try runProgram("/usr/bin/setpriv", ["--reuid=\(Self.uid)", "--regid=\(Self.uid)", "--clear-groups", "--", executable] + arguments,
                       environment: environment(base))
    }
}
