#if canImport(Glibc)
import Glibc
#endif
import SystemPackage
import TimeShimC

/// The environment that attaches a process to a session: `libTimeShim.so`
/// first in `LD_PRELOAD`, and `TIMECTL_SEGMENT` naming the session's segment
/// (or, for `timectl faketime`, libfaketime's variables instead of a session).
public struct ShimEnvironment: Sendable, Hashable {
    /// Absolute path of the preload shim.
    public let shimPath: String
    /// Absolute path of the session segment ("" for libfaketime's variables: ``init(faketime:shimPath:)``).
    public let segmentPath: String

    /// The absolute path of the segment of a temporary session: if the
    /// process that runs a command on it is killed, the run's guardian
    /// removes the segment, as ending the session would have (nil for a named session).
    let privateSegment: String?

    /// libfaketime's variables (`NAME=VALUE`) that put the process tree on a clock of
    /// their own instead of a session (`timectl faketime`); nil for a session's environment.
    let faketimeEntries: [String]?
    /// False for a program let run on real time for want of a build of the shim it can load: it is given none.
    private(set) var preloadsShim = true

    /// An environment with an explicit shim and segment.
    ///
    /// A `shimPath` that `LD_PRELOAD` cannot carry (it holds ':' or ' ')
    /// is used through a link to it where one can be made (``ShimEnvironment/locateShim(environment:)``).
    public init(shimPath: String, segmentPath: String) {
        self.shimPath = (try? ShimLink.preloadablePath(for: shimPath, environment: ProcessEnvironment.value)) ?? shimPath
        self.segmentPath = segmentPath
        privateSegment = nil
        faketimeEntries = nil
    }

    private init(shimPath: String, segmentPath: String, privateSegment: String?, faketimeEntries: [String]?) {
        self.shimPath = shimPath
        self.segmentPath = segmentPath
        self.privateSegment = privateSegment
        self.faketimeEntries = faketimeEntries
    }

    /// Attaches to `session` with the shim found by ``locateShim(environment:)``.
    public init(session: TimeSession, environment: ProcessEnvironment.Lookup = ProcessEnvironment.value) throws(TimeControlError) {
        shimPath = try Self.locateShim(environment: environment)
        segmentPath = session.segmentPath
        let path = session.segmentPath
        privateSegment = !session.isTemporary ? nil : path.hasPrefix("/") ? path : FilePaths.currentDirectory() + "/" + path
        faketimeEntries = nil
    }

    /// Puts a command on libfaketime's `entries` (`FAKETIME=…` and the like), with no session: the
    /// shim at `shimPath` (``locateShim(environment:)`` finds it) honours them (SPEC §13). The
    /// command's process tree starts a clock of its own, even inside another one.
    public init(faketime entries: [String], shimPath: String) {
        self.shimPath = shimPath
        segmentPath = ""
        privateSegment = nil
        faketimeEntries = entries
    }

    /// The variables to set in an attached process, given its inherited `LD_PRELOAD`:
    /// the shim goes first, other preloads are kept, other copies of the shim dropped.
    ///
    /// `sanitizerRuntime` (a sanitizer runtime the program needs, such as
    /// `libasan.so.8`: see ``runtimeToPreload(forExecutable:)``) goes before
    /// the shim: ASan refuses to start unless its runtime comes first, and the
    /// runtime's interceptors then call the shim's functions as the real ones.
    /// The shim does the same at every exec of an attached process.
    public func variables(inheritedPreload: String?, sanitizerRuntime: String? = nil) -> [(name: String, value: String)] {
        let others = (inheritedPreload ?? "")
            .split(whereSeparator: { $0 == ":" || $0 == " " })
            .filter { !Self.namesShim($0) && $0 != sanitizerRuntime ?? "" }
        // Joined by hand: joined(separator:) is not specialised here, and its first call looks its types up at run time.
        var preload = sanitizerRuntime ?? ""
        if preloadsShim { preload += preload.isEmpty ? shimPath : ":" + shimPath }
        for other in others {
            if !preload.isEmpty { preload += ":" }
            preload.append(contentsOf: other)
        }
        if let faketimeEntries {
            return [("LD_PRELOAD", preload)] + faketimeEntries.map { entry in
                let parts = entry.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                return (String(parts[0]), parts.count > 1 ? String(parts[1]) : "")
            }
        }
        return [
            ("LD_PRELOAD", preload),
            ("TIMECTL_SEGMENT", segmentPath),
        ]
    }

    /// Whether an `LD_PRELOAD` entry names a build of the shim (for glibc or musl).
    static func namesShim(_ entry: Substring) -> Bool {
        [shimFileName, muslShimFileName].contains { entry == $0 || entry.hasSuffix("/" + $0) }
    }

    static let shimFileName = TC_SHIM_FILE_NAME
    static let muslShimFileName = TC_SHIM_MUSL_FILE_NAME

    /// Where the build of the shim for musl programs is: beside the glibc build.
    public var muslShimPath: String { FilePaths.parent(of: shimPath) + "/" + Self.muslShimFileName }

    /// The environment that attaches `program` (SPEC §12): a program that
    /// musl's dynamic loader starts (`PT_INTERP` `ld-musl-*`) is preloaded
    /// the musl build of the shim, from beside the glibc build, which its
    /// loader cannot load; every other program (static ones run through
    /// the loader, a glibc program) keeps this one. Without a musl build,
    /// such a program is refused, or, with `allowingUncontrolled`, run on
    /// real time with a warning and no shim. The shim makes the same choice
    /// at every exec of an attached process.
    func fitted(to program: Program, as command: String, allowingUncontrolled: Bool = false) throws(TimeControlError) -> ShimEnvironment {
        guard program.isMusl, !program.runsThroughLoader else { return self }
        let musl = muslShimPath
        guard access(musl, R_OK) == 0 else {
            let reason = "\(program.decidedOn) is linked with musl (its loader is \(program.interpreter)), and no build of the shim for musl is beside \(shimPath) (\(Self.muslShimFileName): scripts/build.sh builds it with musl-gcc, from musl-tools)"
            guard allowingUncontrolled else {
                throw .cannotControl(command: command, reason: reason + "; it would run on real time (--allow-uncontrolled runs it so, with a warning)")
            }
            let line = "timectl: warning: \(command) runs on real time: \(reason)\n"
            _ = line.withCString { write(2, $0, strlen($0)) }
            var uncontrolled = self
            uncontrolled.preloadsShim = false
            return uncontrolled
        }
        try Self.verifyShim(musl)
        return ShimEnvironment(shimPath: musl, segmentPath: segmentPath, privateSegment: privateSegment,
                               faketimeEntries: faketimeEntries)
    }

    /// The sanitizer runtime (ASan, TSan, UBSan…) that `executable` is
    /// linked with, which must be preloaded before the shim; nil for others.
    public static func runtimeToPreload(forExecutable executable: String) -> String? {
        Program(path: executable).sanitizerRuntime
    }

    /// An environment (`KEY=VALUE` entries) with the attachment applied; other entries keep their order.
    public func environmentEntries(inheriting entries: [String] = ProcessEnvironment.entries,
                                   sanitizerRuntime: String? = nil) -> [String] {
        let inheritedPreload = entries.last { $0.hasPrefix("LD_PRELOAD=") }.map { String($0.dropFirst(11)) }
        let overrides = variables(inheritedPreload: inheritedPreload, sanitizerRuntime: sanitizerRuntime)
        // A session would win over libfaketime's variables, and a tree's clock be joined: a faketime run inherits neither.
        let dropped = faketimeEntries == nil ? [] : ["TIMECTL_SEGMENT=", TC_FAKETIME_SEGMENT_VARIABLE + "="]
        var result = entries.filter { entry in
            !overrides.contains { entry.hasPrefix($0.name + "=") } && !dropped.contains { entry.hasPrefix($0) }
        }
        result += overrides.map { "\($0.name)=\($0.value)" }
        return result
    }

    // MARK: Finding the shim

    /// Finds `libTimeShim.so`: `$TIMECTL_SHIM` if set, else next to the
    /// running executable (this repository's builds), else in `../lib` or
    /// `../lib/timectl` relative to it (an installed timectl, the Debian
    /// package), else the copy built from the shim's sources into the
    /// user's cache (a package that depends on TimeControlKit builds it on
    /// first use). The file must be a 64-bit shared library that needs
    /// nothing but libc, so a copy linked with the Swift runtime is never
    /// preloaded. A shim this user may not read, or whose directory it may
    /// not enter, is named as such (permission denied, and where), never
    /// taken for a missing one. The path returned is one `LD_PRELOAD` can
    /// carry: a shim whose path holds ':' or ' ' is reached through a
    /// symbolic link to its directory, made in `shim-links/` of the user's
    /// cache (else of the session directory).
    public static func locateShim(environment: ProcessEnvironment.Lookup = ProcessEnvironment.value) throws(TimeControlError) -> String {
        try ShimLink.preloadablePath(for: try findShim(environment: environment), environment: environment)
    }

    private static func findShim(environment: ProcessEnvironment.Lookup) throws(TimeControlError) -> String {
        if let explicit = environment("TIMECTL_SHIM"), !explicit.isEmpty {
            let absolute = explicit.hasPrefix("/") ? explicit : FilePaths.currentDirectory() + "/" + explicit
            guard access(absolute, R_OK) == 0 else {
                let problem = errno == EACCES ? permissionProblem(absolute) : "TIMECTL_SHIM names a file that does not exist"
                throw .shimUnusable(path: explicit, problem: problem)
            }
            try verifyShim(absolute)
            return absolute
        }
        let directory = FilePaths.executableDirectory()
        let prefix = FilePaths.parent(of: directory)
        let candidates = [directory + "/libTimeShim.so", prefix + "/lib/libTimeShim.so", prefix + "/lib/timectl/libTimeShim.so"]
        var denied: String?
        for candidate in candidates {
            guard access(candidate, R_OK) == 0 else {
                if errno == EACCES && denied == nil { denied = candidate }
                continue
            }
            try verifyShim(candidate)
            return candidate
        }
        // Where this user cannot look, the shim may well be there: that is what to say, not "build it".
        if let denied { throw .shimUnusable(path: denied, problem: permissionProblem(denied)) }
        if let built = try ShimBuild.shim(environment: environment) { return built }
        throw .shimNotFound(searched: candidates + ["$TIMECTL_SHIM"])
    }

    /// Why this user cannot read `path`, which `access` refused with EACCES:
    /// the first directory on the way that it may not enter, else the file.
    static func permissionProblem(_ path: String) -> String {
        func owner(_ path: String) -> String {
            var info = stat()
            guard stat(path, &info) == 0 else { return "" }
            let mode = String(info.st_mode & 0o7777, radix: 8)
            return " (owner uid \(info.st_uid), mode \(String(repeating: "0", count: max(0, 4 - mode.count)) + mode))"
        }
        let user = "uid \(getuid())"
        let remedy = "; let this user in, or set TIMECTL_SHIM to a copy it can read"
        var directory = ""
        for component in path.split(separator: "/").dropLast() {
            directory += "/" + component
            if access(directory, X_OK) != 0 && errno == EACCES {
                return "permission denied: \(user) cannot enter the directory \(directory)\(owner(directory))\(remedy)"
            }
        }
        return "permission denied: \(user) cannot read it\(owner(path))\(remedy)"
    }

    /// The loader that runs statically linked programs attached (`timectl-static-loader`):
    /// beside the shim, wherever the shim was found or built.
    public var staticLoaderPath: String { FilePaths.parent(of: shimPath) + "/" + Self.staticLoaderName }

    static let staticLoaderName = "timectl-static-loader"

    /// What to start for `program` at `executable` with `arguments` (its argv,
    /// name first): the program itself, or, for a statically linked one, which
    /// cannot load the shim, the loader with the program's path before its argv.
    func commandLine(for program: Program, executable: String, arguments: [String],
                     as command: String) throws(TimeControlError) -> (executable: String, arguments: [String]) {
        guard program.runsThroughLoader else { return (executable, arguments) }
        let loader = staticLoaderPath
        guard access(loader, X_OK) == 0 else {
            throw .cannotControl(command: command, reason: "\(executable) is statically linked and runs through \(loader), which is missing (scripts/build.sh builds it beside libTimeShim.so)")
        }
        return (loader, [loader, executable] + arguments)
    }

    static func verifyShim(_ path: String) throws(TimeControlError) {
        let library = Program(path: path)
        guard library.elfKind == TC_PROGRAM_STATIC || library.elfKind == TC_PROGRAM_CONTROLLABLE else {
            throw .shimUnusable(path: path, problem: "not a 64-bit ELF shared library of this machine")
        }
        // The musl build needs musl's libc.so, which is also its loader.
        let libc: Set<String> = path.hasSuffix("/" + muslShimFileName) ? ["libc.so"] : ["libc.so.6"]
        let extra = library.needed.filter { !(libc.contains($0) || $0.hasPrefix("ld-linux")) }
        if !extra.isEmpty {
            throw .shimUnusable(path: path, problem: "it needs \(extra.joined(separator: ", ")) besides libc (build it with scripts/build.sh, not SwiftPM)")
        }
    }
}

/// The old name of ``ShimEnvironment``.
@available(*, deprecated, renamed: "ShimEnvironment")
public typealias Attachment = ShimEnvironment
