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
import TimeShimC

/// One virtual timeline (SPEC §2), stored in one segment file that every
/// attached process maps. Verbs are atomic and serialised across processes.
///
/// A named session (``open(named:in:)``, ``openOrCreate(named:in:)``) is
/// shared with `timectl` and with every process attached to it. A
/// temporary one (``temporary(frozenAt:in:)``) belongs to the code that
/// made it: when the object is released — at the end of a test, passed or
/// failed — the processes it spawned and every process still attached to
/// it are killed, and its segment is removed.
public final class TimeSession: Sendable {
    /// The session's name (`timectl --session NAME`).
    public let name: String
    /// The directory its segment is in.
    public let directory: SessionDirectory
    /// Whether releasing the object kills its processes and removes the session.
    public let isTemporary: Bool
    let mapping: SegmentMapping
    /// Made at the first sleep on the session's clock: most sessions (`timectl run`'s) never sleep on it.
    private let sleeperSlot = Mutex<SessionSleeper?>(nil)
    var sleeper: SessionSleeper {
        sleeperSlot.withLock { slot in
            if let sleeper = slot { return sleeper }
            let sleeper = SessionSleeper(mapping: mapping)
            slot = sleeper
            return sleeper
        }
    }
    /// Process groups started by ``spawn(_:_:environment:workingDirectory:)``.
    private let spawnedGroups = Mutex<[Int32]>([])

    /// The segment file; attached processes find it through `TIMECTL_SEGMENT`.
    public var segmentPath: String { mapping.path }

    private init(name: String, directory: SessionDirectory, mapping: SegmentMapping, isTemporary: Bool = false) {
        self.name = name
        self.directory = directory
        self.mapping = mapping
        self.isTemporary = isTemporary
    }

    deinit {
        sleeperSlot.withLock { $0 }?.stop()
        end()
        // A named session's spawned processes live as long as this object too, not as long as their handles.
        killSpawnedGroups()
    }

    /// Kills the process group of every process ``spawn(_:_:environment:workingDirectory:)`` started.
    func killSpawnedGroups() {
        for group in spawnedGroups.withLock({ $0 }) { kill(-group, SIGKILL) }
    }

    /// The session of the running test, given by the `.timeSession()` trait
    /// of `TimeControlKitTesting` (Swift Testing); nil outside such a test.
    /// Child tasks see it too; an unstructured `Task.detached` does not.
    @TaskLocal public static var current: TimeSession?

    /// Ends a temporary session now rather than when the object is released:
    /// the processes it spawned and every process attached to it are
    /// killed and its segment is removed. Does nothing for a named session
    /// or a second time. A temporary session still alive when the process
    /// exits (a test runner exits as soon as the last test returns, while a
    /// process handle may still hold the session) is ended then.
    public func end() {
        guard isTemporary, !ended.exchange(true, ordering: .acquiringAndReleasing) else { return }
        _ = Self.liveTemporary.withLock { $0.removeValue(forKey: ObjectIdentifier(self)) }
        killSpawnedGroups()
        killAttachedAndRemove()
    }

    /// Kills every process still attached (this one aside) and removes the segment.
    private func killAttachedAndRemove() {
        for process in attachedProcesses() where process.pid != getpid() { kill(process.pid, SIGKILL) }
        mapping.markRemoved()
        unlink(segmentPath)
    }

    private let ended = Atomic<Bool>(false)

    /// Where a pinned session's monotonic clocks (`CLOCK_MONOTONIC`, `_RAW`,
    /// `_COARSE`, `CLOCK_BOOTTIME`) start: 1000 s, as if the machine had
    /// booted that long before. Every session made for one run or one test
    /// is pinned (SPEC §11): two runs read the same values.
    public static let pinnedMonotonicOrigin: Duration = .seconds(1000)

    /// Where the wall clock of a run that names no time starts
    /// (`timectl run --auto-advance` without `--at` or a session):
    /// 2000-01-01T00:00:00Z, as Go's `testing/synctest` bubbles start.
    public static let pinnedWallOrigin = Date(timeIntervalSince1970: 946_684_800)

    /// A new private session, named `tmp-PID-N-XXXX`, pinned (its monotonic
    /// clocks start at ``pinnedMonotonicOrigin``; its wall clock at real time
    /// or, with `date`, frozen there). Parallel tests each take their own.
    public static func temporary(frozenAt date: Date? = nil,
                                 in directory: SessionDirectory = SessionDirectory()) throws(TimeControlError) -> TimeSession {
        let session = try temporaryPinned(in: directory)
        // Pinned sessions start frozen at the origin: from here on the clocks run from it, or stand at `date`.
        if let date { try session.freeze(at: date) } else { try session.resume() }
        return session
    }

    /// A new private session, pinned and still frozen at the origin, for a caller that sets it going itself.
    @_spi(CommandLine)
    public static func temporaryPinned(in directory: SessionDirectory = SessionDirectory()) throws(TimeControlError) -> TimeSession {
        let serial = temporarySerial.add(1, ordering: .relaxed).newValue
        endAbandonedSessions(in: directory)
        let name = "tmp-\(getpid())-\(serial)-\(String(UInt16.random(in: 0...UInt16.max), radix: 16))"
        let session = try openOrCreate(named: name, in: directory, mustCreate: true, isTemporary: true, pinned: true)
        _ = endAtExit
        liveTemporary.withLock { $0[ObjectIdentifier(session)] = WeakSession(session) }
        return session
    }

    private static let temporarySerial = Atomic<Int>(0)

    /// The directories whose abandoned temporary sessions this process has ended.
    private static let sweptDirectories = Mutex<Set<String>>([])

    /// Ends the temporary sessions in `directory` whose process is gone: a
    /// test runner killed by a signal (SIGKILL, or left to its fate when
    /// `timeout swift test` signalled only `swift-test` and something killed
    /// it later) ends none of its sessions itself. Their attached processes
    /// are killed and their segments removed, once per directory and
    /// process, before the first temporary session made there.
    static func endAbandonedSessions(in directory: SessionDirectory) {
        guard sweptDirectories.withLock({ $0.insert(directory.path).inserted }) else { return }
        for name in (try? directory.sessionNames()) ?? [] {
            // tmp-PID-N-XXXX: made by process PID.
            let parts = name.split(separator: "-")
            guard parts.count == 4, parts[0] == "tmp", let creator = Int32(parts[1]), creator != getpid() else { continue }
            // The creator still runs if a process of that pid started before the segment was made (its
            // inode changed: it is written, then renamed into place). Read without mapping the segment.
            var info = stat()
            guard stat(directory.segmentPath(for: name), &info) == 0 else { continue }
            let made = Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec)
            let madeBoottime = made - (tc_real_ns(CLOCK_REALTIME) - tc_real_ns(CLOCK_BOOTTIME))
            if RunningProcess.ifRunning(pid: creator, registeredBoottime: max(madeBoottime, 1)) != nil { continue }
            (try? open(named: name, in: directory))?.killAttachedAndRemove()
        }
    }

    /// The temporary sessions not ended yet, ended by ``endAtExit`` when the process exits.
    private static let liveTemporary = Mutex<[ObjectIdentifier: WeakSession]>([:])

    private final class WeakSession: @unchecked Sendable {
        weak var session: TimeSession?
        init(_ session: TimeSession) { self.session = session }
    }

    private static let endAtExit: Void = {
        atexit {
            let sessions = TimeSession.liveTemporary.withLock { $0.values.compactMap(\.session) }
            for session in sessions { session.end() }
        }
    }()

    /// Opens an existing session; fails with `.sessionNotFound` if there is none.
    public static func open(named name: String, in directory: SessionDirectory = SessionDirectory()) throws(TimeControlError) -> TimeSession {
        try SessionDirectory.validate(name: name)
        let path = directory.segmentPath(for: name)
        guard let descriptor = try directory.open(create: false) else { throw .sessionNotFound(name: name, path: path) }
        defer { try? descriptor.close() }
        guard let mapping = try SegmentMapping.open(directory: descriptor, fileName: SessionDirectory.fileName(for: name), path: path) else {
            throw .sessionNotFound(name: name, path: path)
        }
        return TimeSession(name: name, directory: directory, mapping: mapping)
    }

    /// Opens a session, creating it at real time if it does not exist.
    public static func openOrCreate(named name: String, in directory: SessionDirectory = SessionDirectory()) throws(TimeControlError) -> TimeSession {
        try openOrCreate(named: name, in: directory, mustCreate: false)
    }

    /// Creates a new session; fails if it already exists. Its clocks start at
    /// real time or, `pinned`, frozen with its monotonic clocks at
    /// ``pinnedMonotonicOrigin`` (its wall clock at real time until a verb sets
    /// it: ``freeze(at:)-(WallClockTarget?)``, or ``resume(rate:)`` to start it from there), as a session made
    /// for one run is: two runs on sessions set up alike read the same values.
    public static func create(named name: String, in directory: SessionDirectory = SessionDirectory(),
                              pinned: Bool = false) throws(TimeControlError) -> TimeSession {
        try openOrCreate(named: name, in: directory, mustCreate: true, pinned: pinned)
    }

    /// Opens a session, creating it pinned (``create(named:in:pinned:)``) if it does not exist.
    public static func openOrCreatePinned(named name: String, in directory: SessionDirectory = SessionDirectory()) throws(TimeControlError) -> TimeSession {
        try openOrCreate(named: name, in: directory, mustCreate: false, pinned: true)
    }

    /// Orders the session's waits by a seed (SPEC §11): under auto-advance, waits that fall due together end one
    /// at a time in an order drawn from `seed` (stored plus one: 0 means none), and with `jitter` (a fraction
    /// × 2^32) each wait is stretched by a seeded part of its length. Set before the processes start.
    @_spi(CommandLine) @_spi(Testing)
    public func setOrder(seed: UInt64, jitter: UInt64) {
        mapping.setOrder(seed: seed &+ 1, jitter: jitter)
    }

    /// Whether the session's monotonic clocks started at ``pinnedMonotonicOrigin`` rather than at real time.
    public var isPinned: Bool {
        mapping.header.base.0 == SessionClock.Instant.nanoseconds(of: Self.pinnedMonotonicOrigin)
    }

    private static func openOrCreate(named name: String, in directory: SessionDirectory, mustCreate: Bool,
                                     isTemporary: Bool = false, pinned: Bool = false) throws(TimeControlError) -> TimeSession {
        try SessionDirectory.validate(name: name)
        let path = directory.segmentPath(for: name)
        let fileName = SessionDirectory.fileName(for: name)
        guard let descriptor = try directory.open(create: true) else { throw .sessionNotFound(name: name, path: path) }
        defer { try? descriptor.close() }
        // Mostly it is there: opened as it is, without first making a new segment only to find the name taken.
        if !mustCreate, let existing = try SegmentMapping.open(directory: descriptor, fileName: fileName, path: path) {
            return TimeSession(name: name, directory: directory, mapping: existing)
        }
        let origin = pinned ? SessionClock.Instant.nanoseconds(of: Self.pinnedMonotonicOrigin) : nil
        if let created = try SegmentMapping.create(directory: descriptor, name: name, fileName: fileName, path: path,
                                                   pinnedAt: origin) {
            return TimeSession(name: name, directory: directory, mapping: created, isTemporary: isTemporary)
        }
        if mustCreate {
            throw .sessionExists(name: name, path: path)
        }
        // Someone else created it first (or it was there): use theirs.
        guard let existing = try SegmentMapping.open(directory: descriptor, fileName: fileName, path: path) else {
            throw .sessionNotFound(name: name, path: path)
        }
        return TimeSession(name: name, directory: directory, mapping: existing)
    }

    // MARK: Verbs

    /// Applies a verb atomically; every process of the session sees it at once.
    /// A ``WallClockTarget/timeOfDay(nanosecondsAfterMidnight:utcOffsetSeconds:)``
    /// falls on the date the wall clock shows when the verb is applied (read
    /// under the segment's writer lock, so no other verb comes in between).
    public func apply(_ verb: TimeVerb) throws(TimeControlError) {
        _ = try mapping.apply(describedAs: verb.commandLine) { [mapping] in
            verb.cVerb(wallClockNow: { mapping.read(.realtime) })
        }
    }

    /// Stops the clocks (`freeze [AT]`).
    public func freeze(at target: WallClockTarget? = nil) throws(TimeControlError) {
        try apply(.freeze(at: target))
    }

    /// Lets the clocks run, at real speed unless another rate is given (`resume`).
    /// A wall clock stopped by ``freezeWall(at:)-(WallClockTarget?)`` runs again too, from where it stands.
    public func resume(rate: TimeRate = .realTime) throws(TimeControlError) {
        try apply(.resume(at: rate))
    }

    /// Stops the wall clocks only (`freeze --wall [AT]`): `CLOCK_REALTIME`,
    /// `time()`, `gettimeofday()` read `target` (or where they stand) until
    /// a `tick`, `set`, ``resume(rate:)`` or ``reset()``, while the monotonic
    /// clocks, sleeps, timeouts and timers go on at the session's rate.
    /// A `tick` moves both; ``setRate(_:)-(TimeRate)`` leaves the wall stopped.
    public func freezeWall(at target: WallClockTarget? = nil) throws(TimeControlError) {
        try apply(.freezeWall(at: target))
    }

    /// Stops the wall clocks at `date`, monotonic clocks running (`freeze --wall AT`).
    public func freezeWall(at date: Date) throws(TimeControlError) {
        try apply(.freezeWall(at: .absolute(nanosecondsSinceEpoch: try Self.nanoseconds(since1970: date))))
    }

    /// Sets how fast the clocks run (`rate FACTOR`); a stopped wall clock stays stopped.
    public func setRate(_ rate: TimeRate) throws(TimeControlError) {
        try apply(.run(at: rate))
    }

    /// Sets how fast the clocks run: `2` twice as fast as real time, `0.5` half as fast.
    public func setRate(_ factor: Double) throws(TimeControlError) {
        try apply(.run(at: try TimeRate(factor)))
    }

    /// Stops the clocks with the wall clock at `date` (`freeze AT`).
    public func freeze(at date: Date) throws(TimeControlError) {
        try apply(.freeze(at: .absolute(nanosecondsSinceEpoch: try Self.nanoseconds(since1970: date))))
    }

    /// Moves the wall clock to `date` (`set AT`); monotonic clocks are untouched.
    public func setWallClock(to date: Date) throws(TimeControlError) {
        try apply(.setWallClock(.absolute(nanosecondsSinceEpoch: try Self.nanoseconds(since1970: date))))
    }

    /// Moves every clock forward until the monotonic clock reads `instant`;
    /// nothing happens if it already does (time never goes back).
    public func advance(to instant: SessionClock.Instant) throws(TimeControlError) {
        try apply(.advanceToDeadline(nanoseconds: instant.nanoseconds, on: .monotonic))
    }

    static func nanoseconds(since1970 date: Date) throws(TimeControlError) -> Int64 {
        let nanoseconds = (date.timeIntervalSince1970 * 1e9).rounded()
        guard nanoseconds.isFinite, nanoseconds >= Double(TC_INSTANT_MIN), nanoseconds <= Double(TC_INSTANT_MAX) else {
            throw .invalidInput(FormatError(kind: "AT", value: "\(date)", reason: "outside the supported range \(TimeFormats.supportedRange)"))
        }
        return Int64(nanoseconds)
    }

    /// Moves every clock forward by `duration` (`tick`). Negative durations are refused.
    public func advance(by duration: Duration) throws(TimeControlError) {
        try apply(.advance(nanoseconds: try Self.nonNegativeNanoseconds(duration)))
    }

    /// Moves the wall clock to a target (`set AT`); monotonic clocks are untouched.
    public func setWallClock(to target: WallClockTarget) throws(TimeControlError) {
        try apply(.setWallClock(target))
    }

    /// Puts the wall clock back on real time at rate 1 (`reset`).
    public func reset() throws(TimeControlError) {
        try apply(.reset)
    }

    static func nonNegativeNanoseconds(_ duration: Duration) throws(TimeControlError) -> Int64 {
        let (seconds, attoseconds) = duration.components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        let (total, overflow2) = scaled.addingReportingOverflow(attoseconds / 1_000_000_000)
        guard !overflow, !overflow2 else {
            throw .invalidInput(FormatError(kind: "DURATION", value: "\(duration)", reason: "too large (at most about 292 years)"))
        }
        guard total >= 0 else {
            throw .invalidInput(FormatError(kind: "DURATION", value: "\(duration)", reason: "negative durations are refused (monotonic time cannot go back)"))
        }
        return total
    }

    // MARK: Reading

    /// The session's virtual wall clock now, in nanoseconds since the epoch.
    public var wallClockNanoseconds: Int64 { mapping.read(.realtime) }

    /// The session's virtual `CLOCK_MONOTONIC` now, in nanoseconds.
    public var monotonicNanoseconds: Int64 { mapping.read(.monotonic) }

    /// The session's monotonic time now, as an instant of its ``clock``.
    public var now: SessionClock.Instant { SessionClock.Instant(nanoseconds: monotonicNanoseconds) }

    /// The session's wall clock now.
    public var date: Date { Date(timeIntervalSince1970: Double(wallClockNanoseconds) / 1e9) }

    /// A `Clock` on this session's timeline, for code in this process.
    public var clock: SessionClock { SessionClock(session: self) }

    /// The session's wall clock, for code under test that is handed its
    /// notion of "now" (a `now: Date` property, a `() -> Date` provider):
    /// the wall-clock counterpart of ``clock``. ``SessionWallClock/now`` is
    /// ``date``, read afresh at every call.
    ///
    /// ```swift
    /// let cache = TokenCache(now: { session.wallClock.now })
    /// try session.advance(by: .seconds(3600))   // the cache's tokens are an hour older
    /// ```
    public var wallClock: SessionWallClock { SessionWallClock(session: self) }

    /// ``date`` as a function, for code under test that takes a date
    /// provider (`var now: @Sendable () -> Date = Date.init`).
    public var dateProvider: @Sendable () -> Date { { [self] in date } }

    // MARK: Processes

    /// The variables that attach a process to this session: `LD_PRELOAD`
    /// (the shim first, then this process's own preloads) and
    /// `TIMECTL_SEGMENT`. Give them to any launcher (Foundation's `Process`,
    /// swift-subprocess, a shell) to attach what it starts.
    ///
    /// Given the `executable` the launcher will start (a path, or a name
    /// looked up in `PATH`), a sanitizer runtime it is linked with (ASan,
    /// TSan, UBSan) is preloaded before the shim, as it must be, and a musl
    /// program gets the musl build of the shim (without one it is refused);
    /// what an attached process execs later is fixed up by the shim itself.
    public func attachmentEnvironment(for executable: String? = nil) throws(TimeControlError) -> [String: String] {
        var attachment = try ShimEnvironment(session: self)
        var runtime: String? = nil
        if let executable {
            let resolved = try Spawn.resolve(executable, path: Spawn.searchPath(in: ProcessEnvironment.entries))
            let program = Program(path: resolved)
            runtime = program.sanitizerRuntime
            attachment = try attachment.fitted(to: program, as: executable)
        }
        var variables: [String: String] = [:]
        for (name, value) in attachment.variables(inheritedPreload: ProcessEnvironment.value("LD_PRELOAD"), sanitizerRuntime: runtime) {
            variables[name] = value
        }
        return variables
    }

    /// Starts `executable` (a path, or a name looked up in `PATH`) with
    /// `arguments`, attached to this session, in a process group of its own,
    /// its standard output and error captured.
    ///
    /// The process lives as long as the session object, not as long as the
    /// handle: `_ = try session.spawn("worker")` leaves it running, and
    /// ``end()``, or the release of the session object, kills its whole
    /// process group. Keep the handle to read its output or wait for it.
    ///
    /// - Parameters:
    ///   - executable: a path, or a program name looked up in `PATH`.
    ///   - arguments: its arguments (not including its name).
    ///   - environment: variables to set on top of this process's
    ///     environment (the attachment variables always win).
    ///   - workingDirectory: where it starts; this process's by default.
    /// - Throws: ``TimeControlError/cannotControl(command:reason:)`` for a
    ///   program the shim cannot control (setuid, file capabilities, another architecture), and
    ///   ``TimeControlError/commandNotFound(_:)`` when there is no such program.
    public func spawn(_ executable: String, _ arguments: [String] = [], environment: [String: String] = [:],
                      workingDirectory: String? = nil) throws(TimeControlError) -> ControlledProcess {
        let attachment = try ShimEnvironment(session: self)
        // The trait's own variables (a test's process is started with them) are not passed on.
        var entries = ProcessEnvironment.entries.filter { entry in
            !environment.keys.contains { entry.hasPrefix($0 + "=") } && !TestProcess.Variable.all.contains { entry.hasPrefix($0 + "=") }
        }
        entries += environment.map { "\($0.key)=\($0.value)" }
        let resolved = try Spawn.resolve(executable, path: Spawn.searchPath(in: entries))
        let program = try Spawn.checkControllable(resolved, as: executable)
        let fitted = try attachment.fitted(to: program, as: executable)
        let childEnvironment = fitted.environmentEntries(inheriting: entries, sanitizerRuntime: program.sanitizerRuntime)
        let started = try fitted.commandLine(for: program, executable: resolved, arguments: [executable] + arguments,
                                             as: executable)
        let process = try ControlledProcess(session: self, executable: started.executable, command: started.arguments,
                                            environment: childEnvironment, workingDirectory: workingDirectory)
        spawnedGroups.withLock { $0.append(process.pid) }
        return process
    }

    /// Whether the session's clocks stand still (rate 0).
    var isFrozen: Bool {
        var state = mapping.snapshot()
        return tc_anchors_unpack(&state).rate == 0
    }

    /// How the session's clocks run now.
    @_spi(CommandLine)
    public var pace: SessionPace {
        var state = mapping.snapshot()
        let anchors = tc_anchors_unpack(&state)
        return SessionPace(rate: anchors.rate == 0 ? nil : TimeRate(unchecked: anchors.rate), wallFrozen: anchors.rate != 0 && anchors.wall_frozen != 0)
    }

    /// Sets a session that stands frozen running at `pace` again, from where
    /// its clocks stand (nothing jumps): what `timectl run --auto-advance`
    /// does once its scheduler, which froze the session, has stopped. A
    /// session that runs already (a program changed it meanwhile) and a
    /// frozen `pace` leave it as it is. Returns whether it changed.
    @_spi(CommandLine)
    @discardableResult
    public func resume(_ pace: SessionPace) throws(TimeControlError) -> Bool {
        guard let rate = pace.rate, isFrozen else { return false }
        if pace.wallFrozen { try freezeWall() }  // first, so that the wall never moves: a frozen session's wall stands too
        try setRate(rate)
        return true
    }

    /// The state of the session now.
    public func status() -> SessionStatus {
        let header = mapping.header
        var state = mapping.snapshot()
        var anchors = tc_anchors_unpack(&state)
        let realNow = tc_real_ns(CLOCK_MONOTONIC)
        let wall = tc_anchors_value(&anchors, Int32(TC_TRACK_WALL.rawValue), realNow)
        let elapsedTrack = tc_anchors_value(&anchors, Int32(TC_TRACK_ELAPSED.rawValue), realNow)
        let processes = attachedProcesses()
        return SessionStatus(
            session: name,
            segment: segmentPath,
            wallClock: TimeFormats.formatInstant(wall),
            wallClockNanoseconds: wall,
            monotonicNanoseconds: elapsedTrack,
            elapsedNanoseconds: elapsedTrack.subtractingSaturating(header.base.0),  // base[TC_VCLOCK_MONOTONIC]
            frozen: anchors.rate == 0,
            wallFrozen: anchors.rate == 0 || anchors.wall_frozen != 0,
            rate: anchors.rate == 0 ? 0 : TimeFormats.rateFactor(anchors.rate),
            rateText: anchors.rate == 0 ? "0" : TimeFormats.formatRate(anchors.rate),
            createdAt: TimeFormats.formatInstant(header.created_realtime),
            verbsApplied: mapping.verbsApplied,
            processes: processes,
            waits: pendingWaits(),
            blocked: WaitClassifier.blockedThreads(of: processes.map(\.pid)),
            scheduler: scheduler.map { process, kind in
                SchedulerStatus(pid: process.pid, command: process.command, steps: mapping.schedulerSteps, kind: kind)
            }
        )
    }

    /// The pending waits and armed timers of the session's processes,
    /// earliest first. Entries left by processes that died are dropped (and
    /// their slots freed).
    public func pendingWaits() -> [PendingWait] {
        var buffer = mapping.makeWaitTableBuffer()
        var names = ProcessNames()
        let reading = readWaitTable(knownLive: nil, buffer: &buffer, names: &names)
        releaseWaits(reading.ownersGone)
        return reading.waits
    }

    /// What one reading of the wait table found.
    struct WaitTableReading {
        /// The waits of live threads, earliest first (then by pid and thread).
        var waits: [PendingWait]
        /// The entries of processes that are gone: nobody will end those
        /// waits, so the reader frees their slots (``releaseWaits(_:)``).
        var ownersGone: [(slot: Int32, owner: UInt64)]
    }

    /// Threads a reader has just seen alive (the scheduler's look), so that
    /// a reading of the wait table need not check them in /proc. Kept by the
    /// reader from one reading to the next, to reuse its storage.
    struct LiveThreads {
        /// Each thread as the wait table names its owner (`tc_wait_owner`).
        fileprivate var owners: Set<UInt64> = []
        fileprivate var processes: Set<Int32> = []

        mutating func removeAll() {
            owners.removeAll(keepingCapacity: true)
            processes.removeAll(keepingCapacity: true)
        }

        mutating func insert(pid: Int32, tid: Int32) {
            owners.insert(tc_wait_owner(pid, tid))
            processes.insert(pid)
        }
    }

    /// The one reading of the wait table, behind `status`, `tick --to-next`,
    /// the harness and the scheduler: the waits of live threads, and the
    /// entries of processes that are gone, for the caller to free. It frees
    /// nothing itself.
    ///
    /// Without `knownLive`, each waiting process (and thread) is checked in
    /// /proc. With the threads a reader has just seen alive, a process among
    /// them needs no check, and a thread of it that is not among them has
    /// exited: its entry is stale. So is a timerfd whose descriptor its
    /// process closed without the shim seeing it (`tc_wait_timerfd_closed`;
    /// the shim drops it at its next look). This process's own waits (its in-process
    /// sleeps, thread 0) always count. `buffer` and `names` are the
    /// caller's, kept from one reading to the next.
    func readWaitTable(knownLive: LiveThreads?, buffer: inout SegmentMapping.WaitTableBuffer,
                       names: inout ProcessNames, ownPID: Int32 = getpid()) -> WaitTableReading {
        var nowOn: [VirtualClock: Int64] = [:]
        var waits: [PendingWait] = []
        var ownersGone: [(slot: Int32, owner: UInt64)] = []
        mapping.forEachWait(using: &buffer) { slot, entry in
            let pid = tc_wait_owner_pid(entry.owner), thread = tc_wait_owner_tid(entry.owner)
            let command: String
            if let knownLive, pid == ownPID || knownLive.processes.contains(pid) {
                if pid != ownPID && thread != 0 && !knownLive.owners.contains(entry.owner) { return }
                command = names.name(of: pid)
            } else if let process = RunningProcess.ifRunning(pid: pid, registeredBoottime: entry.registered, thread: thread) {
                command = process.command
            } else {
                if kill(pid, 0) != 0 && errno == ESRCH { ownersGone.append((slot, entry.owner)) }
                return
            }
            // A timerfd its process closed with a raw close (a Go or static program's), which the shim has not seen yet.
            if entry.kind == Int32(TC_WAIT_TIMERFD.rawValue) && withUnsafePointer(to: entry, { tc_wait_timerfd_closed($0) }) != 0 {
                return
            }
            let clock = VirtualClock(segmentValue: entry.vclock)
            let now = nowOn[clock] ?? mapping.read(clock)
            nowOn[clock] = now
            waits.append(PendingWait(
                pid: pid, thread: thread, command: command, kind: PendingWait.kindName(entry.kind), virtualClock: clock,
                deadlineNanoseconds: entry.deadline, remainingNanoseconds: max(0, entry.deadline.subtractingSaturating(now)),
                slot: slot, identity: entry.identity, held: entry.held != 0))
        }
        waits.sort { ($0.remainingNanoseconds, $0.pid, $0.thread) < ($1.remainingNanoseconds, $1.pid, $1.thread) }
        return WaitTableReading(waits: waits, ownersGone: ownersGone)
    }

    /// Frees the wait slots of owners that are gone (``WaitTableReading/ownersGone``);
    /// a slot another wait took meanwhile is left alone (its owner differs).
    func releaseWaits(_ gone: [(slot: Int32, owner: UInt64)]) {
        for (slot, owner) in gone { mapping.releaseWait(slot: slot, owner: owner) }
    }

    /// Advances every clock exactly to the earliest pending deadline still
    /// ahead (`tick --to-next`), and returns the wait it reached; nil (and no
    /// change) when nothing is pending.
    @discardableResult
    public func advanceToNextDeadline() throws(TimeControlError) -> PendingWait? {
        guard let next = pendingWaits().first(where: { $0.remainingNanoseconds > 0 }) else { return nil }
        try advance(toDeadlineOf: next)
        return next
    }

    func spawnedProcessIDs() -> [Int32] { spawnedGroups.withLock { $0 } }

    /// Per attached pid, how many waits it began that were already due (the loop guard's evidence).
    func immediateWaitCounts() -> [Int32: UInt32] {
        var counts: [Int32: UInt32] = [:]
        for row in mapping.registeredProcesses() { counts[row.pid, default: 0] &+= row.immediateWaits }
        return counts
    }

    /// The processes attached to the session that are still running.
    public func attachedProcesses() -> [RunningProcess] {
        mapping.registeredProcesses().compactMap { entry in
            RunningProcess.ifRunning(pid: entry.pid, registeredBoottime: entry.registered)
        }.sorted { $0.pid < $1.pid }
    }

    // MARK: Removal

    /// Removes the session's segment. Attached processes keep the timeline
    /// they have mapped, running at real speed from where it stands (so no
    /// wait of theirs is left frozen forever); new processes can no longer
    /// attach to it.
    public func remove(force: Bool = false) throws(TimeControlError) {
        let attached = attachedProcesses()
        if !attached.isEmpty && !force {
            throw .sessionInUse(name: name, pids: attached.map(\.pid))
        }
        if !attached.isEmpty { try resume() }
        mapping.markRemoved()
        try Self.unlinkSegment(path: segmentPath)
    }

    /// Removes a session's segment file without opening it, for a segment
    /// that cannot be trusted (SPEC §7) or whose session is gone.
    public static func removeUnchecked(named name: String, in directory: SessionDirectory = SessionDirectory()) throws(TimeControlError) {
        try SessionDirectory.validate(name: name)
        let path = directory.segmentPath(for: name)
        guard let descriptor = try directory.open(create: false) else { throw .sessionNotFound(name: name, path: path) }
        try? descriptor.close()
        try unlinkSegment(path: path)
    }

    private static func unlinkSegment(path: String) throws(TimeControlError) {
        guard unlink(path) == 0 else {
            if errno == ENOENT { return }
            throw .system(call: "unlink", path: path, errno: Errno(rawValue: errno))
        }
    }
}

/// How a session's clocks run: at a rate, or frozen; and whether its wall
/// clock alone stands still (`freeze --wall`).
@_spi(CommandLine)
public struct SessionPace: Sendable, Hashable {
    /// The rate of its clocks; nil when it is frozen.
    public var rate: TimeRate?
    /// Whether the wall clock stands still while the monotonic clocks run at ``rate``.
    public var wallFrozen: Bool

    public init(rate: TimeRate?, wallFrozen: Bool = false) {
        self.rate = rate
        self.wallFrozen = wallFrozen
    }

    /// Frozen: every clock stands still.
    public static let frozen = SessionPace(rate: nil)
}

/// The wall clock of a session (``TimeSession/wallClock``): what
/// `CLOCK_REALTIME` — `Date()` in an attached process — reads on its timeline.
public struct SessionWallClock: Sendable {
    /// The session whose wall clock this is.
    public let session: TimeSession

    /// The wall clock of `session` (the same as `session.wallClock`).
    public init(session: TimeSession) {
        self.session = session
    }

    /// The session's wall clock now.
    public var now: Date { session.date }
}
