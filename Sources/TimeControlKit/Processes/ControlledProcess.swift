#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import TimeShimC

/// How a process ended.
public enum Termination: Sendable, Hashable, CustomStringConvertible {
    /// It exited with this code.
    case exited(Int32)
    /// It was killed by this signal.
    case signalled(Int32)

    /// The shell's convention: the exit code, or 128+N for signal N.
    public var status: Int32 {
        switch self {
        case .exited(let code): return code
        case .signalled(let signal): return 128 + signal
        }
    }

    /// "exited with N" or "killed by signal N".
    public var description: String {
        switch self {
        case .exited(let code): return "exited with \(code)"
        case .signalled(let signal): return "killed by signal \(signal)"
        }
    }

    init(waitStatus status: Int32) {
        let signal = status & 0x7F
        self = signal == 0 ? .exited((status >> 8) & 0xFF) : .signalled(signal)
    }
}

/// A process started attached to a session by ``TimeSession/spawn(_:_:environment:workingDirectory:)``:
/// read its output, signal it, wait for its end.
///
/// It runs in a process group of its own, which lives as long as the session
/// object that started it, not as long as this handle: releasing the handle
/// (`_ = try session.spawn(…)`) leaves the process running; ending the
/// session — ``TimeSession/end()``, or releasing a temporary session at the
/// end of a test, passed or failed — kills the whole group, so a test that
/// fails half-way leaves no process behind.
public final class ControlledProcess: Sendable {
    /// The process id.
    public let pid: Int32
    /// The command line it was started with.
    public let command: [String]
    /// The session it is attached to (kept alive as long as the process handle; the process lives as long as the session).
    public let session: TimeSession

    private struct State {
        var output: [UInt8] = []
        var errorOutput: [UInt8] = []
        var termination: Termination?
        var waiters: [Int: (ready: @Sendable (State) -> Bool, continuation: CheckedContinuation<Void, any Error>)] = [:]
        var nextWaiter = 0
    }

    private let state = Mutex(State())

    init(session: TimeSession, executable: String, command: [String], environment: [String],
         workingDirectory: String?) throws(TimeControlError) {
        var output: [Int32] = [0, 0], errorOutput: [Int32] = [0, 0]
        guard tc_pipe_cloexec(&output) == 0, tc_pipe_cloexec(&errorOutput) == 0 else {
            throw .system(call: "pipe2", path: nil, errno: .init(rawValue: errno))
        }
        let devNull = open("/dev/null", O_RDONLY | O_CLOEXEC)
        defer {
            close(output[1])
            close(errorOutput[1])
            if devNull >= 0 { close(devNull) }
        }
        do {
            pid = try Spawn.start(executable, arguments: command, options: .init(
                environment: environment, workingDirectory: workingDirectory, newProcessGroup: true,
                standardInput: devNull >= 0 ? devNull : nil, standardOutput: output[1], standardError: errorOutput[1]))
        } catch {
            close(output[0])
            close(errorOutput[0])
            throw error
        }
        self.command = command
        self.session = session
        let pidfd = tc_pidfd_open(pid)
        let (stdoutFD, stderrFD, pid) = (output[0], errorOutput[0], self.pid)
        startThread { [weak self] in
            ControlledProcess.watch(pid: pid, pidfd: pidfd, output: stdoutFD, errorOutput: stderrFD) { event in
                guard let self else { return }
                self.record(event)
            }
        }
    }

    // MARK: Reading

    /// Everything the process wrote to its standard output so far.
    public var standardOutput: String { state.withLock { String(decoding: $0.output, as: UTF8.self) } }

    /// Everything the process wrote to its standard error so far.
    public var standardError: String { state.withLock { String(decoding: $0.errorOutput, as: UTF8.self) } }

    /// How it ended, or nil while it runs.
    public var termination: Termination? { state.withLock { $0.termination } }

    /// Whether the process has not ended yet.
    public var isRunning: Bool { termination == nil }

    // MARK: Signals

    /// Sends `signal` to the process.
    public func send(_ signal: Int32) {
        if isRunning { Glibc.kill(pid, signal) }
    }

    /// Kills the process and everything in its process group.
    public func kill() {
        if isRunning { Glibc.kill(-pid, SIGKILL) }
    }

    // MARK: Waiting

    /// Suspends until the process ends.
    ///
    /// - Parameter realTimeLimit: a guard on the harness's own wait, in real
    ///   time: past it the process is killed and ``TimeControlError/realTimeLimitExceeded(waitingFor:limit:)``
    ///   is thrown. The process's own time is the session's.
    @discardableResult
    public func waitForExit(realTimeLimit: Duration = .seconds(60)) async throws -> Termination {
        try await wait(for: "\(command.first ?? "process") \(pid) to exit", realTimeLimit: realTimeLimit) {
            $0.termination != nil
        }
        return termination!
    }

    /// Suspends until the standard output contains `text`; returns the output so far.
    @discardableResult
    public func waitForOutput(containing text: String, realTimeLimit: Duration = .seconds(60)) async throws -> String {
        let bytes = Array(text.utf8)
        try await wait(for: "\"\(text)\" in the output of \(command.first ?? "process") \(pid)", realTimeLimit: realTimeLimit) { state in
            state.output.count >= bytes.count && (0...(state.output.count - bytes.count)).contains { start in
                state.output[start..<start + bytes.count].elementsEqual(bytes)
            }
        }
        return standardOutput
    }

    private func wait(for what: String, realTimeLimit: Duration, until ready: @escaping @Sendable (State) -> Bool) async throws {
        let id: Int? = state.withLock { state in
            if ready(state) { return nil }
            state.nextWaiter += 1
            return state.nextWaiter
        }
        guard let id else { return }
        // On the real clock even in a process the shim controls (a test's own, under the trait): not Task.sleep.
        let guardTimer = RealTimeGuards.shared.schedule(after: realTimeLimit) { [weak self] in
            self?.resume(id, with: .failure(TimeControlError.realTimeLimitExceeded(waitingFor: what, limit: realTimeLimit)))
        }
        defer { RealTimeGuards.shared.cancel(guardTimer) }
        try await withCheckedThrowingContinuation { continuation in
            let done: Bool = state.withLock { state in
                if ready(state) { return true }
                state.waiters[id] = (ready, continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }

    private func resume(_ id: Int, with result: Result<Void, any Error>) {
        let continuation = state.withLock { $0.waiters.removeValue(forKey: id)?.continuation }
        if case .failure = result, continuation != nil { kill() }
        continuation?.resume(with: result)
    }

    // MARK: The watcher thread

    enum Event {
        case output([UInt8])
        case errorOutput([UInt8])
        case exited(Termination)
    }

    private func record(_ event: Event) {
        let ready: [CheckedContinuation<Void, any Error>] = state.withLock { state in
            switch event {
            case .output(let bytes): state.output += bytes
            case .errorOutput(let bytes): state.errorOutput += bytes
            case .exited(let termination): state.termination = termination
            }
            let due = state.waiters.filter { $0.value.ready(state) }
            for id in due.keys { state.waiters.removeValue(forKey: id) }
            return due.values.map(\.continuation)
        }
        ready.forEach { $0.resume() }
    }

    /// Reads both pipes, and reaps the process when its pidfd turns readable.
    /// The exit is reported once what the process wrote before it has been
    /// read; after that the pipes are left (a daemonised grandchild may keep
    /// them open forever).
    private static func watch(pid: Int32, pidfd: Int32, output: Int32, errorOutput: Int32, report: (Event) -> Void) {
        var open: [Int32] = [output, errorOutput]
        var termination: Termination?
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            var fds = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            if termination == nil && pidfd >= 0 { fds.append(pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)) }
            // Exited: drain without waiting. Without a pidfd: look for the exit every 10 ms.
            let timeout: Int32 = termination != nil ? 0 : pidfd >= 0 ? -1 : 10
            let ready = tc_real_poll(&fds, UInt(fds.count), timeout)
            if ready < 0 && errno != EINTR { break }
            if ready == 0 && termination != nil { break }
            for entry in fds where entry.revents != 0 && entry.fd != pidfd {
                let count = read(entry.fd, &buffer, buffer.count)
                if count > 0 {
                    report(entry.fd == output ? .output(Array(buffer[..<count])) : .errorOutput(Array(buffer[..<count])))
                } else {
                    close(entry.fd)
                    open.removeAll { $0 == entry.fd }
                }
            }
            if termination == nil {
                var status: Int32 = 0
                if waitpid(pid, &status, WNOHANG) == pid { termination = Termination(waitStatus: status) }
            }
            if termination != nil && open.isEmpty { break }
        }
        open.forEach { close($0) }
        if pidfd >= 0 { close(pidfd) }
        if termination == nil {
            var status: Int32 = 0
            if waitpid(pid, &status, 0) == pid { termination = Termination(waitStatus: status) }
        }
        report(.exited(termination ?? .signalled(SIGKILL)))
    }
}

/// Runs `body` on a new thread of its own (the harness blocks in system calls there, never in the cooperative pool).
/// The thread starts with every signal blocked but SIGPROF: a signal meant for the process (`timectl run`'s
/// SIGCHLD, one to pass on to the command) must reach the thread that waits for it, never be taken by a helper.
func startThread(_ body: @escaping @Sendable () -> Void) {
    final class Box {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    var thread = pthread_t()
    let box = Unmanaged.passRetained(Box(body)).toOpaque()
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    var all = sigset_t(), saved = sigset_t()
    sigfillset(&all)
    // Every signal blocked but SIGPROF, as on the shim's own threads (TC_SHIM_THREAD_SIGNAL): Swift's crash
    // handler suspends each thread with a signal it does not block, or prints "failed to suspend thread".
    sigdelset(&all, SIGPROF)
    pthread_sigmask(SIG_SETMASK, &all, &saved)
    let result = pthread_create(&thread, &attributes, { argument in
        let box = Unmanaged<Box>.fromOpaque(argument!).takeRetainedValue()
        box.body()
        return nil
    }, box)
    pthread_sigmask(SIG_SETMASK, &saved, nil)
    pthread_attr_destroy(&attributes)
    if result != 0 {
        Unmanaged<Box>.fromOpaque(box).release()
        body()
    }
}
