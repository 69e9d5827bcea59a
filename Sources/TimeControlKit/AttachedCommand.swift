#if canImport(Glibc)
import Glibc
#endif
import SystemPackage

/// Runs a command attached to a session, the way `timectl run` does:
/// refuses programs a preload shim cannot control, passes signals on, and
/// reports the child's exit status (128+N when killed by signal N).
public struct AttachedCommand: Sendable {
    public let arguments: [String]
    public let attachment: Attachment

    public init(arguments: [String], attachment: Attachment) {
        self.arguments = arguments
        self.attachment = attachment
    }

    /// Signals passed on to the child when another process sends them to
    /// timectl. Terminal-generated ones (Ctrl-C) already reach the child,
    /// which shares timectl's process group, so those are not sent twice.
    static let forwardedSignals: [Int32] = [SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, SIGWINCH]

    /// Starts the command, waits for it, and returns the status to exit with.
    public func run(environment: [String] = ProcessEnvironment.entries) throws(TimeControlError) -> Int32 {
        guard let command = arguments.first else { throw .commandNotFound("") }
        let childEnvironment = attachment.environmentEntries(inheriting: environment)
        let executable = try Self.resolve(command, path: Self.searchPath(in: childEnvironment))
        try Self.checkControllable(executable, as: command)

        var waited = sigset_t()
        sigemptyset(&waited)
        for signal in Self.forwardedSignals + [SIGCHLD] { sigaddset(&waited, signal) }
        var saved = sigset_t()
        pthread_sigmask(SIG_BLOCK, &waited, &saved)
        defer { pthread_sigmask(SIG_SETMASK, &saved, nil) }

        let child = try Self.spawn(executable, arguments: arguments, environment: childEnvironment)
        while true {
            var info = siginfo_t()
            let signal = sigwaitinfo(&waited, &info)
            if signal < 0 { continue }  // EINTR
            if signal == SIGCHLD {
                var status: Int32 = 0
                if waitpid(child, &status, WNOHANG) == child { return Self.exitStatus(status) }
                continue
            }
            if info.si_code != SI_KERNEL { kill(child, signal) }
        }
    }

    /// The shell's convention: the exit code, or 128+N for a child killed by signal N.
    static func exitStatus(_ status: Int32) -> Int32 {
        let signal = status & 0x7F
        return signal == 0 ? (status >> 8) & 0xFF : 128 + signal
    }

    static func searchPath(in entries: [String]) -> String {
        entries.last { $0.hasPrefix("PATH=") }.map { String($0.dropFirst(5)) } ?? "/usr/local/bin:/usr/bin:/bin"
    }

    /// The executable `execvp` would run for `command`.
    static func resolve(_ command: String, path: String) throws(TimeControlError) -> String {
        if command.contains("/") {
            guard access(command, F_OK) == 0 else { throw .commandNotFound(command) }
            return command
        }
        var sawNonExecutable: String?
        for directory in path.split(separator: ":", omittingEmptySubsequences: false) {
            let candidate = (directory.isEmpty ? "." : String(directory)) + "/" + command
            var info = stat()
            guard stat(candidate, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { continue }
            if access(candidate, X_OK) == 0 { return candidate }
            sawNonExecutable = sawNonExecutable ?? candidate
        }
        if let sawNonExecutable { throw .commandNotExecutable(path: sawNonExecutable, errno: .permissionDenied) }
        throw .commandNotFound(command)
    }

    /// Refuses what an LD_PRELOAD shim cannot control (SPEC §4), following
    /// `#!` lines to the interpreter that would actually run.
    static func checkControllable(_ executable: String, as command: String, depth: Int = 0) throws(TimeControlError) {
        var info = stat()
        guard stat(executable, &info) == 0 else {
            throw .commandNotExecutable(path: executable, errno: Errno(rawValue: errno))
        }
        if (info.st_mode & S_ISUID != 0 && info.st_uid != geteuid())
            || (info.st_mode & S_ISGID != 0 && info.st_gid != getegid()) {
            throw .cannotControl(command: command, reason: "\(executable) is setuid/setgid, and the kernel drops LD_PRELOAD for such programs")
        }
        let elf = try ELFFile(path: executable)
        switch elf.kind {
        case .script(let interpreter):
            guard depth < 4 else { return }
            try checkControllable(interpreter, as: command, depth: depth + 1)
        case .elf32:
            throw .cannotControl(command: command, reason: "\(executable) is a 32-bit program and the shim is 64-bit")
        case .elf64:
            if elf.interpreter == nil {
                throw .cannotControl(command: command, reason: "\(executable) is statically linked, so LD_PRELOAD cannot load the shim into it")
            }
            if elf.isGo {
                throw .cannotControl(command: command, reason: "\(executable) is a Go program, and Go reads clocks without libc where the shim cannot see it")
            }
        case .other:
            return  // Not ELF and no #!: execve decides (ENOEXEC).
        }
    }

    /// Starts the child with an empty signal mask. The mask timectl was started
    /// with is not passed on: a launcher running on a libdispatch or Swift
    /// concurrency thread (a Swift test, Foundation's Process) blocks nearly
    /// every signal, and a child inheriting that could never receive the
    /// signals timectl forwards. Signal dispositions (`nohup`'s ignores) are inherited.
    static func spawn(_ executable: String, arguments: [String], environment: [String]) throws(TimeControlError) -> pid_t {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var mask = sigset_t()
        sigemptyset(&mask)
        posix_spawnattr_setsigmask(&attributes, &mask)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK))

        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, nil, &attributes, argv, envp)
        guard result == 0 else {
            if result == ENOENT { throw .commandNotFound(executable) }
            throw .commandNotExecutable(path: executable, errno: Errno(rawValue: result))
        }
        return pid
    }
}
