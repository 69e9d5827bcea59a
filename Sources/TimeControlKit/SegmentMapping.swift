#if canImport(Glibc)
import Glibc
#endif
import SystemPackage
import TimeShimC

/// A session segment mapped into this process. The layout, validation and
/// the writer protocol are the C layer's (Sources/TimeShimC); this class
/// owns the mapping and turns C failures into typed errors.
final class SegmentMapping: @unchecked Sendable {
    // @unchecked: the pointer is immutable; the memory behind it is shared
    // between processes and only accessed through the C layer's atomics.
    let segment: UnsafeMutablePointer<tc_segment>
    let path: String
    private let mapping: tc_mapping

    /// How long a verb waits for another writer before giving up.
    static let lockTimeoutNanoseconds: Int64 = 10_000_000_000

    private init(_ mapping: tc_mapping, path: String) {
        self.mapping = mapping
        self.segment = mapping.segment
        self.path = path
    }

    deinit {
        var mapping = self.mapping
        tc_segment_unmap(&mapping)
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
        return SegmentMapping(mapping, path: path)
    }

    /// Creates the segment at real time; nil if another process created it first.
    static func create(directory: FileDescriptor, name: String, fileName: String, path: String) throws(TimeControlError) -> SegmentMapping? {
        var mapping = tc_mapping()
        var failure = tc_failure()
        guard tc_segment_create(directory.rawValue, name, fileName, &mapping, &failure) == 0 else {
            if failure.result == Int32(TC_E_EXISTS.rawValue) { return nil }
            throw TimeControlError(failure, path: path)
        }
        return SegmentMapping(mapping, path: path)
    }

    var header: tc_segment_header { segment.pointee.header }

    /// Applies a verb under the writer lock; returns the published state.
    func apply(_ verb: tc_verb, describedAs name: @autoclosure () -> String) throws(TimeControlError) -> tc_clock_state {
        var failure = tc_failure()
        guard tc_segment_lock(segment, Self.lockTimeoutNanoseconds, &failure) == 0 else {
            throw TimeControlError(failure, path: path)
        }
        defer { tc_segment_unlock(segment) }
        var verb = verb
        var published = tc_clock_state()
        let result = tc_segment_apply(segment, &verb, &published)
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
    func read(_ clock: tc_vclock) -> Int64 {
        tc_segment_read(segment, Int32(clock.rawValue))
    }

    func markRemoved() {
        tc_segment_mark_removed(segment)
    }

    /// The wait-table entries in use, with their slot numbers.
    func waitEntries() -> [(slot: UInt32, entry: tc_wait_slot)] {
        var entries: [(slot: UInt32, entry: tc_wait_slot)] = []
        for slot in 0..<segment.pointee.header.wait_capacity {
            var entry = tc_wait_slot()
            if tc_wait_read(segment, slot, &entry) != 0 { entries.append((slot, entry)) }
        }
        return entries
    }

    /// Frees a wait-table slot left by a process that died without freeing it.
    func releaseWait(slot: UInt32, owner: UInt64) {
        tc_wait_release(segment, Int32(slot), owner)
    }

    /// The process-table entries in use: pid, registration time on
    /// CLOCK_BOOTTIME, and how many waits it began that were already due.
    func registeredProcesses() -> [(pid: Int32, registered: Int64, immediateWaits: UInt32)] {
        let capacity = Int(segment.pointee.header.proc_capacity)
        return [tc_proc_slot](unsafeUninitializedCapacity: capacity) { buffer, count in
            count = Int(tc_proc_collect(segment, buffer.baseAddress, UInt32(capacity)))
        }.map { ($0.pid, $0.registered, $0.immediate_waits) }
    }
}
