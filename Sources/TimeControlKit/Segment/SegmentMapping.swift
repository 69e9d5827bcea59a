#if canImport(Glibc)
import Glibc
#endif
import SystemPackage
import TimeShimC

/// A session segment mapped into this process: the only Swift code that
/// touches the mapped segment. The layout, validation and the writer
/// protocol are the C layer's (Sources/TimeShimC); this class owns the
/// mapping, reaches the segment only through the C layer's atomic
/// operations, and turns C failures into typed errors. Everything else in
/// TimeControlKit — the session, its clock, the scheduler, the harness —
/// goes through the methods below.
final class SegmentMapping: @unchecked Sendable {
    // @unchecked: the pointer is immutable; the memory behind it is shared
    // between processes and only accessed through the C layer's atomics.
    private let segment: UnsafeMutablePointer<tc_segment>
    let path: String
    private let mapping: tc_mapping
    /// The segment's file, read-only, for the file-time boundary of each verb (`tc_file_time_boundary`); −1 if
    /// it could not be opened (verbs then mark their real instant, as the shim's own do).
    private let file: Int32

    /// How long a verb waits for another writer before giving up.
    static let lockTimeoutNanoseconds: Int64 = 10_000_000_000

    private init(_ mapping: tc_mapping, path: String, directory: FileDescriptor, fileName: String) {
        self.mapping = mapping
        self.segment = mapping.segment
        self.path = path
        file = openat(directory.rawValue, fileName, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY)
    }

    deinit {
        var mapping = self.mapping
        tc_segment_unmap(&mapping)
        if file >= 0 { close(file) }
    }

    /// Maps the segment `fileName` in `directory`; nil if it does not exist.
    static func open(directory: FileDescriptor, fileName: String, path: String) throws(TimeControlError) -> SegmentMapping? {
        tc_realclock_init()
        var mapping = tc_mapping()
        var failure = tc_failure()
        guard tc_segment_open(directory.rawValue, fileName, &mapping, &failure) == 0 else {
            if failure.result == Int32(TC_E_MISSING.rawValue) { return nil }
            throw TimeControlError(failure, path: path)
        }
        return SegmentMapping(mapping, path: path, directory: directory, fileName: fileName)
    }

    /// Creates the segment, its clocks at real time or, with `pinnedAt`, its monotonic clocks starting at that
    /// many nanoseconds (`tc_segment_create`); nil if another process created it first.
    static func create(directory: FileDescriptor, name: String, fileName: String, path: String,
                       pinnedAt origin: Int64? = nil) throws(TimeControlError) -> SegmentMapping? {
        var mapping = tc_mapping()
        var failure = tc_failure()
        let created: Int32
        if var origin {
            created = tc_segment_create(directory.rawValue, name, fileName, &origin, &mapping, &failure)
        } else {
            created = tc_segment_create(directory.rawValue, name, fileName, nil, &mapping, &failure)
        }
        guard created == 0 else {
            if failure.result == Int32(TC_E_EXISTS.rawValue) { return nil }
            throw TimeControlError(failure, path: path)
        }
        return SegmentMapping(mapping, path: path, directory: directory, fileName: fileName)
    }

    /// The header: written once at creation and validated when the segment was opened.
    var header: tc_segment_header { segment.pointee.header }

    // MARK: The timeline

    /// Applies a verb under the writer lock; returns the published state.
    /// `makeVerb` is called under the lock: a verb made from a clock's
    /// reading (a time of day on the current date) sees no other verb come
    /// between the reading and its own application.
    func apply(describedAs name: @autoclosure () -> String, _ makeVerb: () -> tc_verb) throws(TimeControlError) -> tc_clock_state {
        var failure = tc_failure()
        guard tc_segment_lock(segment, Self.lockTimeoutNanoseconds, &failure) == 0 else {
            throw TimeControlError(failure, path: path)
        }
        defer { tc_segment_unlock(segment) }
        var verb = makeVerb()
        var published = tc_clock_state()
        let result = tc_segment_apply_bounded(segment, &verb, tc_file_time_boundary(file), &published)
        switch result {
        case 0: return published
        case Int32(TC_E_RANGE.rawValue): throw .outOfRange(verb: name())
        default:
            throw .untrustedSegment(path: path, problem: String(cString: tc_result_phrase(result)))
        }
    }

    func snapshot() -> tc_clock_state {
        var state = tc_clock_state()
        tc_segment_snapshot(segment, &state)
        return state
    }

    /// What a session clock reads now: the shim's own read path.
    func read(_ clock: VirtualClock) -> Int64 {
        tc_segment_read(segment, clock.rawValue)
    }

    /// The rate `clock` runs at now (fixed point; 0 while it stands still),
    /// for converting a wait on it to real time with `tc_real_wait_ns`.
    func rate(of clock: VirtualClock) -> UInt64 {
        tc_segment_clock_rate(segment, clock.rawValue)
    }

    func markRemoved() {
        tc_segment_mark_removed(segment)
    }

    // MARK: Counters, for status

    /// Verbs applied since the session was created (by any process: an atomic load).
    var verbsApplied: UInt64 { tc_word_load_u64(&segment.pointee.verbs_applied) }

    /// Steps the session's scheduler has taken since it claimed the session (an atomic load).
    var schedulerSteps: UInt64 { tc_word_load_u64(&segment.pointee.scheduler_steps) }

    // MARK: The scheduler's claim

    /// Who claims to be the session's scheduler, as the segment says: its
    /// pid (0: none), its start time in clock ticks after boot, and its kind.
    struct SchedulerClaim {
        var pid: Int32
        var started: UInt64
        var kind: SchedulerKind
    }

    /// The scheduler's claim. The pid is loaded first: a scheduler that
    /// ends clears its start time and kind before its pid.
    var schedulerClaim: SchedulerClaim {
        let pid = tc_word_load_i32(&segment.pointee.scheduler_pid)
        let started = tc_word_load_u64(&segment.pointee.scheduler_started)
        let kind = SchedulerKind(tc_word_load(&segment.pointee.scheduler_kind))
        return SchedulerClaim(pid: pid, started: started, kind: kind)
    }

    /// Claims the session for the scheduler `pid` (started at `started`
    /// clock ticks after boot): 0 when it now owns it, else the pid that does.
    func claimScheduler(pid: Int32, started: UInt64, kind: SchedulerKind) -> Int32 {
        tc_scheduler_claim(segment, pid, started, kind.raw)
    }

    /// Ends `pid`'s claim, if it still holds one.
    func releaseScheduler(pid: Int32) {
        tc_scheduler_release(segment, pid)
    }

    /// Counts one step of the owning scheduler.
    func countSchedulerStep() {
        tc_scheduler_count_step(segment)
    }

    // MARK: The wait table

    /// Lists a wait of `pid`'s thread `thread` (0: the process's own, as an
    /// in-process sleep or a timer) in the wait table; returns its slot, or
    /// −1 when the table is full (the wait still works, it is only not listed).
    func claimWait(pid: Int32, thread: Int32, kind: tc_wait_kind, clock: VirtualClock, deadline: Int64) -> Int32 {
        tc_wait_claim(segment, pid, thread, Int32(kind.rawValue), clock.rawValue, deadline, tc_real_ns(CLOCK_BOOTTIME),
                      tc_mix64(UInt64(UInt32(bitPattern: pid)), UInt64(UInt32(bitPattern: thread))))
    }

    // MARK: A seeded run's order (SPEC §11)

    /// The seed waits due together are ordered by (0: none), and the jitter that stretches each wait (a fraction × 2^32).
    var seed: UInt64 { tc_segment_seed(segment) }

    func setOrder(seed: UInt64, jitter: UInt64) {
        tc_segment_set_order(segment, seed, jitter)
    }

    /// Holds the wait in `slot` (if `owner` still has it): once due it waits until ``releaseHeld(slot:)``.
    func hold(slot: Int32, owner: UInt64) -> Bool {
        tc_wait_hold(segment, UInt32(slot), owner) != 0
    }

    /// Lets the held wait in `slot` end, and wakes it.
    func releaseHeld(slot: Int32) {
        tc_wait_release_held(segment, UInt32(slot))
    }

    /// Frees a wait-table slot, if `owner` (`tc_wait_owner(pid, thread)`) still holds it.
    func releaseWait(slot: Int32, owner: UInt64) {
        tc_wait_release(segment, slot, owner)
    }

    /// Room to read the whole wait table into, kept by a reader that reads it often.
    struct WaitTableBuffer {
        fileprivate var entries: [tc_wait_slot]
        fileprivate var slots: [UInt32]
    }

    func makeWaitTableBuffer() -> WaitTableBuffer {
        let capacity = Int(header.wait_capacity)
        return WaitTableBuffer(entries: Array(repeating: tc_wait_slot(), count: capacity),
                               slots: Array(repeating: 0, count: capacity))
    }

    /// The one reader of the wait table: calls `body` with each entry in
    /// use and its slot, found in one pass over the table's bitmap. Entries
    /// being filled in, and entries of an unknown kind or clock or an
    /// impossible pid (a damaged table), are skipped.
    func forEachWait(using buffer: inout WaitTableBuffer, _ body: (_ slot: Int32, _ entry: tc_wait_slot) -> Void) {
        let count = Int(buffer.entries.withUnsafeMutableBufferPointer { entries in
            buffer.slots.withUnsafeMutableBufferPointer { slots in
                tc_wait_collect(segment, entries.baseAddress, slots.baseAddress, UInt32(entries.count))
            }
        })
        for index in 0..<count { body(Int32(buffer.slots[index]), buffer.entries[index]) }
    }

    /// Counts this process among the watchers of `wait_changes`, so that
    /// every wait beginning or ending wakes ``waitForChange(of:from:orOf:from:realNanoseconds:)``.
    /// Each call is matched by one ``stopWatchingWaits()``.
    func startWatchingWaits() {
        tc_segment_watch_waits(segment, 1)
    }

    func stopWatchingWaits() {
        tc_segment_watch_waits(segment, 0)
    }

    // MARK: Futex words

    /// The segment's futex words.
    enum SharedWord {
        /// Bumped by every verb.
        case generation
        /// Bumped when a wait begins or ends (it wakes only while someone watches: ``startWatchingWaits()``).
        case waitChanges
    }

    func address(of word: SharedWord) -> UnsafeMutablePointer<UInt32> {
        switch word {
        case .generation: return tc_generation_word(segment)
        case .waitChanges: return tc_wait_changes_word(segment)
        }
    }

    /// The word's value now (an acquire load).
    func load(_ word: SharedWord) -> UInt32 {
        tc_word_load(address(of: word))
    }

    /// Blocks until `word` no longer holds `value`, the process-private
    /// `local` word (if any) no longer holds `localValue`, `realNanoseconds`
    /// pass (< 0, or more than a year: a year), or a signal arrives.
    func waitForChange(of word: SharedWord, from value: UInt32, orOf local: UnsafePointer<UInt32>? = nil, from localValue: UInt32 = 0,
                       realNanoseconds: Int64) {
        _ = tc_segment_wait_for_change(segment, address(of: word), value, local, localValue, realNanoseconds)
    }

    // MARK: The process table

    /// The process-table entries in use: pid, registration time on
    /// CLOCK_BOOTTIME, and how many waits it began that were already due.
    func registeredProcesses() -> [(pid: Int32, registered: Int64, immediateWaits: UInt32)] {
        var entries: [tc_proc_slot] = []
        let count = collectProcesses(into: &entries)
        return entries[..<count].map { ($0.pid, $0.registered, $0.immediate_waits) }
    }

    /// The same into `entries` (grown to the table's capacity, then reused), for a reader that looks many
    /// times a second: how many of them are in use.
    func collectProcesses(into entries: inout [tc_proc_slot]) -> Int {
        let capacity = Int(segment.pointee.header.proc_capacity)
        if entries.count < capacity { entries = Array(repeating: tc_proc_slot(), count: capacity) }
        return entries.withUnsafeMutableBufferPointer { buffer in
            Int(tc_proc_collect(segment, buffer.baseAddress, UInt32(buffer.count)))
        }
    }
}
