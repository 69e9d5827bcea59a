import Foundation
import Testing
@testable import TimeControlKit

struct ProcessResult: CustomStringConvertible {
    var status: Int32
    var stdout: String
    var stderr: String
    var timedOut: Bool

    var description: String { "status \(status)\(timedOut ? " (timed out)" : "") stdout: \(stdout) stderr: \(stderr)" }
    var lines: [String] { stdout.split(separator: "\n").map(String.init) }
}

/// Starts `process`, one launch at a time in this test process: Foundation's
/// `Process.run()` was seen to crash (a bad read in memcpy inside it) when
/// 200 launches ran at once. The programs still run concurrently; only
/// their launches are serialised.
func launch(_ process: Process) throws {
    launchLock.lock()
    defer { launchLock.unlock() }
    try process.run()
}

private let launchLock = NSLock()

/// Runs a program to completion with a real-time guard against hangs
/// (the guard is generous: tests assert on virtual time, never on it).
/// Output goes to files, and the program starts through a plain
/// posix_spawn with no signal blocked: Foundation's Process keeps
/// descriptors of the files it is given open (a test process gathered them
/// by the thousand, and then crashed inside Process.run()), and does not
/// see its child exit while a process left behind holds one of them.
func runProgram(_ executable: String, _ arguments: [String], environment: [String: String],
                input: String? = nil, guardSeconds: Double = 60) throws -> ProcessResult {
    var result = try runProgramOnce(executable, arguments, environment: environment, input: input, guardSeconds: guardSeconds)
    // A wrapper (setpriv) that execs a program the test has just copied meets the ETXTBSY that spawnProgram
    // waits out (a descriptor another test's child inherited), and exits 126 saying so.
    for _ in 0..<100 where result.status == 126 && result.stderr.hasSuffix(": Text file busy\n") {
        usleep(10_000)
        result = try runProgramOnce(executable, arguments, environment: environment, input: input, guardSeconds: guardSeconds)
    }
    return result
}

private func runProgramOnce(_ executable: String, _ arguments: [String], environment: [String: String],
                            input: String?, guardSeconds: Double) throws -> ProcessResult {
    let scratch = try makeScratchDirectory("timectl-test")
    defer { try? FileManager.default.removeItem(atPath: scratch) }
    if let input { try input.write(toFile: scratch + "/in", atomically: false, encoding: .utf8) }
    let pid = try spawnProgram(executable, arguments, environment: environment, input: input == nil ? "/dev/null" : scratch + "/in",
                               output: scratch + "/out", errorOutput: scratch + "/err")
    let finished = hasExited(pid, within: guardSeconds)
    if !finished { kill(pid, SIGKILL) }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    let read = { (name: String) in (try? String(contentsOfFile: scratch + "/" + name, encoding: .utf8)) ?? "" }
    return ProcessResult(status: Spawn.exitStatus(status), stdout: read("out"), stderr: read("err"), timedOut: !finished)
}

/// Starts a program in the background, its standard input, output and error the files named (created, mode 0600),
/// with a plain posix_spawn (see ``runProgram(_:_:environment:input:guardSeconds:)``). The caller reaps it (`waitpid`).
func spawnProgram(_ executable: String, _ arguments: [String], environment: [String: String],
                  input: String = "/dev/null", output: String, errorOutput: String) throws -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, input, O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_APPEND, 0o600)
    posix_spawn_file_actions_addopen(&actions, 2, errorOutput, O_WRONLY | O_CREAT | O_APPEND, 0o600)
    // Nothing else of the test process's reaches the program: a pipe of another test's, or a
    // file being written (which a long-lived child would keep busy: ETXTBSY when it is run).
    _ = closeFrom(&actions, 3)
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var noSignals = sigset_t()
    sigemptyset(&noSignals)
    posix_spawnattr_setsigmask(&attributes, &noSignals)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK))
    let argv = ([executable] + arguments).map { strdup($0) } + [nil]
    let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer { (argv + envp).forEach { free($0) } }
    var pid: pid_t = 0
    var spawned = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
    // A program a test has just written (an installed copy of timectl) can be held open for writing a
    // moment longer by a child another thread is starting, which inherited the descriptor: ETXTBSY.
    for _ in 0..<100 where spawned == ETXTBSY {
        usleep(10_000)
        spawned = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
    }
    try #require(spawned == 0, "posix_spawn \(executable): \(String(cString: strerror(spawned)))")
    return pid
}

/// glibc's posix_spawn_file_actions_addclosefrom_np (2.34), which Swift's Glibc module does not show.
private let closeFrom: @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32 = {
    guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "posix_spawn_file_actions_addclosefrom_np") else {
        fatalError("glibc 2.34 or later is needed (posix_spawn_file_actions_addclosefrom_np)")
    }
    return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
}()

/// Stops a process a test started: SIGTERM, then SIGKILL if it has not exited
/// within `graceSeconds`; never waits forever. Its exit is seen with
/// `waitid(WNOWAIT)`, not through Foundation, which does not always notice
/// that a child it was told to terminate has exited (it is then never reaped,
/// and `waitUntilExit()` never returns).
func stop(_ process: Process, graceSeconds: Double = 10) {
    guard process.isRunning else { return }
    let pid = process.processIdentifier
    kill(pid, SIGTERM)
    if !hasExited(pid, within: graceSeconds) {
        kill(pid, SIGKILL)
        _ = hasExited(pid, within: graceSeconds)
    }
}

/// Whether the child `pid` has exited (a zombie, or already reaped) within `seconds`; reaps nothing.
func hasExited(_ pid: Int32, within seconds: Double) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    repeat {
        var info = siginfo_t()
        if waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 { return errno == ECHILD }
        if info._sifields._sigchld.si_pid == pid { return true }  // si_pid, in its union
        usleep(10_000)
    } while Date() < deadline
    return false
}
/// Parses "NAME VALUE" lines into a dictionary.
func keyedValues(_ text: String) -> [String: String] {
    var values: [String: String] = [:]
    for line in text.split(separator: "\n") {
        let parts = line.split(separator: " ", maxSplits: 1)
        if parts.count == 2 { values[String(parts[0])] = String(parts[1]) }
    }
    return values
}
/// What `timectl status --json` printed, read back.
func decodeStatus(_ result: ProcessResult) throws -> SessionStatus {
    try #require(result.status == 0, "\(result)")
    let decoder = JSONDecoder()
    decoder.keyDecodingStrategy = .convertFromSnakeCase
    return try decoder.decode(SessionStatus.self, from: Data(result.stdout.utf8))
}
