#if canImport(Glibc)
import Glibc
#endif
import SystemPackage
import TimeShimC

/// Starting a child process: the one place timectl calls posix_spawn.
///
/// The child always starts with an empty signal mask: a launcher running on
/// a libdispatch or Swift concurrency thread (a Swift test, Foundation's
/// Process) has nearly every signal blocked, and a child inheriting that
/// could never receive the signals it is sent. Signal dispositions (such as
/// `nohup`'s ignores) are inherited.
enum Spawn {
    struct Options {
        var environment: [String]
        var workingDirectory: String? = nil
        /// Put the child in a process group of its own (so it can be killed with its descendants).
        var newProcessGroup = false
        /// Descriptors to make the child's 0, 1 and 2 (nil: inherit).
        var standardInput: Int32? = nil
        var standardOutput: Int32? = nil
        var standardError: Int32? = nil
        /// Descriptors the child must not inherit (the parent's ends of pipes).
        var closeInChild: [Int32] = []
    }

    static func start(_ executable: String, arguments: [String], options: Options) throws(TimeControlError) -> pid_t {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var mask = sigset_t()
        sigemptyset(&mask)
        posix_spawnattr_setsigmask(&attributes, &mask)
        var flags = Int32(POSIX_SPAWN_SETSIGMASK)
        if options.newProcessGroup {
            flags |= Int32(POSIX_SPAWN_SETPGROUP)
            posix_spawnattr_setpgroup(&attributes, 0)
        }
        posix_spawnattr_setflags(&attributes, Int16(flags))

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // One by one: an array of tuples would have its type made at run time, at every first spawn.
        if let source = options.standardInput { posix_spawn_file_actions_adddup2(&actions, source, 0) }
        if let source = options.standardOutput { posix_spawn_file_actions_adddup2(&actions, source, 1) }
        if let source = options.standardError { posix_spawn_file_actions_adddup2(&actions, source, 2) }
        for fd in options.closeInChild { posix_spawn_file_actions_addclose(&actions, fd) }
        if let directory = options.workingDirectory { tc_spawn_file_actions_addchdir(&actions, directory) }

        let argv = arguments.map { strdup($0) } + [nil]
        let envp = options.environment.map { strdup($0) } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard result == 0 else {
            if result == ENOENT { throw .commandNotFound(executable) }
            throw .commandNotExecutable(path: executable, errno: Errno(rawValue: result))
        }
        return pid
    }

    /// The shell's convention for a wait status: the exit code, or 128+N for a child killed by signal N.
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

    /// Refuses what an LD_PRELOAD shim cannot control (SPEC §4), as the
    /// shim refuses it at every exec (``Program``); with `allowingUncontrolled`,
    /// warns on standard error instead and lets it run on real time.
    @discardableResult
    static func checkControllable(_ executable: String, as command: String, allowingUncontrolled: Bool = false) throws(TimeControlError) -> Program {
        let program = Program(path: executable)
        guard let problem = program.problem else { return program }
        let subject = program.decidedOn == executable ? executable : "\(executable)'s interpreter \(program.decidedOn)"
        guard allowingUncontrolled else {
            throw .cannotControl(command: command, reason: "\(subject) is \(problem); it would run on real time (--allow-uncontrolled runs it so, with a warning)")
        }
        let line = "timectl: warning: \(command) runs on real time: \(subject) is \(problem)\n"
        _ = line.withCString { write(2, $0, strlen($0)) }
        return program
    }
}
