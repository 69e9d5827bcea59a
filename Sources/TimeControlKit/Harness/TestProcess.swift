#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import TimeShimC

/// What TimeControlKitTesting's `.timeSession()` trait needs to run one test
/// case in a process of its own, on the case's session: the test program is
/// started again with the shim preloaded, restricted to that case, and
/// everything in it — `Date()`, `Task.sleep`, dispatch, `Thread.sleep` —
/// reads and waits on the session (docs/swift.md).
///
/// Not for use outside TimeControlKitTesting.
@_spi(Testing)
public enum TestProcess {
    /// The variables the parent sets for the child. `TIMECTL_TEST_PROGRAM`
    /// ("DEVICE:INODE" of the test program's file) is read by the shim: a
    /// process that links TimeControlKit carries the controller note, which
    /// keeps it on real time, unless it runs exactly that file.
    public enum Variable {
        /// The `Test.ID` description of the test the child runs.
        public static let test = "TIMECTL_TEST_ID"
        /// Which case of it (see the trait's case key); "-" for a test without arguments.
        public static let testCase = "TIMECTL_TEST_CASE"
        /// The parent's pid: a process whose parent is another (one the child starts) is not the child.
        public static let parent = "TIMECTL_TEST_PARENT"
        /// A directory private to this run, where the child reports that it ran the case.
        public static let reportDirectory = "TIMECTL_TEST_REPORT"
        /// The shim's marker (timectl's `executable_is_test_program`).
        public static let program = "TIMECTL_TEST_PROGRAM"
        /// Every variable of the mechanism, to keep from processes the child starts with ``TimeSession/spawn(_:_:environment:workingDirectory:)``.
        public static let all = [test, testCase, parent, reportDirectory, program]
    }

    /// What the running process was started for, when it is the child the
    /// trait started (its parent is the pid it was given); nil otherwise.
    public struct Assignment: Sendable {
        /// The `Test.ID` description of the test to run.
        public let testID: String
        /// The key of the case to run.
        public let caseKey: String
        /// Where to report that the case ran.
        public let reportDirectory: String
        /// The session's segment (`TIMECTL_SEGMENT`).
        public let segmentPath: String
        /// The parent's pid.
        public let parent: Int32
    }

    /// This process's assignment, read once.
    public static let assignment: Assignment? = {
        guard let testID = ProcessEnvironment.value(Variable.test),
              let caseKey = ProcessEnvironment.value(Variable.testCase),
              let report = ProcessEnvironment.value(Variable.reportDirectory),
              let segment = ProcessEnvironment.value("TIMECTL_SEGMENT"),
              let parentText = ProcessEnvironment.value(Variable.parent), let parent = Int32(parentText),
              getppid() == parent
        else { return nil }
        return Assignment(testID: testID, caseKey: caseKey, reportDirectory: report, segmentPath: segment, parent: parent)
    }()

    /// The running program's file, as the kernel started it (`/proc/self/exe`).
    public static func executable() throws(TimeControlError) -> String {
        guard let path = ProcFS.ownExecutablePath() else {
            throw .system(call: "readlink", path: ProcFS.ownExecutable, errno: .init(rawValue: errno))
        }
        return path
    }

    /// `TIMECTL_TEST_PROGRAM`'s value for the running program: its file's "DEVICE:INODE".
    public static func programMarker() throws(TimeControlError) -> String {
        var info = stat()
        guard stat(ProcFS.ownExecutable, &info) == 0 else {
            throw .system(call: "stat", path: ProcFS.ownExecutable, errno: .init(rawValue: errno))
        }
        return "\(UInt64(info.st_dev)):\(UInt64(info.st_ino))"
    }

    /// Finds the shim, building it into the cache if needed (about 6 s the
    /// first time), on a thread of its own: never in the cooperative pool,
    /// where parallel tests all waiting for the one build would hold every thread.
    @discardableResult
    public static func prepareShim() async throws -> String {
        try await onOwnThread { try ShimEnvironment.locateShim() }
    }

    /// Opens the session of `assignment` (the segment the parent made; it is the parent's to end).
    public static func openSession(_ assignment: Assignment) throws(TimeControlError) -> TimeSession {
        let path = assignment.segmentPath
        let directory = FilePaths.parent(of: path)
        var file = Substring(path[path.index(after: path.lastIndex(of: "/") ?? path.startIndex)...])
        if file.hasSuffix(".seg") { file = file.dropLast(4) }
        return try TimeSession.open(named: String(file), in: SessionDirectory(path: directory))
    }

    /// Ends this process at once if its parent ends first (the runner was
    /// interrupted): a child left behind would wait on a frozen clock for ever.
    /// A thread watches a pidfd of the parent (`PR_SET_PDEATHSIG` would follow
    /// the parent's thread that started the child, which the pool may retire).
    public static func exitWithParent(_ parent: Int32) {
        let pidfd = tc_pidfd_open(parent)
        guard pidfd >= 0 else {
            if getppid() != parent { _exit(70) }
            return
        }
        if getppid() != parent { _exit(70) }  // it ended before the pidfd was opened
        let started = StopFlag()
        startThread {
            started.raise()
            var entry = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
            while tc_real_poll(&entry, 1, -1) < 0 && errno == EINTR {}
            _exit(70)
        }
        // Before the test's code: until a new thread first runs, libc keeps every signal blocked in it,
        // and a crash then (a busy CPU can hold it back for milliseconds) found it unsuspendable.
        while !started.raised { tc_word_wait(started.word, started.expected, -1) }
    }

    /// The process that started this test runner (`swift-test`), as it was at
    /// the runner's first case in a process of its own; nil when the runner
    /// was started by init, or already orphaned then.
    private static let runnerParent: Int32? = {
        let parent = getppid()
        return parent > 1 ? parent : nil
    }()

    /// Whether the process that started this test runner has ended: `swift
    /// test` starts the runner in a process group of its own, so `timeout
    /// swift test` (or a terminal's Ctrl-C sent to `swift-test` alone) leaves
    /// it running, orphaned, with no one to read what it reports. Such a
    /// runner starts no more cases of its own.
    public static var runnerParentHasEnded: Bool {
        guard let runnerParent else { return false }
        return getppid() != runnerParent
    }

    /// Tells the parent that the case ran here (a file in the report directory).
    public static func reportRan(_ assignment: Assignment) {
        let fd = open(assignment.reportDirectory + "/ran", O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        if fd >= 0 { close(fd) }
    }

    /// Whether the child reported that it ran the case.
    public static func caseRan(reportDirectory: String) -> Bool {
        access(reportDirectory + "/ran", F_OK) == 0
    }

    /// A new private directory for one child's reports (under `$TMPDIR`, else /tmp).
    public static func makeReportDirectory() throws(TimeControlError) -> String {
        try ScratchDirectory(purpose: "test").path
    }

    /// Removes a report directory and the files in it.
    public static func removeReportDirectory(_ path: String) { removeFlatDirectory(path) }
}
