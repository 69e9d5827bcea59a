/// Where two runs of the same command first observed something different (SPEC §11, `timectl run --repeat`):
/// processes matched by their place in the process tree and image, threads by number, events in order — as
/// replay matches them. A wait that ended before its deadline (a lock or condition taken before its timeout:
/// Python's GIL waits 5 ms at a time) and a reading that repeats the thread's last reading of that clock are
/// the program's synchronisation, not its timing, and how many of them a thread makes depends on how the
/// kernel schedules threads: they are passed over (``TraceEvent/timeline(_:)``).
public struct TraceDifference: Sendable, Hashable, CustomStringConvertible {
    /// The process (`1`, `1.2`) and image, and its arguments in the first run.
    public var process: String
    public var image: Int
    public var arguments: [String]
    /// The thread's number (0: the main thread), or nil when the process is in one run only.
    public var thread: Int?
    /// The 1-based number of the event that differs (a reading or a wait), or nil when the thread is in one run only.
    public var event: Int?
    /// What each run had there, for people; "nothing" when one run had no such event.
    public var first: String
    public var other: String

    public var description: String { describing(first: "one", other: "the other") }

    /// `process 1 (python3), thread 2, event 17: run 1 had …, run 4 had …`, naming the two runs as given.
    public func describing(first firstRun: String, other otherRun: String) -> String {
        let name = arguments.first.map { " (\($0.split(separator: "/").last.map(String.init) ?? $0))" } ?? ""
        var place = "process \(process)\(image > 1 ? " image \(image)" : "")\(name)"
        if let thread { place += ", thread \(thread)" }
        if let event { place += ", event \(event)" }
        return "\(place): \(firstRun) had \(first), \(otherRun) had \(other)"
    }
}

extension Trace {
    /// The first difference between this run's observations and `other`'s, or nil when every thread of every
    /// process read the same values and its waits began and ended the same, in the same order.
    public func firstDifference(from other: Trace) -> TraceDifference? {
        struct Key: Hashable { var path: String; var image: Int }
        let mine = Dictionary(processes.map { (Key(path: $0.path, image: $0.image), $0) }, uniquingKeysWith: { first, _ in first })
        let theirs = Dictionary(other.processes.map { (Key(path: $0.path, image: $0.image), $0) }, uniquingKeysWith: { first, _ in first })
        func components(_ key: Key) -> [Int] { key.path.split(separator: ".").compactMap { Int($0) } }
        let keys = Set(mine.keys).union(theirs.keys).sorted {
            components($0) == components($1) ? $0.image < $1.image : components($0).lexicographicallyPrecedes(components($1))
        }
        for key in keys {
            guard let a = mine[key], let b = theirs[key] else {
                let present = mine[key] ?? theirs[key]!
                return TraceDifference(process: key.path, image: key.image, arguments: present.arguments, thread: nil, event: nil,
                                       first: mine[key] == nil ? "no such process" : "the process",
                                       other: theirs[key] == nil ? "no such process" : "the process")
            }
            if a.arguments != b.arguments {
                return TraceDifference(process: key.path, image: key.image, arguments: a.arguments, thread: nil, event: nil,
                                       first: "arguments \(a.arguments)", other: "arguments \(b.arguments)")
            }
            let threadsA = Dictionary(a.threads.map { ($0.number, $0) }, uniquingKeysWith: { first, _ in first })
            let threadsB = Dictionary(b.threads.map { ($0.number, $0) }, uniquingKeysWith: { first, _ in first })
            for number in Set(threadsA.keys).union(threadsB.keys).sorted() {
                guard let x = threadsA[number], let y = threadsB[number] else {
                    return TraceDifference(process: key.path, image: key.image, arguments: a.arguments, thread: number, event: nil,
                                           first: threadsA[number] == nil ? "no such thread" : "the thread",
                                           other: threadsB[number] == nil ? "no such thread" : "the thread")
                }
                let xs = TraceEvent.timeline(x.events), ys = TraceEvent.timeline(y.events)
                for index in 0..<max(xs.count, ys.count) {
                    let e = index < xs.count ? xs[index] : nil, f = index < ys.count ? ys[index] : nil
                    if e == f { continue }
                    return TraceDifference(process: key.path, image: key.image, arguments: a.arguments, thread: number, event: index + 1,
                                           first: e?.description ?? "nothing", other: f?.description ?? "nothing")
                }
            }
        }
        return nil
    }
}

extension TraceEvent {
    /// A thread's events as timing: without the waits that ended before their deadline (with their begin),
    /// and without readings that repeat the last value read on their clock.
    public static func timeline(_ events: [TraceEvent]) -> [TraceEvent] {
        var kept: [TraceEvent] = []
        var lastRead: [Int32: Int64] = [:]
        var index = 0
        while index < events.count {
            let event = events[index]
            if case .waitBegan = event, index + 1 < events.count, case .waitEnded(_, _, false) = events[index + 1] {
                index += 2
                continue
            }
            if case .reading(_, let clock, let value) = event {
                if lastRead[clock] == value {
                    index += 1
                    continue
                }
                lastRead[clock] = value
            }
            kept.append(event)
            index += 1
        }
        return kept
    }
}
