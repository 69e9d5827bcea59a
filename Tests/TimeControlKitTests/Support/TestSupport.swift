import Foundation
import Testing
@testable import TimeControlKit

/// Where the build put timectl, the shim and the Swift probe: next to the test runner.
enum Build {
    static let binDirectory = FilePaths.executableDirectory()
    static let timectl = binDirectory + "/timectl"
    static let shim = binDirectory + "/libTimeShim.so"
    static let swiftProbe = binDirectory + "/timectl-swift-probe"
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    /// Fails the test with a hint when the shim was not built (swift test alone does not build it).
    static func requireShim() throws {
        try #require(FileManager.default.fileExists(atPath: shim),
                     "\(shim) is missing: run the tests with scripts/test.sh (it builds the shim)")
    }
}

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
    let scratch = try makeScratchDirectory("timectl-test")
    defer { try? FileManager.default.removeItem(atPath: scratch) }
    if let input { try input.write(toFile: scratch + "/in", atomically: false, encoding: .utf8) }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, input == nil ? "/dev/null" : scratch + "/in", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, scratch + "/out", O_WRONLY | O_CREAT, 0o600)
    posix_spawn_file_actions_addopen(&actions, 2, scratch + "/err", O_WRONLY | O_CREAT, 0o600)
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
    let finished = hasExited(pid, within: guardSeconds)
    if !finished { kill(pid, SIGKILL) }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    let read = { (name: String) in (try? String(contentsOfFile: scratch + "/" + name, encoding: .utf8)) ?? "" }
    return ProcessResult(status: Spawn.exitStatus(status), stdout: read("out"), stderr: read("err"), timedOut: !finished)
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

/// A private session directory for one test, removed afterwards.
final class Sandbox: @unchecked Sendable {
    let directory: String
    let sessions: SessionDirectory

    init() throws {
        var template = Array((FileManager.default.temporaryDirectory.path + "/timectl-sessions-XXXXXX").utf8CString)
        let path = template.withUnsafeMutableBufferPointer { buffer in mkdtemp(buffer.baseAddress!).map { String(cString: $0) } }
        directory = try #require(path)
        sessions = SessionDirectory(path: directory)
    }

    deinit {
        // What a test left running on its sessions (a sleeper whose timectl was stopped) goes too.
        for name in (try? sessions.sessionNames()) ?? [] {
            for process in (try? TimeSession.open(named: name, in: sessions))?.attachedProcesses() ?? [] {
                kill(process.pid, SIGKILL)
            }
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// The environment for processes of this test: its own session directory, nothing inherited from timectl.
    var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        for key in ["TIMECTL_SESSION", "TIMECTL_SEGMENT", "TIMECTL_SHIM", "TIMECTL_ON_ERROR", "LD_PRELOAD", "XDG_RUNTIME_DIR"] {
            environment[key] = nil
        }
        environment["TIMECTL_DIR"] = directory
        return environment
    }

    /// The same, as `KEY=VALUE` entries.
    var environmentEntries: [String] { environment.map { "\($0.key)=\($0.value)" } }

    /// Runs `timectl ARGS…`.
    @discardableResult
    func timectl(_ arguments: String..., environment extra: [String: String] = [:], guardSeconds: Double = 60) throws -> ProcessResult {
        try timectl(arguments, environment: extra, guardSeconds: guardSeconds)
    }

    func timectl(_ arguments: [String], environment extra: [String: String] = [:], guardSeconds: Double = 60) throws -> ProcessResult {
        try runProgram(Build.timectl, arguments, environment: environment.merging(extra) { $1 }, guardSeconds: guardSeconds)
    }

    /// Runs `timectl --session NAME run -- COMMAND…` and requires it to succeed.
    func runAttached(session: String, _ command: [String], guardSeconds: Double = 60) throws -> ProcessResult {
        let result = try timectl(["--session", session, "run", "--"] + command, guardSeconds: guardSeconds)
        #expect(result.status == 0, "\(command) under timectl: \(result)")
        return result
    }

    /// Starts `timectl --session NAME run -- COMMAND…` in the background.
    func startAttached(session: String, _ command: [String]) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Build.timectl)
        process.arguments = ["--session", session, "run", "--"] + command
        process.environment = environment
        try launch(process)
        return process
    }

    /// The session's attached processes once `condition` holds for them
    /// (polled, with a real-time guard against hangs).
    @discardableResult
    func waitForAttached(_ session: TimeSession, guardSeconds: Double = 10,
                         until condition: ([RunningProcess]) -> Bool) -> [RunningProcess] {
        let deadline = Date().addingTimeInterval(guardSeconds)
        var attached = session.attachedProcesses()
        while !condition(attached) && Date() < deadline {
            usleep(20_000)
            attached = session.attachedProcesses()
        }
        return attached
    }

    /// Whether process `pid` is gone, or a zombie, within `guardSeconds`
    /// (a process re-parented to init stays a zombie until init reaps it).
    func waitUntilGone(_ pid: Int32, guardSeconds: Double = 10) -> Bool {
        let deadline = Date().addingTimeInterval(guardSeconds)
        while ProcFS.isLive(pid: pid) {
            if Date() >= deadline { return false }
            usleep(5_000)
        }
        return true
    }

    /// Opens (or creates) a session in this sandbox through the library.
    func session(_ name: String) throws -> TimeSession {
        try TimeSession.openOrCreate(named: name, in: sessions)
    }
}

/// C programs from Tests/Fixtures, compiled once per test run.
enum CFixture {
    static let directory: String = {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("timectl-fixtures-\(getpid())").path
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        // Every test run compiles its own fixtures; leave none of them behind in /tmp.
        atexit { try? FileManager.default.removeItem(atPath: CFixture.directory) }
        return path
    }()

    private static let lock = NSLock()
    nonisolated(unsafe) private static var built: [String: String] = [:]

    /// The path of the compiled fixture `name` (from Tests/Fixtures/SOURCE.c, by default NAME.c; with
    /// `compiler: "c++"`, SOURCE.cpp as C++20).
    static func path(_ name: String, source sourceName: String? = nil, compiler: String = "cc", flags: [String] = []) throws -> String {
        lock.lock()
        defer { lock.unlock() }
        if let path = built[name] { return path }
        let output = directory + "/" + name
        let cxx = compiler == "c++"
        let source = Build.packageRoot + "/Tests/Fixtures/\(sourceName ?? name).\(cxx ? "cpp" : "c")"
        let language = cxx ? ["-std=c++20"] : []
        let result = try runProgram("/usr/bin/env", [compiler] + language + ["-O1", "-Wall", "-Wno-deprecated-declarations", "-o", output, source, "-ldl", "-lpthread"] + flags,
                                    environment: ProcessInfo.processInfo.environment)
        try #require(result.status == 0, "compiling \(source): \(result.stderr)")
        built[name] = output
        return output
    }
}

/// Rust programs from Tests/Fixtures/NAME.rs, compiled once per test run with Debian's rustc.
enum RustFixture {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var built: [String: String] = [:]

    static func path(_ name: String) throws -> String {
        lock.lock()
        defer { lock.unlock() }
        if let path = built[name] { return path }
        let output = CFixture.directory + "/" + name
        let source = Build.packageRoot + "/Tests/Fixtures/\(name).rs"
        let result = try runProgram("/usr/bin/env", ["rustc", "-O", "-o", output, source],
                                    environment: ProcessInfo.processInfo.environment, guardSeconds: 300)
        try #require(result.status == 0, "compiling \(source) (scripts/install-deps.sh installs rustc): \(result.stderr)")
        built[name] = output
        return output
    }
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

let nanosecondsPerSecond: Int64 = 1_000_000_000

extension Sandbox {
    /// 2016-01-01T12:00:00Z in ns since the epoch: where tests freeze their sessions.
    static let frozenStart: Int64 = 1_451_649_600 * nanosecondsPerSecond

    /// A new sandbox whose session `name` stands frozen at ``frozenStart``.
    static func frozenSession(_ name: String) throws -> (Sandbox, TimeSession) {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let session = try sandbox.session(name)
        try session.freeze(at: .absolute(nanosecondsSinceEpoch: frozenStart))
        return (sandbox, session)
    }
}

/// A program running attached to a session in the background, whose output
/// the test reads as it comes. Every wait here has a real-time guard that
/// only stops a hang; what the tests assert is virtual time.
final class BackgroundProgram: @unchecked Sendable {
    let process = Process()
    private let lock = NSLock()
    private var buffer = ""
    private var errorBuffer = ""
    private let finished = DispatchSemaphore(value: 0)

    /// `timectl --session SESSION run -- COMMAND…`.
    convenience init(_ sandbox: Sandbox, session: String, _ command: [String]) throws {
        try self.init(sandbox, timectl: ["--session", session, "run", "--"] + command)
    }

    /// `timectl ARGUMENTS…`, whatever they are.
    convenience init(_ sandbox: Sandbox, timectl arguments: [String]) throws {
        try self.init(executable: Build.timectl, arguments, environment: sandbox.environment)
    }

    /// Any program, with exactly `environment` (e.g. a sandbox's plus a session's attachment environment).
    init(executable: String, _ arguments: [String], environment: [String: String]) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = environment
        let pipe = outputPipe
        process.standardOutput = pipe
        process.standardError = errorPipe
        process.standardInput = FileHandle.nullDevice
        pipe.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            guard let self, !data.isEmpty else { return }
            self.lock.withLock { self.buffer += String(decoding: data, as: UTF8.self) }
        }
        errorPipe.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            guard let self, !data.isEmpty else { return }
            self.lock.withLock { self.errorBuffer += String(decoding: data, as: UTF8.self) }
        }
        process.terminationHandler = { [finished] _ in finished.signal() }
        try launch(process)
    }

    private let outputPipe = Pipe(), errorPipe = Pipe()

    deinit {
        stop(process)
        for pipe in [outputPipe, errorPipe] {
            pipe.fileHandleForReading.readabilityHandler = nil
            try? pipe.fileHandleForReading.close()
            try? pipe.fileHandleForWriting.close()
        }
    }

    var output: String { lock.withLock { buffer } }
    var errorOutput: String { lock.withLock { errorBuffer } }
    var lines: [String] { output.split(separator: "\n").map(String.init) }
    /// Output lines the program has finished writing (an unbuffered program, e.g. python3 with
    /// PYTHONUNBUFFERED=1, writes a line in pieces).
    var completeLines: [String] {
        let text = output
        guard let end = text.lastIndex(of: "\n") else { return [] }
        return text[..<end].split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    }

    /// The first complete output line that starts with one of `prefixes`, once there is one.
    func line(startingWith prefixes: String..., guardSeconds: Double = 30) -> String? {
        let deadline = Date().addingTimeInterval(guardSeconds)
        while Date() < deadline {
            if let line = completeLines.first(where: { line in prefixes.contains { line.hasPrefix($0) } }) { return line }
            usleep(5_000)
        }
        return nil
    }

    /// The exit status once the program ends; nil (after killing it) if it outlives the guard.
    func exitStatus(guardSeconds: Double = 30) -> Int32? {
        if finished.wait(timeout: .now() + guardSeconds) == .timedOut {
            stop(process)
            return nil
        }
        finished.signal()
        usleep(20_000)  // let the last output arrive
        return process.terminationStatus
    }

    var isRunning: Bool { process.isRunning }
}

/// What `timectl status --json` printed, read back.
func decodeStatus(_ result: ProcessResult) throws -> SessionStatus {
    try #require(result.status == 0, "\(result)")
    let decoder = JSONDecoder()
    decoder.keyDecodingStrategy = .convertFromSnakeCase
    return try decoder.decode(SessionStatus.self, from: Data(result.stdout.utf8))
}

extension Sandbox {
    /// The session's pending waits once `condition` holds for them (real-time guard).
    @discardableResult
    func waitForWaits(_ session: TimeSession, guardSeconds: Double = 30,
                      until condition: ([PendingWait]) -> Bool) -> [PendingWait] {
        let deadline = Date().addingTimeInterval(guardSeconds)
        var waits = session.pendingWaits()
        while !condition(waits) && Date() < deadline {
            usleep(5_000)
            waits = session.pendingWaits()
        }
        return waits
    }
}

/// The host's `CLOCK_REALTIME − CLOCK_BOOTTIME` in ns, read in the test process
/// (never attached): what setting the host's wall clock changes, and nothing else.
func hostWallClockOffset() -> Int64 {
    var realtime = timespec(), boottime = timespec()
    clock_gettime(CLOCK_BOOTTIME, &boottime)
    clock_gettime(CLOCK_REALTIME, &realtime)
    return (Int64(realtime.tv_sec) - Int64(boottime.tv_sec)) * nanosecondsPerSecond
        + Int64(realtime.tv_nsec) - Int64(boottime.tv_nsec)
}

/// Runs `body`, in which controlled programs set their clock, so that a
/// regression cannot leave the test machine's clock moved (CI runs as
/// root): if the host's wall clock moved against CLOCK_BOOTTIME by more than
/// half a second (NTP slews it far less), it is put back where it was, and
/// the test fails.
func guardingHostClock<T>(sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> T) throws -> T {
    let before = hostWallClockOffset()
    defer {
        let moved = hostWallClockOffset() - before
        if abs(moved) > nanosecondsPerSecond / 2 {
            var boottime = timespec()
            clock_gettime(CLOCK_BOOTTIME, &boottime)
            let restored = Int64(boottime.tv_sec) * nanosecondsPerSecond + Int64(boottime.tv_nsec) + before
            var value = timespec(tv_sec: Int(restored / nanosecondsPerSecond), tv_nsec: Int(restored % nanosecondsPerSecond))
            let outcome = clock_settime(CLOCK_REALTIME, &value) == 0 ? "it was put back" : "putting it back failed (errno \(errno))"
            Issue.record("a controlled program moved the host's wall clock by \(Double(moved) / 1e9) s; \(outcome)",
                         sourceLocation: sourceLocation)
        }
    }
    return try body()
}

/// Go programs from Tests/Fixtures — a single file NAME.go, or a module
/// directory NAME — built once per test run, offline (GOPROXY=off), with
/// Go's caches in a temporary directory removed after each build (CI
/// installs golang-go). Dynamic builds use cgo's external linking.
enum GoFixture {
    /// `pieWithoutCgo`: `CGO_ENABLED=0 -buildmode=pie`, dynamically linked but without cgo's runtime.
    enum Linking: String { case dynamic, `static`, pieWithoutCgo }

    private static let lock = NSLock()
    nonisolated(unsafe) private static var built: [String: String] = [:]

    /// The path of the built program from Tests/Fixtures/NAME.go or Tests/Fixtures/NAME.
    static func path(_ name: String, linking: Linking = .dynamic) throws -> String {
        try build(name, linking: linking, command: ["build"], suffix: "")
    }

    /// The path of the test binary (`go test -c`) of the module Tests/Fixtures/NAME.
    static func testBinary(_ name: String, linking: Linking = .dynamic) throws -> String {
        try build(name, linking: linking, command: ["test", "-c"], suffix: ".test")
    }

    private static func build(_ name: String, linking: Linking, command: [String], suffix: String) throws -> String {
        lock.lock()
        defer { lock.unlock() }
        let key = name + "-" + linking.rawValue + suffix
        if let path = built[key] { return path }
        let go = ["/usr/bin/go", "/usr/local/go/bin/go"].first { FileManager.default.isExecutableFile(atPath: $0) }
        let goPath = try #require(go, "the Go toolchain is missing: install golang-go (.ci/run does)")
        let output = CFixture.directory + "/" + key
        let source = Build.packageRoot + "/Tests/Fixtures/" + name
        let isModule = FileManager.default.fileExists(atPath: source + "/go.mod")
        var environment = ProcessInfo.processInfo.environment
        for key in ["LD_PRELOAD", "TIMECTL_SEGMENT", "GOFLAGS"] { environment[key] = nil }
        environment["GOCACHE"] = CFixture.directory + "/go-cache"
        environment["GOPATH"] = CFixture.directory + "/go-path"
        environment["HOME"] = CFixture.directory
        environment["GOPROXY"] = "off"
        environment[isModule ? "GOFLAGS" : "GO111MODULE"] = isModule ? "-mod=mod" : "off"
        environment["CGO_ENABLED"] = linking == .dynamic ? "1" : "0"
        let flags = switch linking {
        case .dynamic: ["-ldflags=-linkmode=external"]
        case .static: [String]()
        case .pieWithoutCgo: ["-buildmode=pie"]
        }
        let result = try runProgram("/bin/sh", ["-c", "cd \"$0\" && go=$1 && shift && exec \"$go\" \"$@\"", isModule ? source : Build.packageRoot + "/Tests/Fixtures",
                                                goPath] + command + flags + ["-o", output, isModule ? "." : name + ".go"],
                                    environment: environment, guardSeconds: 600)
        // Only the program is kept (as for the C fixtures); Go's caches go.
        try? FileManager.default.removeItem(atPath: CFixture.directory + "/go-cache")
        try? FileManager.default.removeItem(atPath: CFixture.directory + "/go-path")
        try #require(result.status == 0, "go \(command.joined(separator: " ")) \(name) (\(linking)): \(result)")
        built[key] = output
        return output
    }
}
