#if canImport(Glibc)
import Glibc
#endif
import SystemPackage
import TimeShimC

/// What ``TraceRecorder/record(_:into:session:replacing:autoAdvancing:maxSteps:environment:)`` recorded.
public struct RecordingSummary: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The command's exit status (128+N if it was killed by signal N).
    public var status: Int32
    /// Process images recorded.
    public var processes: Int
    /// Threads recorded, over all images.
    public var threads: Int
    /// Clock readings recorded.
    public var readings: Int
    /// Waits recorded.
    public var waits: Int
    /// Events that found no room (a raw file could not grow): the trace lacks them.
    public var lostEvents: Int
    /// The size of the trace file.
    public var bytes: Int

    /// One line for people.
    public var description: String {
        var text = "\(processes) process\(processes == 1 ? "" : "es"), \(threads) thread\(threads == 1 ? "" : "s"), "
            + "\(readings) reading\(readings == 1 ? "" : "s") and \(waits) wait\(waits == 1 ? "" : "s") in \(bytes) bytes"
        if lostEvents > 0 { text += "; \(lostEvents) events were lost (no room to record them)" }
        return text
    }
}

/// `timectl record`: runs a command attached to a session with every
/// process recording what it reads and waits for, then builds the trace.
public enum TraceRecorder {
    /// Runs `command` attached to `session`, recording it, and writes the
    /// trace to `tracePath` (atomically: the file appears complete, or not
    /// at all). Processes of the command that outlive it are recorded up
    /// to the moment it exits.
    ///
    /// - Throws: ``TimeControlError/traceExists(path:)`` if `tracePath`
    ///   exists and `replacing` is false; the errors of running a command.
    /// With `autoAdvancing`, the command runs under auto-advance (`timectl run --repeat`): the session's scheduler
    /// skips every wait, stopping after `maxSteps` steps if given.
    public static func record(_ command: [String], into tracePath: String, session: TimeSession, replacing: Bool = false,
                              autoAdvancing: Bool = false, maxSteps: Int? = nil,
                              environment: [String] = ProcessEnvironment.entries) throws(TimeControlError) -> RecordingSummary {
        if !replacing && access(tracePath, F_OK) == 0 { throw .traceExists(path: tracePath) }
        // Made before the command runs, so that a trace that cannot be written costs no run.
        let output = try TraceOutput(path: tracePath, replacing: replacing)
        defer { output.discard() }
        let recordedAt = tc_real_ns(CLOCK_REALTIME)
        // In the session directory (memory, by default): recording writes there on every clock read.
        let directory = try WorkingDirectory.create(beside: session.segmentPath, purpose: "recording")
        defer { directory.remove() }
        try directory.createRegistry()
        let shimEnvironment = try ShimEnvironment(session: session)
        let runner = CommandRunner(arguments: command, shimEnvironment: shimEnvironment)
        let recording = WorkingDirectory.withoutTraceVariables(environment) + ["TIMECTL_RECORD=\(directory.path)"]
        let status = autoAdvancing
            ? try runner.runAutoAdvancing(session: session, maxSteps: maxSteps, adoptingOrphans: true, environment: recording).status
            : try runner.run(environment: recording)
        var summary = try RawRecording(directory: directory).writeTrace(to: output, recordedAt: recordedAt)
        summary.status = status
        return summary
    }
}

/// A private directory for a recording in progress or a replay's state
/// (docs/trace.md), in the session directory.
struct WorkingDirectory {
    let path: String

    /// Named `.timectl-PURPOSE-PID-STARTTICKS-XXXXXX` after the process that made it: one left by a
    /// timectl that was killed (SIGKILL gives it no chance to remove it) is removed by the next one
    /// made beside it, once no process of that pid and start time runs.
    static func create(beside file: String, purpose: String) throws(TimeControlError) -> WorkingDirectory {
        let parent = FilePaths.parent(of: file.hasPrefix("/") ? file : FilePaths.currentDirectory() + "/" + file)
        removeAbandoned(in: parent)
        let pid = getpid()
        var template = Array("\(parent)/.timectl-\(purpose)-\(pid)-\(tc_proc_start_ticks(pid, nil))-XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw .system(call: "mkdtemp", path: parent, errno: Errno(rawValue: errno))
        }
        return WorkingDirectory(path: String(cString: made))
    }

    /// Removes the working directories in `parent` whose maker no longer runs.
    private static func removeAbandoned(in parent: String) {
        let abandoned = directoryEntries(of: parent).filter { name in
            // ".timectl-PURPOSE-PID-STARTTICKS-RANDOM", split on "-": [".timectl", PURPOSE, PID, STARTTICKS, RANDOM]
            let parts = name.split(separator: "-")
            guard name.hasPrefix(".timectl-"), parts.count == 5, let pid = Int32(parts[2]), let started = UInt64(parts[3])
            else { return false }
            return tc_proc_start_ticks(pid, nil) != started
        }.map { parent + "/" + $0 }
        abandoned.forEach(removeFlatDirectory)
    }

    /// An empty registry: the shims claim its entries as they attach.
    func createRegistry() throws(TimeControlError) {
        var header = tc_registry_header()
        withUnsafeMutableBytes(of: &header.magic) { $0.copyBytes(from: Array(TC_REGISTRY_MAGIC.utf8) + [0]) }
        header.version = TC_RECORDING_VERSION
        header.capacity = TC_REGISTRY_CAPACITY
        header.last_replayed = (.min, .min, .min, .min, .min)
        let size = MemoryLayout<tc_registry_header>.size + Int(TC_REGISTRY_CAPACITY) * MemoryLayout<tc_registry_entry>.size
        try write(TC_REGISTRY_FILE, bytes: withUnsafeBytes(of: &header) { Array($0) }, size: size)
    }

    /// Writes `bytes` to a new file `name` here (0600), extended with zeros to `size`.
    func write(_ name: String, bytes: [UInt8], size: Int? = nil) throws(TimeControlError) {
        let file = path + "/" + name
        let fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .system(call: "open", path: file, errno: Errno(rawValue: errno)) }
        defer { close(fd) }
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        guard written == bytes.count, ftruncate(fd, off_t(max(size ?? 0, bytes.count))) == 0 else {
            throw .system(call: "write", path: file, errno: Errno(rawValue: errno))
        }
    }

    /// Reads the file `name` here whole; nil if it does not exist.
    func read(_ name: String) -> [UInt8]? {
        try? Trace.contents(of: path + "/" + name)
    }

    func remove() { removeFlatDirectory(path) }

    /// An environment with no recording or replay of an enclosing run in it.
    static func withoutTraceVariables(_ environment: [String]) -> [String] {
        environment.filter { entry in
            !["TIMECTL_RECORD=", "TIMECTL_REPLAY=", "TIMECTL_REPLAY_DIR=", "TIMECTL_REPLAY_STRICT="].contains { entry.hasPrefix($0) }
        }
    }
}

/// The registry of a recorded (or replayed) run: which entry is which process.
struct Registry {
    struct Entry {
        var pid: Int32
        var parent: Int
        var ordinal: Int
        var images: Int
        var replays: Int
    }

    var entries: [Entry]

    init(_ bytes: [UInt8]) {
        guard bytes.count >= MemoryLayout<tc_registry_header>.size else {
            entries = []
            return
        }
        entries = bytes.withUnsafeBytes { raw in
            let header = raw.loadUnaligned(as: tc_registry_header.self)
            let count = min(Int(header.next), Int(header.capacity),
                            (raw.count - MemoryLayout<tc_registry_header>.size) / MemoryLayout<tc_registry_entry>.size)
            return (0..<count).map { index in
                let entry = raw.loadUnaligned(fromByteOffset: MemoryLayout<tc_registry_header>.size + index * MemoryLayout<tc_registry_entry>.size,
                                              as: tc_registry_entry.self)
                return Entry(pid: entry.pid, parent: Int(entry.parent), ordinal: Int(entry.ordinal), images: Int(entry.images),
                             replays: Int(entry.replays))
            }
        }
    }

    /// The place in the tree of entry `index`: its parent's path and its ordinal ("1.2").
    func path(of index: Int, depth: Int = 0) -> String {
        let entry = entries[index]
        guard entry.parent > 0, entry.parent - 1 < index, depth < 64 else { return String(entry.ordinal) }
        return path(of: entry.parent - 1, depth: depth + 1) + "." + String(entry.ordinal)
    }
}

/// The raw files of a finished recording, and the trace they make.
struct RawRecording {
    /// One thread's events, encoded as in the trace.
    struct Stream {
        var bytes: [UInt8]
        var events: Int
        var readings: Int
        var waits: Int
    }

    struct Image {
        var path: String
        var image: Int
        var pid: Int32
        var arguments: [UInt8]
        var threads: [Int: Stream]
    }

    let directory: WorkingDirectory

    func writeTrace(to output: TraceOutput, recordedAt: Int64) throws(TimeControlError) -> RecordingSummary {
        let registry = Registry(directory.read(TC_REGISTRY_FILE) ?? [])
        var images: [Image] = []
        var lost = 0
        for (index, entry) in registry.entries.enumerated() where entry.images > 0 {
            for image in 1...entry.images {
                guard let bytes = directory.read("p\(index)-\(image).raw"),
                      let raw = Self.parse(bytes, path: registry.path(of: index), lost: &lost) else { continue }
                images.append(raw)
            }
        }
        images.sort { Self.order($0.path, $0.image).lexicographicallyPrecedes(Self.order($1.path, $1.image)) }
        let file = Self.encode(images, recordedAt: recordedAt)
        try output.commit(file)
        let streams = images.flatMap { $0.threads.values }
        return RecordingSummary(status: 0, processes: images.count, threads: streams.count,
                                readings: streams.reduce(0) { $0 + $1.readings }, waits: streams.reduce(0) { $0 + $1.waits },
                                lostEvents: lost, bytes: file.count)
    }

    /// Sorts paths by their numbers ("1.10" after "1.9").
    static func order(_ path: String, _ image: Int) -> [Int] {
        path.split(separator: ".").map { Int($0) ?? 0 } + [-1, image]
    }

    /// One raw file: its header, then its chunks, each thread's in sequence.
    static func parse(_ bytes: [UInt8], path: String, lost: inout Int) -> Image? {
        bytes.withUnsafeBytes { raw -> Image? in
            guard raw.count >= Int(TC_RAW_HEADER_SIZE) else { return nil }
            let header = raw.loadUnaligned(as: tc_raw_header.self)
            let magic = withUnsafeBytes(of: header.magic) { Array($0) }
            guard magic == Array(TC_RAW_MAGIC.utf8) + [0], header.version == TC_RECORDING_VERSION else { return nil }
            lost += Int(header.lost_events)
            let argumentsLength = min(Int(header.argv_length), MemoryLayout.size(ofValue: header.argv))
            let arguments = Array(raw[32..<(32 + argumentsLength)])
            var chunks: [(thread: Int, sequence: Int, offset: Int, length: Int)] = []
            let headerSize = MemoryLayout<tc_chunk_header>.size
            var offset = Int(TC_RAW_HEADER_SIZE)
            while offset + Int(TC_CHUNK_SIZE) <= raw.count {
                let chunk = raw.loadUnaligned(fromByteOffset: offset, as: tc_chunk_header.self)
                if chunk.magic == TC_CHUNK_MAGIC {
                    let length = min(Int(chunk.length), Int(TC_CHUNK_SIZE) - headerSize)
                    chunks.append((Int(chunk.thread), Int(chunk.sequence), offset + headerSize, length))
                }
                offset += Int(TC_CHUNK_SIZE)
            }
            var threads: [Int: [UInt8]] = [:]
            for chunk in chunks.sorted(by: { ($0.thread, $0.sequence) < ($1.thread, $1.sequence) }) {
                threads[chunk.thread, default: []] += raw[chunk.offset..<(chunk.offset + chunk.length)]
            }
            return Image(path: path, image: Int(header.image), pid: header.pid, arguments: arguments,
                         threads: threads.mapValues { Self.stream($0) })
        }
    }

    /// Counts a thread's events, keeping the whole ones (a malformed tail cannot come from the shim, but is cut off).
    static func stream(_ bytes: [UInt8]) -> Stream {
        var stream = Stream(bytes: bytes, events: 0, readings: 0, waits: 0)
        var kept = 0
        bytes.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            var decoder = tc_decoder()
            decoder.next = base
            decoder.end = base + buffer.count
            var event = tc_event()
            while tc_decode_event(&decoder, &event) == 1 {
                stream.events += 1
                if event.type == TC_EVENT_READ.rawValue { stream.readings += 1 }
                if event.type == TC_EVENT_WAIT_BEGIN.rawValue { stream.waits += 1 }
                kept = decoder.next! - base
            }
        }
        stream.bytes.removeSubrange(kept...)
        return stream
    }

    /// The trace file: header, processes, streams, strings, data (timectl_trace.h).
    static func encode(_ images: [Image], recordedAt: Int64) -> [UInt8] {
        var strings: [UInt8] = []
        var data: [UInt8] = []
        var processes: [tc_trace_process] = []
        var streams: [tc_trace_stream] = []
        for (index, image) in images.enumerated() {
            var process = tc_trace_process()
            process.path_offset = UInt64(strings.count)
            process.path_length = UInt32(image.path.utf8.count)
            strings += Array(image.path.utf8)
            process.argv_offset = UInt64(strings.count)
            process.argv_length = UInt32(image.arguments.count)
            strings += image.arguments
            process.image = UInt32(image.image)
            process.pid = image.pid
            process.first_stream = UInt32(streams.count)
            for thread in image.threads.keys.sorted() {
                let events = image.threads[thread]!
                var stream = tc_trace_stream()
                stream.process = UInt32(index)
                stream.thread = UInt32(thread)
                stream.data_offset = UInt64(data.count)
                stream.data_length = UInt64(events.bytes.count)
                stream.events = UInt32(events.events)
                stream.readings = UInt32(events.readings)
                data += events.bytes
                streams.append(stream)
            }
            process.stream_count = UInt32(streams.count) - process.first_stream
            processes.append(process)
        }
        var header = tc_trace_header()
        withUnsafeMutableBytes(of: &header.magic) { $0.copyBytes(from: Array(TC_TRACE_MAGIC.utf8) + [0]) }
        header.version = TC_TRACE_VERSION
        header.header_size = UInt32(MemoryLayout<tc_trace_header>.size)
        header.recorded_at = recordedAt
        header.process_count = UInt32(processes.count)
        header.stream_count = UInt32(streams.count)
        header.processes_offset = UInt64(MemoryLayout<tc_trace_header>.size)
        header.streams_offset = header.processes_offset + UInt64(processes.count * MemoryLayout<tc_trace_process>.stride)
        header.strings_offset = header.streams_offset + UInt64(streams.count * MemoryLayout<tc_trace_stream>.stride)
        header.strings_size = UInt64(strings.count)
        header.data_offset = header.strings_offset + header.strings_size
        header.data_size = UInt64(data.count)
        header.file_size = header.data_offset + header.data_size
        var file: [UInt8] = []
        file.reserveCapacity(Int(header.file_size))
        file += withUnsafeBytes(of: &header) { Array($0) }
        for var process in processes { file += withUnsafeBytes(of: &process) { Array($0) } }
        for var stream in streams { file += withUnsafeBytes(of: &stream) { Array($0) } }
        file += strings
        file += data
        let checksum = file.withUnsafeBufferPointer { tc_trace_checksum($0.baseAddress, UInt64($0.count)) }
        withUnsafeBytes(of: checksum) { bytes in
            for (offset, byte) in bytes.enumerated() { file[MemoryLayout<tc_trace_header>.offset(of: \.checksum)! + offset] = byte }
        }
        return file
    }
}

/// Where a trace goes: a new file beside its final path, which appears
/// complete under that path (``commit(_:)``) or not at all.
final class TraceOutput {
    let path: String
    private let temporary: String
    private let replacing: Bool
    private var fd: Int32

    /// Creates the temporary file now (never through a symlink, never over a file).
    init(path: String, replacing: Bool) throws(TimeControlError) {
        self.path = path
        self.replacing = replacing
        temporary = path + ".partial-\(getpid())"
        fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw .system(call: "open", path: path, errno: Errno(rawValue: errno)) }
    }

    deinit { discard() }

    /// Writes `bytes` and moves them under ``path``: replacing what is there
    /// only if asked to, else failing with ``TimeControlError/traceExists(path:)``.
    func commit(_ bytes: [UInt8]) throws(TimeControlError) {
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw .system(call: "write", path: temporary, errno: Errno(rawValue: errno)) }
            offset += count
        }
        guard fsync(fd) == 0 else { throw .system(call: "fsync", path: temporary, errno: Errno(rawValue: errno)) }
        let closed = close(fd)
        fd = -1
        guard closed == 0 else { throw .system(call: "close", path: temporary, errno: Errno(rawValue: errno)) }
        if replacing {
            guard rename(temporary, path) == 0 else { throw .system(call: "rename", path: path, errno: Errno(rawValue: errno)) }
        } else {
            // link fails if the path was taken meanwhile, where rename would replace it.
            guard link(temporary, path) == 0 else {
                if errno == EEXIST { throw .traceExists(path: path) }
                throw .system(call: "link", path: path, errno: Errno(rawValue: errno))
            }
            unlink(temporary)
        }
    }

    /// Removes the temporary file, unless it was committed.
    func discard() {
        if fd >= 0 {
            close(fd)
            fd = -1
        }
        unlink(temporary)
    }
}
