import SystemPackage
import TimeShimC

/// Everything TimeControlKit can fail with. Each description is one line
/// that says what was wrong and, for bad input, what is accepted.
public enum TimeControlError: Error, Sendable, CustomStringConvertible {
    /// A value did not parse (a DURATION, AT or RATE).
    case invalidInput(FormatError)
    /// A session name outside `[A-Za-z0-9][A-Za-z0-9._-]*`, at most 63 characters.
    case invalidSessionName(String)
    /// A verb that needs an existing session named one that does not exist.
    case sessionNotFound(name: String, path: String)
    /// `session create` (``TimeSession/create(named:in:pinned:)``) named a session that already exists.
    case sessionExists(name: String, path: String)
    /// The segment file exists but is not one to trust: a symbolic link, not a
    /// regular file, another user's, open to others, truncated, of another
    /// layout version, or damaged.
    case untrustedSegment(path: String, problem: String)
    /// The verb would move a clock outside what the segment can represent.
    case outOfRange(verb: String)
    /// Another writer held the session's lock for longer than the timeout.
    case lockTimeout(path: String)
    /// A system call failed.
    case system(call: String, path: String?, errno: Errno)
    /// The per-user session directory is not private to this user.
    case unsafeSessionDirectory(path: String, problem: String)
    /// The session directory (`TIMECTL_DIR`) does not exist and cannot be made: only its last component is created.
    case sessionDirectoryParentMissing(path: String)
    /// `libTimeShim.so` was not found in any of the places searched.
    case shimNotFound(searched: [String])
    /// No `libTimeShim.so` was installed, and building one from the
    /// shim's sources (``ShimEnvironment/locateShim(environment:)``) failed.
    case shimBuildFailed(source: String, problem: String)
    /// A `libTimeShim.so` was found but cannot be used.
    case shimUnusable(path: String, problem: String)
    /// `session remove` without `--force` while processes are attached.
    case sessionInUse(name: String, pids: [Int32])
    /// The command cannot be controlled by the shim (setuid, file capabilities, another architecture).
    case cannotControl(command: String, reason: String)
    /// The command to run was not found.
    case commandNotFound(String)
    /// The command was found but could not be started.
    case commandNotExecutable(path: String, errno: Errno)
    /// A harness wait outlasted its real-time guard (the harness's own limit,
    /// not the session's time).
    case realTimeLimitExceeded(waitingFor: String, limit: Duration)
    /// A condition did not hold within its limit of virtual time.
    case virtualTimeLimitExceeded(condition: String, limit: Duration, steps: Int)
    /// Advancing to the next deadline, step after step, did not reach
    /// `goal` within the step limit; `busiest` names the wait that kept
    /// coming back.
    case stepLimitExceeded(goal: String, steps: Int, busiest: String)
    /// A process began wait after wait that was already due — a 0 s timer
    /// re-armed in a loop — while virtual time stood still and nothing else
    /// ran: no step can ever end that (see the loop guard in the docs).
    case livelock(pid: Int32, command: String, immediateWaits: Int)
    /// Another auto-advance scheduler already owns the session.
    case schedulerRunning(session: String, pid: Int32, kind: SchedulerKind)
    /// A trace file that is missing, truncated, altered or of another format version.
    case untrustedTrace(path: String, problem: String)
    /// `timectl record` would replace an existing file.
    case traceExists(path: String)
    /// There was no pending wait to advance to.
    case nothingPending(session: String)
    /// Every thread of the session is blocked on another of its threads and
    /// none waits on virtual time: nothing can ever happen (auto-advance).
    case deadlock(threads: [BlockedThread])
    /// Every thread is blocked and the only waits left end past the year 2200, the end of the supported range.
    case endOfTimeRange(wait: String)

    /// One line that says what was wrong and, for bad input, what is accepted.
    public var description: String {
        switch self {
        case .invalidInput(let error):
            return error.description
        case .invalidSessionName(let name):
            return "invalid session name \(FormatError.quoted(name)): expected 1-63 characters from A-Z a-z 0-9 . _ -, starting with a letter or digit"
        case .sessionNotFound(let name, let path):
            return "no session '\(name)' (\(path) does not exist); create it with 'timectl freeze', 'timectl session create \(name)' or 'timectl run'"
        case .sessionExists(let name, let path):
            return "session '\(name)' already exists (\(path)); use it as it is, or remove it first with 'timectl session remove \(name)'"
        case .untrustedSegment(let path, let problem):
            return "session segment \(path) \(problem); not using it (remove it with 'timectl session remove --force')"
        case .outOfRange(let verb):
            return "\(verb) would move a clock outside the supported range \(TimeFormats.supportedRange); session unchanged"
        case .lockTimeout(let path):
            return "session \(path) is locked by another writer that has not finished for 10 s; session unchanged"
        case .system(let call, let path, let errno):
            return "\(call)\(path.map { " \($0)" } ?? ""): \(errno.description)"
        case .sessionDirectoryParentMissing(let path):
            return "cannot create the session directory \(path): its parent directory does not exist (set TIMECTL_DIR to a directory that exists, or to one inside it)"
        case .unsafeSessionDirectory(let path, let problem):
            return "session directory \(path) \(problem); it must be a directory owned by you with mode 0700 (remove it, or set TIMECTL_DIR to a private directory of yours)"
        case .shimNotFound(let searched):
            return "libTimeShim.so not found (looked in \(searched.joined(separator: ", "))); build it with scripts/build.sh or set TIMECTL_SHIM"
        case .shimBuildFailed(let source, let problem):
            return "libTimeShim.so is not installed and cannot be built from \(source): \(problem)"
        case .shimUnusable(let path, let problem):
            return "cannot use shim \(path): \(problem)"
        case .sessionInUse(let name, let pids):
            return "session '\(name)' has attached processes (\(pids.map(String.init).joined(separator: ", "))); use --force to remove it anyway"
        case .cannotControl(let command, let reason):
            return "cannot control \(command): \(reason)"
        case .commandNotFound(let command):
            return "command not found: \(command)"
        case .commandNotExecutable(let path, let errno):
            return "cannot execute \(path): \(errno.description)"
        case .realTimeLimitExceeded(let what, let limit):
            return "gave up waiting for \(what) after \(limit) of real time (the harness's guard against a hang)"
        case .virtualTimeLimitExceeded(let condition, let limit, let steps):
            return "\(condition) did not hold within \(limit) of virtual time (\(steps) steps)"
        case .stepLimitExceeded(let goal, let steps, let busiest):
            return "gave up after \(steps) steps to the next deadline (the step limit) without \(goal); the wait that kept coming back: \(busiest)"
        case .livelock(let pid, let command, let count):
            return "pid \(pid) (\(command)) began \(count) waits that were already due while virtual time stood still and nothing else ran (a 0 s timer re-armed in a loop?); no step can end that, so the loop guard stopped it"
        case .untrustedTrace(let path, let problem):
            return "trace \(path) \(problem)"
        case .traceExists(let path):
            return "\(path) already exists; give another --trace FILE, or --force to replace it"
        case .schedulerRunning(let session, let pid, let kind):
            let ending = switch kind {
            case .daemon: "stop it first ('timectl daemon --stop --session \(session)')"
            case .command: "it ends when its command exits"
            case .harness: "it ends when the test process that started it stops it"
            case .unknown: "it is starting; try again when it has ended"
            }
            return "session '\(session)' already has an auto-advance scheduler (pid \(pid), \(kind.rawValue)); \(ending)"
        case .nothingPending(let session):
            return "session '\(session)' has no pending wait with a deadline ahead; nothing to advance to"
        case .deadlock(let threads):
            let lines = threads.map { "  \($0.description)" }.joined(separator: "\n")
            return "deadlock: every thread of the session is blocked inside it and none waits on virtual time, so nothing can ever happen:\n\(lines)"
        case .endOfTimeRange(let wait):
            return "every thread is blocked and the next wait (\(wait)) ends past 2200-01-01, the end of the time range timectl supports: nothing more can happen"
        }
    }

    /// Translates the C layer's failure report for `path`.
    init(_ failure: tc_failure, path: String) {
        switch failure.result {
        case Int32(TC_E_SYSCALL.rawValue):
            let call = failure.syscall.map { String(cString: $0) } ?? "system call"
            self = .system(call: call, path: path, errno: Errno(rawValue: failure.sys_errno))
        case Int32(TC_E_LOCK_TIMEOUT.rawValue):
            self = .lockTimeout(path: path)
        case Int32(TC_E_VERSION.rawValue):
            self = .untrustedSegment(path: path, problem: "has segment layout version \(failure.found_version), this timectl reads version \(TC_SEGMENT_VERSION)")
        case Int32(TC_E_NOT_OWNER.rawValue):
            self = .untrustedSegment(path: path, problem: "belongs to another user (uid \(failure.found_uid))")
        default:
            self = .untrustedSegment(path: path, problem: String(cString: tc_result_phrase(failure.result)))
        }
    }
}
