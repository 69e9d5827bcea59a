#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization
import SystemPackage

/// Builds `libTimeShim.so` for a package that depends on TimeControlKit, so
/// that plain `swift test` needs no script: on first use, the shim's C
/// sources — still on disk beside this file (a path dependency, or SwiftPM's
/// checkout of a URL one) — are compiled with the C compiler alone, never
/// with SwiftPM, which would link the Swift runtime into every controlled
/// program. The compiler's arguments are `Sources/TimeShimC/shim-cc-arguments`,
/// the same file `scripts/build-shim.sh` reads. Beside it goes
/// `timectl-static-loader` (`loader-cc-arguments`), which runs statically
/// linked programs attached.
///
/// The result is cached per user, in `$XDG_CACHE_HOME/timectl` (else
/// `~/.cache/timectl`), under a name made from the sources, the arguments
/// and the compiler, so a changed source or compiler builds a new copy.
/// Several processes may ask at once: a lock file serialises the builds of
/// one version, and each copy appears under its final name only complete
/// (written to a temporary file and renamed).
enum ShimBuild {
    /// `Sources/TimeShimC` of the sources this library was compiled from.
    static let sourceDirectory: String = {
        let thisFile = #filePath  // Sources/TimeControlKit/Shim/ShimBuild.swift
        let kitDirectory = FilePaths.parent(of: FilePaths.parent(of: thisFile))
        return FilePaths.parent(of: kitDirectory) + "/TimeShimC"
    }()

    static let argumentsFileName = "shim-cc-arguments"
    static let loaderArgumentsFileName = "loader-cc-arguments"

    /// The shim this process built or found in the cache already.
    private static let built = Mutex<String?>(nil)

    /// The cached shim, built now if needed; nil when the sources are not on disk.
    static func shim(environment: ProcessEnvironment.Lookup) throws(TimeControlError) -> String? {
        let source = sourceDirectory
        guard access(source + "/" + argumentsFileName, R_OK) == 0 else { return nil }
        let result: Result<String, TimeControlError> = built.withLock { cached in
            if let cached, access(cached, R_OK) == 0 { return .success(cached) }
            do throws(TimeControlError) {
                let path = try buildIfNeeded(source: source, environment: environment)
                cached = path
                return .success(path)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    private static func buildIfNeeded(source: String, environment: ProcessEnvironment.Lookup) throws(TimeControlError) -> String {
        let arguments = try compilerArguments(source: source)
        let loaderArguments = try compilerArguments(source: source, file: loaderArgumentsFileName)
        let compiler = try findCompiler(source: source, environment: environment)
        let key = try cacheKey(source: source, compiler: compiler)
        let cache = try cacheDirectory(environment: environment)
        let directory = cache + "/shim-" + key
        let shim = directory + "/libTimeShim.so"
        let loader = directory + "/" + ShimEnvironment.staticLoaderName
        func complete() -> Bool {
            access(shim, R_OK) == 0 && (try? ShimEnvironment.verifyShim(shim)) != nil && access(loader, X_OK) == 0
        }
        if complete() { return shim }

        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            throw .system(call: "mkdir", path: directory, errno: Errno(rawValue: errno))
        }
        let lockPath = directory + "/.lock"
        let lock = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard lock >= 0 else { throw .system(call: "open", path: lockPath, errno: Errno(rawValue: errno)) }
        defer { close(lock) }
        while flock(lock, LOCK_EX) != 0 {
            guard errno == EINTR else { throw .system(call: "flock", path: lockPath, errno: Errno(rawValue: errno)) }
        }
        // Another process may have built it while this one waited for the lock.
        if complete() { return shim }

        let temporary = shim + ".tmp-\(getpid())"
        let log = directory + "/build.log"
        // The loader first: the shim's name appearing is what tells other processes the build is done.
        let temporaryLoader = loader + ".tmp-\(getpid())"
        try compile(compiler: compiler, arguments: loaderArguments + ["-o", temporaryLoader], in: source, log: log)
        guard rename(temporaryLoader, loader) == 0 else {
            let error = errno
            unlink(temporaryLoader)
            throw .system(call: "rename", path: loader, errno: Errno(rawValue: error))
        }
        try compile(compiler: compiler, arguments: arguments + ["-o", temporary], in: source, log: log)
        do throws(TimeControlError) {
            try ShimEnvironment.verifyShim(temporary)
        } catch {
            unlink(temporary)
            throw error
        }
        guard rename(temporary, shim) == 0 else {
            let error = errno
            unlink(temporary)
            throw .system(call: "rename", path: shim, errno: Errno(rawValue: error))
        }
        unlink(log)
        return shim
    }

    /// The arguments file's lines, with `DIR/*.c` expanded (sorted) and comments dropped.
    static func compilerArguments(source: String, file: String = argumentsFileName) throws(TimeControlError) -> [String] {
        let path = source + "/" + file
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw .shimBuildFailed(source: source, problem: "cannot read \(path)")
        }
        var arguments: [String] = []
        for rawLine in text.split(separator: "\n") {
            let line = String(rawLine.prefix { $0 != "#" }.filter { $0 != " " && $0 != "\t" && $0 != "\r" })
            guard !line.isEmpty else { continue }
            if line.hasSuffix("/*.c") {
                let directory = String(line.dropLast(4))
                let files = (try? FileManager.default.contentsOfDirectory(atPath: source + "/" + directory)) ?? []
                let sources = files.filter { $0.hasSuffix(".c") }.sorted()
                guard !sources.isEmpty else { throw .shimBuildFailed(source: source, problem: "no C files in \(source)/\(directory)") }
                arguments += sources.map { directory + "/" + $0 }
            } else {
                arguments.append(line)
            }
        }
        return arguments
    }

    struct Compiler {
        /// The executable, and any arguments `$CC` put before the compiler's own.
        var path: String
        var leadingArguments: [String]
    }

    /// `$CC` if set, else the first of `cc`, `gcc`, `clang` in `$PATH`.
    static func findCompiler(source: String, environment: ProcessEnvironment.Lookup) throws(TimeControlError) -> Compiler {
        let path = environment("PATH") ?? "/usr/local/bin:/usr/bin:/bin"
        if let explicit = environment("CC"), !explicit.isEmpty {
            let words = explicit.split(separator: " ").map(String.init)
            guard let resolved = try? Spawn.resolve(words[0], path: path) else {
                throw .shimBuildFailed(source: source, problem: "CC names '\(explicit)', which is not an executable in PATH")
            }
            return Compiler(path: resolved, leadingArguments: Array(words.dropFirst()))
        }
        for name in ["cc", "gcc", "clang"] {
            if let resolved = try? Spawn.resolve(name, path: path) { return Compiler(path: resolved, leadingArguments: []) }
        }
        throw .shimBuildFailed(source: source, problem: "no C compiler (cc, gcc or clang) in PATH; install one (Debian, Ubuntu: apt-get install gcc), or set CC or TIMECTL_SHIM")
    }

    /// FNV-1a over every file of the shim's sources (names and contents) and the
    /// compiler's identity. Not a defence against anyone: the cache is the user's own.
    static func cacheKey(source: String, compiler: Compiler) throws(TimeControlError) -> String {
        var hash = FNV1a()
        func mix<Bytes: Sequence<UInt8>>(_ bytes: Bytes) { hash.mix(bytes) }
        let files = filesBelow(source).filter {
            $0.hasSuffix(".c") || $0.hasSuffix(".h") || $0 == argumentsFileName || $0 == loaderArgumentsFileName
        }.sorted()
        for file in files {
            guard let contents = FileManager.default.contents(atPath: source + "/" + file) else {
                throw .shimBuildFailed(source: source, problem: "cannot read \(source)/\(file)")
            }
            mix(file.utf8)
            mix(contents)
        }
        var info = stat()
        if stat(compiler.path, &info) == 0 {
            mix("\(info.st_size) \(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec) \(info.st_ino)".utf8)
        }
        mix(([compiler.path] + compiler.leadingArguments).joined(separator: " ").utf8)
        var machine = utsname()
        uname(&machine)
        mix(withUnsafeBytes(of: machine.machine) { Array($0.prefix { $0 != 0 }) })
        return hash.hex
    }

    /// Paths of the regular files under `directory`, relative to it.
    static func filesBelow(_ directory: String, prefix: String = "") -> [String] {
        var result: [String] = []
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory + "/" + prefix)) ?? [] {
            let relative = prefix.isEmpty ? name : prefix + "/" + name
            var info = stat()
            guard lstat(directory + "/" + relative, &info) == 0 else { continue }
            if info.st_mode & S_IFMT == S_IFDIR {
                result += filesBelow(directory, prefix: relative)
            } else if info.st_mode & S_IFMT == S_IFREG {
                result.append(relative)
            }
        }
        return result
    }

    /// `$XDG_CACHE_HOME/timectl`, else `$HOME/.cache/timectl`; made private to this user.
    static func cacheDirectory(environment: ProcessEnvironment.Lookup) throws(TimeControlError) -> String {
        let base: String
        if let xdg = environment("XDG_CACHE_HOME"), xdg.hasPrefix("/") {
            base = xdg
        } else if let home = environment("HOME"), home.hasPrefix("/") {
            base = home + "/.cache"
        } else if let entry = getpwuid(geteuid()), let home = entry.pointee.pw_dir {
            base = String(cString: home) + "/.cache"
        } else {
            throw .shimBuildFailed(source: sourceDirectory, problem: "no cache directory for the built shim: set XDG_CACHE_HOME or HOME")
        }
        let directory = base + "/timectl"
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw .shimBuildFailed(source: sourceDirectory, problem: "cannot create the cache directory \(directory): \(error)")
        }
        var info = stat()
        guard lstat(directory, &info) == 0 else { throw .system(call: "lstat", path: directory, errno: Errno(rawValue: errno)) }
        if info.st_mode & S_IFMT != S_IFDIR || info.st_uid != geteuid() || info.st_mode & 0o022 != 0 {
            throw .shimBuildFailed(source: sourceDirectory,
                                   problem: "the cache directory \(directory) is not a directory of yours that only you can write to")
        }
        return directory
    }

    /// Runs the compiler in `directory`; on failure the error names its first complaint and keeps the whole log.
    static func compile(compiler: Compiler, arguments: [String], in directory: String, log: String) throws(TimeControlError) {
        let output = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard output >= 0 else { throw .system(call: "open", path: log, errno: Errno(rawValue: errno)) }
        // The compiler itself must not run attached to a session.
        let environment = ProcessEnvironment.entries.filter { !$0.hasPrefix("LD_PRELOAD=") && !$0.hasPrefix("TIMECTL_SEGMENT=") }
        let pid: pid_t
        do throws(TimeControlError) {
            pid = try Spawn.start(compiler.path, arguments: [compiler.path] + compiler.leadingArguments + arguments,
                                  options: .init(environment: environment, workingDirectory: directory,
                                                 standardOutput: output, standardError: output))
        } catch {
            close(output)
            throw error
        }
        close(output)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { throw .system(call: "waitpid", path: compiler.path, errno: Errno(rawValue: errno)) }
        }
        guard status == 0 else {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            let lines = text.split(separator: "\n")
            let first = lines.first { $0.contains("error") } ?? lines.first ?? "exit status \(Spawn.exitStatus(status))"
            unlink(arguments.last ?? "")
            throw .shimBuildFailed(source: directory, problem: "\(compiler.path) failed: \(first) (whole output in \(log))")
        }
    }
}
