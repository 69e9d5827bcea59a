#if canImport(Glibc)
import Glibc
#endif
import SystemPackage
import TimeShimC

/// A recorded trace (SPEC §5): every clock reading and every wait the
/// processes of one run saw, per process and per thread, read from a file
/// `timectl record` wrote. The format is documented in `docs/trace.md`.
///
/// A process is named by its place in the process tree — the command is
/// `1`, its second child `1.2` — and an exec starts a new image of the
/// same process; threads are numbered in the order their process created
/// them, the main thread being 0.
public struct Trace: Sendable, Encodable {
    /// One image of one process.
    public struct Process: Sendable, Encodable, Hashable {
        /// Its place in the process tree: `1`, `1.2`, `1.2.1`.
        public var path: String
        /// 1 for the process as started (or forked), one more for each exec.
        public var image: Int
        /// Its pid when it was recorded (for people: a replay's pids differ).
        public var pid: Int32
        /// Its arguments.
        public var arguments: [String]
        /// Its threads, by number.
        public var threads: [Thread]
    }

    /// The events of one thread, in order.
    public struct Thread: Sendable, Encodable, Hashable {
        /// 0 for the main thread, then in the order the process created them.
        public var number: Int
        /// Everything it read and waited for.
        public var events: [TraceEvent]
    }

    /// When the recording began (real wall clock, ns since the epoch).
    public var recordedAt: Int64
    /// Every process image, in the order of their paths.
    public var processes: [Process]
    /// The size of the file in bytes.
    public var fileSize: Int

    init(recordedAt: Int64, processes: [Process], fileSize: Int) {
        self.recordedAt = recordedAt
        self.processes = processes
        self.fileSize = fileSize
    }

    /// Reads and checks the trace at `path`: a file that is missing,
    /// truncated, altered (its checksum) or of another format version is
    /// refused with ``TimeControlError/untrustedTrace(path:problem:)``.
    public init(contentsOf path: String) throws(TimeControlError) {
        let bytes = try Self.contents(of: path)
        try Self.validate(bytes, path: path)
        self = try bytes.withUnsafeBytes { raw in
            Result { () throws(TimeControlError) -> Trace in try Self.decode(raw, path: path) }
        }.get()
    }

    /// Checks the trace at `path` without decoding it (what `timectl replay` does before it runs anything).
    public static func validate(path: String) throws(TimeControlError) {
        try validate(try contents(of: path), path: path)
    }

    static func validate(_ bytes: [UInt8], path: String) throws(TimeControlError) {
        var version: UInt32 = 0
        let problem = bytes.withUnsafeBufferPointer { tc_trace_validate($0.baseAddress, UInt64($0.count), 1, &version) }
        guard let problem else { return }
        if version != TC_TRACE_VERSION && String(cString: problem).contains("version") {
            throw .untrustedTrace(path: path, problem: "has trace format version \(version); this timectl reads versions \(TC_TRACE_OLDEST_VERSION)–\(TC_TRACE_VERSION)")
        }
        throw .untrustedTrace(path: path, problem: String(cString: problem))
    }

    static func contents(of path: String) throws(TimeControlError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { throw .untrustedTrace(path: path, problem: "does not exist") }
            throw .system(call: "open", path: path, errno: Errno(rawValue: errno))
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            throw .untrustedTrace(path: path, problem: "is not a regular file")
        }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + offset, $0.count - offset, off_t(offset)) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw .system(call: "read", path: path, errno: Errno(rawValue: errno)) }
            offset += count
        }
        return bytes
    }

    private static func decode(_ raw: UnsafeRawBufferPointer, path: String) throws(TimeControlError) -> Trace {
        let header = raw.loadUnaligned(as: tc_trace_header.self)
        let strings = Int(header.strings_offset)
        func text(_ offset: UInt64, _ length: UInt32) -> String {
            String(decoding: raw[(strings + Int(offset))..<(strings + Int(offset) + Int(length))], as: UTF8.self)
        }
        func arguments(_ offset: UInt64, _ length: UInt32) -> [String] {
            raw[(strings + Int(offset))..<(strings + Int(offset) + Int(length))]
                .split(separator: 0, omittingEmptySubsequences: false).dropLast().map { String(decoding: $0, as: UTF8.self) }
        }
        var processes: [Process] = []
        for index in 0..<Int(header.process_count) {
            let entry = raw.loadUnaligned(fromByteOffset: Int(header.processes_offset) + index * MemoryLayout<tc_trace_process>.stride,
                                          as: tc_trace_process.self)
            var threads: [Thread] = []
            for streamIndex in Int(entry.first_stream)..<Int(entry.first_stream + entry.stream_count) {
                let stream = raw.loadUnaligned(fromByteOffset: Int(header.streams_offset) + streamIndex * MemoryLayout<tc_trace_stream>.stride,
                                               as: tc_trace_stream.self)
                let start = Int(header.data_offset) + Int(stream.data_offset)
                var events: [TraceEvent] = []
                events.reserveCapacity(Int(stream.events))
                var decoder = tc_decoder()
                var event = tc_event()
                var outcome: Int32 = 0
                raw.withMemoryRebound(to: UInt8.self) { bytes in
                    decoder.next = UnsafePointer(bytes.baseAddress! + start)
                    decoder.end = decoder.next + Int(stream.data_length)
                    while true {
                        outcome = tc_decode_event(&decoder, &event)
                        guard outcome == 1 else { break }
                        events.append(TraceEvent(event))
                    }
                }
                if outcome < 0 || events.count != Int(stream.events) {
                    throw .untrustedTrace(path: path, problem: "has a damaged event stream (process \(text(entry.path_offset, entry.path_length)), thread \(stream.thread))")
                }
                threads.append(Thread(number: Int(stream.thread), events: events))
            }
            processes.append(Process(path: text(entry.path_offset, entry.path_length), image: Int(entry.image), pid: entry.pid,
                                     arguments: arguments(entry.argv_offset, entry.argv_length), threads: threads))
        }
        return Trace(recordedAt: header.recorded_at, processes: processes, fileSize: raw.count)
    }

    /// The command the recording ran: the arguments of process `1`, as started.
    public var command: [String] {
        processes.first { $0.path == "1" && $0.image == 1 }?.arguments ?? []
    }

    /// The number of clock readings in the trace.
    public var readingCount: Int {
        processes.reduce(0) { $0 + $1.threads.reduce(0) { $0 + $1.events.filter(\.isReading).count } }
    }
}

/// One event of a recorded thread.
public enum TraceEvent: Sendable, Hashable, Encodable, CustomStringConvertible {
    /// A clock reading: the entry point, the clock id, and the value returned (ns).
    case reading(call: TraceCall, clock: Int32, nanoseconds: Int64)
    /// A wait with a virtual deadline began: what kind, on which session clock, until when (ns).
    case waitBegan(kind: String, clock: String, deadlineNanoseconds: Int64)
    /// That wait returned, at `nanoseconds` on its clock, at its deadline or before.
    case waitEnded(clock: String, nanoseconds: Int64, reachedDeadline: Bool)
    /// The thread set the session's wall clock (`clock_settime`, `settimeofday`, `adjtimex` …) to `nanoseconds`
    /// since the epoch (trace format 2).
    case wallClockSet(call: TraceCall, nanoseconds: Int64)

    init(_ event: tc_event) {
        switch UInt32(event.type) {
        case TC_EVENT_READ.rawValue:
            self = .reading(call: TraceCall(rawValue: Int(event.detail)) ?? .clockGettime, clock: event.clock, nanoseconds: event.value)
        case TC_EVENT_WAIT_BEGIN.rawValue:
            self = .waitBegan(kind: PendingWait.kindName(Int32(event.detail)), clock: VirtualClock(segmentValue: event.vclock).name,
                              deadlineNanoseconds: event.value)
        case TC_EVENT_SET_WALL.rawValue:
            self = .wallClockSet(call: TraceCall(rawValue: Int(event.detail)) ?? .clockSettime, nanoseconds: event.value)
        default:
            self = .waitEnded(clock: VirtualClock(segmentValue: event.vclock).name, nanoseconds: event.value,
                              reachedDeadline: event.detail == TC_WAIT_REACHED_DEADLINE.rawValue)
        }
    }

    var isReading: Bool {
        if case .reading = self { return true }
        return false
    }

    private enum Key: String, CodingKey {
        case type, call, clock, kind, nanoseconds, deadlineNanoseconds, reachedDeadline
    }

    /// Flat, for programs: `{"type": "reading", "call": "clock_gettime", "clock": "CLOCK_MONOTONIC", "nanoseconds": …}`,
    /// `{"type": "wait", "kind": "sleep", "clock": …, "deadline_nanoseconds": …}`, `{"type": "wait-end", …}`,
    /// `{"type": "set-wall-clock", "call": "clock_settime", "nanoseconds": …}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        switch self {
        case .reading(let call, let clock, let value):
            try container.encode("reading", forKey: .type)
            try container.encode(call.name, forKey: .call)
            try container.encode(TraceEvent.clockName(clock), forKey: .clock)
            try container.encode(value, forKey: .nanoseconds)
        case .waitBegan(let kind, let clock, let deadline):
            try container.encode("wait", forKey: .type)
            try container.encode(kind, forKey: .kind)
            try container.encode(clock, forKey: .clock)
            try container.encode(deadline, forKey: .deadlineNanoseconds)
        case .waitEnded(let clock, let value, let reached):
            try container.encode("wait-end", forKey: .type)
            try container.encode(clock, forKey: .clock)
            try container.encode(value, forKey: .nanoseconds)
            try container.encode(reached, forKey: .reachedDeadline)
        case .wallClockSet(let call, let value):
            try container.encode("set-wall-clock", forKey: .type)
            try container.encode(call.name, forKey: .call)
            try container.encode(value, forKey: .nanoseconds)
        }
    }

    /// For people: `clock_gettime(CLOCK_MONOTONIC) = 12.000000001`.
    public var description: String {
        switch self {
        case .reading(let call, let clock, let value):
            return "\(call.describing(clock: clock)) = \(TraceEvent.format(value, clock: clock))"
        case .waitBegan(let kind, let clock, let deadline):
            return "\(kind) on \(clock) until \(TraceEvent.format(deadline, clockName: clock))"
        case .waitEnded(let clock, let value, let reached):
            return "… returned at \(TraceEvent.format(value, clockName: clock))\(reached ? "" : ", before its deadline")"
        case .wallClockSet(let call, let value):
            return "\(call.describingSetting()) set the wall clock to \(TimeFormats.formatInstant(value))"
        }
    }

    /// Wall-clock values as instants, the others as seconds.
    static func format(_ nanoseconds: Int64, clock: Int32) -> String {
        let vclock = tc_trace_vclock_of_clock(clock)
        return format(nanoseconds, clockName: VirtualClock(segmentValue: vclock).name)
    }

    static func format(_ nanoseconds: Int64, clockName: String) -> String {
        if VirtualClock(named: clockName)?.isWall == true { return TimeFormats.formatInstant(nanoseconds) }
        return TimeFormats.formatSeconds(nanoseconds, decimals: 9)
    }

    /// The names of the clock ids the shim records.
    static func clockName(_ clock: Int32) -> String {
        switch clock {
        case 0: return "CLOCK_REALTIME"
        case 1: return "CLOCK_MONOTONIC"
        case 4: return "CLOCK_MONOTONIC_RAW"
        case 5: return "CLOCK_REALTIME_COARSE"
        case 6: return "CLOCK_MONOTONIC_COARSE"
        case 7: return "CLOCK_BOOTTIME"
        case 8: return "CLOCK_REALTIME_ALARM"
        case 9: return "CLOCK_BOOTTIME_ALARM"
        case 11: return "CLOCK_TAI"
        default: return "clock \(clock)"
        }
    }
}

/// The libc entry point a reading, or a setting of the wall clock, came through.
public enum TraceCall: Int, Sendable, Hashable, Codable, CaseIterable {
    case clockGettime = 1, gettimeofday, time, timespecGet, ftime, ntpGettime, syscall
    case clockSettime = 8, settimeofday, stime, adjtimex, clockAdjtime, adjtime

    /// The C name: `clock_gettime`, `gettimeofday`, …
    public var name: String {
        switch self {
        case .clockGettime: return "clock_gettime"
        case .gettimeofday: return "gettimeofday"
        case .time: return "time"
        case .timespecGet: return "timespec_get"
        case .ftime: return "ftime"
        case .ntpGettime: return "ntp_gettime"
        case .syscall: return "syscall"
        case .clockSettime: return "clock_settime"
        case .settimeofday: return "settimeofday"
        case .stime: return "stime"
        case .adjtimex: return "adjtimex"
        case .clockAdjtime: return "clock_adjtime"
        case .adjtime: return "adjtime"
        }
    }

    /// `clock_settime(CLOCK_REALTIME)`, `adjtimex()`, `syscall(…)` (one of the clock-setting system calls).
    func describingSetting() -> String {
        switch self {
        case .clockSettime: return "clock_settime(CLOCK_REALTIME)"
        case .clockAdjtime: return "clock_adjtime(CLOCK_REALTIME)"
        case .syscall: return "syscall(…)"
        default: return "\(name)()"
        }
    }

    /// `clock_gettime(CLOCK_MONOTONIC)`, `time()`, `syscall(SYS_clock_gettime, CLOCK_REALTIME)`.
    func describing(clock: Int32) -> String {
        switch self {
        case .clockGettime: return "clock_gettime(\(TraceEvent.clockName(clock)))"
        case .gettimeofday: return "gettimeofday()"
        case .time: return "time()"
        case .timespecGet: return "timespec_get(TIME_UTC)"
        case .ftime: return "ftime()"
        case .ntpGettime: return "ntp_gettime()"
        case .syscall: return "syscall(SYS_clock_gettime, \(TraceEvent.clockName(clock)))"
        default: return describingSetting()
        }
    }
}

/// Counts over a trace, for `timectl trace stats`.
public struct TraceStatistics: Sendable, Hashable, Encodable {
    /// One process image's counts.
    public struct ProcessCounts: Sendable, Hashable, Encodable {
        /// Its place in the tree.
        public var path: String
        /// Its image number.
        public var image: Int
        /// Its arguments.
        public var arguments: [String]
        /// Its threads.
        public var threads: Int
        /// Its clock readings.
        public var readings: Int
        /// Its waits.
        public var waits: Int
    }

    /// The size of the trace file.
    public var bytes: Int
    /// When the recording began (real wall clock, ns since the epoch).
    public var recordedAt: Int64
    /// Process images.
    public var processes: Int
    /// Threads, over all images.
    public var threads: Int
    /// Clock readings.
    public var readings: Int
    /// Waits.
    public var waits: Int
    /// Bytes of the file per reading (0 without readings).
    public var bytesPerReading: Double
    /// Readings per clock name.
    public var readingsByClock: [String: Int]
    /// Readings per entry point.
    public var readingsByCall: [String: Int]
    /// Waits per kind.
    public var waitsByKind: [String: Int]
    /// Settings of the wall clock.
    public var wallClockSets: Int
    /// Per process image.
    public var perProcess: [ProcessCounts]

    /// Counts `trace`.
    public init(_ trace: Trace) {
        bytes = trace.fileSize
        recordedAt = trace.recordedAt
        processes = trace.processes.count
        threads = 0
        readings = 0
        waits = 0
        readingsByClock = [:]
        readingsByCall = [:]
        waitsByKind = [:]
        wallClockSets = 0
        perProcess = []
        for process in trace.processes {
            var counts = ProcessCounts(path: process.path, image: process.image, arguments: process.arguments,
                                       threads: process.threads.count, readings: 0, waits: 0)
            for thread in process.threads {
                for event in thread.events {
                    switch event {
                    case .reading(let call, let clock, _):
                        counts.readings += 1
                        readingsByClock[TraceEvent.clockName(clock), default: 0] += 1
                        readingsByCall[call.name, default: 0] += 1
                    case .waitBegan(let kind, _, _):
                        counts.waits += 1
                        waitsByKind[kind, default: 0] += 1
                    case .waitEnded:
                        break
                    case .wallClockSet:
                        wallClockSets += 1
                    }
                }
            }
            threads += counts.threads
            readings += counts.readings
            waits += counts.waits
            perProcess.append(counts)
        }
        bytesPerReading = readings > 0 ? Double(bytes) / Double(readings) : 0
    }
}
