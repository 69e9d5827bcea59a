#if canImport(Glibc)
import Glibc
#endif

/// Runs a command attached to a session, the way `timectl run` does:
/// refuses programs a preload shim cannot control, passes signals on, and
/// reports the child's exit status (128+N when killed by signal N).
public struct AttachedCommand: Sendable {
    /// The command and its arguments; the command is looked up in `PATH`.
    public let arguments: [String]
    /// The session it attaches to, and the shim it uses.
    public let attachment: Attachment

    /// A command to run attached.
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
        let executable = try Spawn.resolve(command, path: Spawn.searchPath(in: childEnvironment))
        try Spawn.checkControllable(executable, as: command)

        var waited = sigset_t()
        sigemptyset(&waited)
        for signal in Self.forwardedSignals + [SIGCHLD] { sigaddset(&waited, signal) }
        var saved = sigset_t()
        pthread_sigmask(SIG_BLOCK, &waited, &saved)
        defer { pthread_sigmask(SIG_SETMASK, &saved, nil) }

        let child = try Spawn.start(executable, arguments: arguments, options: .init(environment: childEnvironment))
        while true {
            var info = siginfo_t()
            let signal = sigwaitinfo(&waited, &info)
            if signal < 0 { continue }  // EINTR
            if signal == SIGCHLD {
                var status: Int32 = 0
                if waitpid(child, &status, WNOHANG) == child { return Spawn.exitStatus(status) }
                continue
            }
            if info.si_code != SI_KERNEL { kill(child, signal) }
        }
    }
}
