#if canImport(Glibc)
import Glibc
#endif
import TimeShimC

/// Moves a session from deadline to deadline whenever its processes are
/// idle (SPEC §8): the one engine behind `timectl run --auto-advance`,
/// `timectl daemon`, `tick --step`, `run-pending`, and the harness's
/// ``TimeSession/settle(realTimeLimit:)``, ``TimeSession/stepForward(by:maxSteps:realTimeLimit:)``,
/// ``TimeSession/runUntilIdle(maxSteps:realTimeLimit:)`` and ``TimeSession/run(until:within:maxSteps:realTimeLimit:description:)``.
///
/// The session may advance when every thread of every watched process is
/// blocked (``ProcessWatch``), no wait is due but still pending (a thread
/// the last step woke has not returned yet), and at least one wait lies
/// ahead. It then advances exactly to the earliest deadline.
///
/// Learning when that holds: a wait beginning or ending bumps the segment's
/// `wait_changes` futex word, which wakes the scheduler at once (it counts
/// itself among the word's watchers). A thread blocking on something else
/// — a pipe, `waitpid` — changes nothing in the segment, so while anything
/// runs the scheduler looks again after 50 µs, doubling up to 2 ms.
///
/// Right after a step the next change is usually microseconds away (the
/// woken thread ends its wait, works a little and begins the next one), and
/// a sleeping scheduler would be woken only after its CPU woke up — about
/// 50 µs on a virtual machine that does not poll before it halts. So for
/// ``spinWindow`` after a step it keeps its CPU instead, as long as that
/// takes a CPU from no one: the kernel has no more runnable tasks than the
/// scheduler may use CPUs, or has had more for under 20 µs (a thread
/// handing its CPU to one it just woke), checked every 10 µs; never on a
/// single CPU. Meanwhile it watches the word and looks again every
/// ``spinningPause`` while a thread runs; then it sleeps as before. It
/// never yields the CPU while it spins: a yield hands it to any runnable
/// task, even a `nice 19` one, until the next tick. A step costs at most
/// ``spinWindow`` of CPU more.
///
/// Not thread-safe: one scheduler is driven by one thread at a time (the
/// harness hands it from thread to thread, never to two at once).
final class SessionScheduler: @unchecked Sendable {
    enum Evaluation {
        /// A watched thread runs, or ran during the looks.
        case busy
        /// A wait is due but has not returned yet.
        case due
        /// Everything is blocked and nothing waits on virtual time.
        case idle
        /// Everything is blocked; `next` is the earliest wait ahead.
        case quiescent(next: PendingWait)
        /// Everything is blocked, and `thread` waits on the world outside the session: no jump.
        case held(by: BlockedThread)
        /// Everything is blocked inside the session and nothing waits on virtual time: nothing can ever happen.
        case deadlock([BlockedThread])
        /// Everything is blocked and the only waits ahead lie past the end of the supported range (`wait`).
        case endOfRange(PendingWait)
        /// A seeded run (SPEC §11): everything is blocked, and these waits, due together, are held; one is let end.
        case release(from: [PendingWait])
    }

    let session: TimeSession
    let watch: ProcessWatch
    private var waitTable: SegmentMapping.WaitTableBuffer
    /// The names of the processes seen waiting, for the step guard's message.
    private var names = ProcessNames()
    /// Waits whose deadline lies beyond what the session can represent (`sleep infinity`).
    private var unreachable: Set<UInt64> = []
    /// Which waits were advanced to, and how often, for the step guard's
    /// message. By command, not pid: a shell loop starts a new `sleep` each time.
    private struct WaitIdentity: Hashable { var command: String; var kind: String; var clock: VirtualClock }
    private var stepsByWait: [WaitIdentity: (steps: Int, lastPID: Int32)] = [:]
    private(set) var steps = 0
    /// What each watched thread waits on, with the run count it was classified at.
    private let classifier: WaitClassifier
    private var classified: [Int32: (runs: UInt64, wait: Classified)] = [:]
    /// Threads the looks read afresh since their classes were last brought up to date (by thread id).
    private var unclassified: [Int32: ProcessWatch.Thread] = [:]
    /// The threads classified as waiting on the outside world.
    private var outsideThreads: Set<Int32> = []
    /// What a blocked thread was found waiting on.
    private enum Classified {
        /// A listed wait that watches no descriptor (a sleep, a condition, a futex, a timer): time alone, inside.
        /// Left undescribed: only a held jump (an outside wait) or a deadlock (no timed wait pending) names threads.
        case timed
        case wait(BlockedThread)
        /// Not in a system call (it runs, or is gone).
        case none
    }
    /// The kinds of listed waits that watch descriptors, and so may wait on the outside world.
    private static let descriptorWaitKinds: Set<String> = ["poll", "select", "epoll"]
    private let ownPID = getpid()
    /// A seeded run's order (SPEC §11), when the session has a seed: waits a step makes due end one at a time.
    private(set) var order: SeededOrder?
    /// The waits of the last evaluation, for holding the ones a seeded step makes due.
    private var lastWaits: [PendingWait] = []

    static let shortestPause: Int64 = 50_000
    static let longestPause: Int64 = 2_000_000
    /// The longest pause while a thread waits on the outside world (the session then runs at real speed).
    static let longestHeldPause: Int64 = 20_000_000
    /// How long after a step the scheduler spins instead of sleeping (real ns).
    static let spinWindow: Int64 = 250_000
    /// Within that window, the pause before looking again at a thread that runs.
    static let spinningPause: Int64 = 5_000
    /// Until when (real CLOCK_MONOTONIC ns) pauses may spin.
    private var spinningUntil: Int64 = 0
    /// The CPUs this thread may run on (spinning is for when they outnumber the runnable tasks).
    private let usableCPUs = tc_usable_cpus()
    /// Since when the runnable tasks have outnumbered them (0: they do not); see `tc_spin_may_go_on`.
    private var crowdedSince: Int64 = 0

    /// Whether this process counts as inside the session when a watched thread waits on it (a pipe or socket it
    /// holds). `timectl` itself only runs the command, so it does; a test process runs code of its own that may
    /// feed its children at any time, so it does not: a child waiting on it waits on the outside world.
    private let ownProcessIsInside: Bool

    /// A scheduler for `session` watching `roots()` and their descendants.
    /// In a process that is itself on the session (a test's own process under
    /// TimeControlKitTesting's trait), its own threads are watched too, all but
    /// the scheduler's: the test's own sleeps and timers are the session's waits.
    /// `runRoots()`, when given, are the roots of the scheduler's own run (among `roots()`, or this process for its
    /// children): a pipe that run did not inherit from this process is looked for among the run's processes alone.
    init(session: TimeSession, roots: @escaping () -> [Int32], runRoots: (() -> [Int32])? = nil, ownHelper: @escaping () -> Int32 = { 0 },
         ownProcessIsInside: Bool = false) {
        self.session = session
        self.ownProcessIsInside = ownProcessIsInside
        let ownPID = getpid()
        let judgingOwnThreads = session.mapping.registeredProcesses().contains { $0.pid == ownPID }
        self.watch = ProcessWatch(roots: roots, runRoots: runRoots.map { runRoots in { runRoots() + (judgingOwnThreads ? [ownPID] : []) } } ?? { [] },
                                  ownHelper: ownHelper, judgingOwnThreads: judgingOwnThreads)
        classifier = WaitClassifier(inherited: runRoots == nil ? nil : WaitClassifier.ownDescriptors())
        waitTable = session.mapping.makeWaitTableBuffer()
        let seed = session.mapping.seed
        order = seed != 0 ? SeededOrder(seed: seed) : nil
        session.mapping.startWatchingWaits()
    }

    deinit {
        session.mapping.stopWatchingWaits()
    }

    /// The session's attached processes and the processes spawned by `session` (the harness's view).
    static func harnessRoots(of session: TimeSession) -> () -> [Int32] {
        let attached = RunningRegisteredPIDs(session: session)
        return { [weak session] in
            guard let session else { return [] }
            return attached.current() + session.spawnedProcessIDs()
        }
    }

    /// The harness's own run: the processes spawned by `session` (and this process, when it is itself on the session).
    static func harnessRunRoots(of session: TimeSession) -> () -> [Int32] {
        { [weak session] in session?.spawnedProcessIDs() ?? [] }
    }

    // MARK: Looking

    private var waitChanges: UInt32 { session.mapping.load(.waitChanges) }

    /// Whether the session may advance now, and to where.
    ///
    /// A verdict that nothing can ever happen again (a deadlock, or only waits past the end of the supported
    /// range) stands only when it holds twice, ``verdictPause`` apart, from looks that read every thread, and
    /// no thread ran in between: one look can catch a thread on its way out of a process, whose wait cannot be
    /// read (`ping -c 3` ended with a deadlock after its last reply).
    func evaluate() -> Evaluation {
        let evaluation = evaluate(fully: false)
        switch evaluation {
        case .deadlock, .endOfRange: return confirmed(evaluation)
        default: return evaluation
        }
    }

    /// How long a verdict must hold before it is given (real ns).
    static let verdictPause: Int64 = 20_000_000
    /// The threads of the last look that read every one, sorted, with their run counts.
    private var walkedThreads: [ProcessWatch.Thread] = []

    private func confirmed(_ verdict: Evaluation) -> Evaluation {
        func sameKind(_ evaluation: Evaluation) -> Bool {
            switch (verdict, evaluation) {
            case (.deadlock, .deadlock), (.endOfRange, .endOfRange): return true
            default: return false
            }
        }
        let changes = waitChanges
        guard sameKind(evaluate(fully: true)) else { return .busy }
        let before = walkedThreads
        pause(since: changes, nanoseconds: Self.verdictPause)
        let again = evaluate(fully: true)
        guard sameKind(again), walkedThreads == before else { return .busy }
        return again
    }

    private func evaluate(fully: Bool) -> Evaluation {
        let changes = waitChanges
        guard let look = watch.look(fully: fully) else { return .busy }
        if look.complete { walkedThreads = look.threads.sorted { $0.tid < $1.tid } }
        if look.complete { unclassified.removeAll(keepingCapacity: true) }
        for thread in look.changed { unclassified[thread.tid] = thread }
        let reading = session.readWaitTable(knownLive: look.live, buffer: &waitTable, names: &names, ownPID: ownPID)
        // Before the check of the wait table's counter below, which a freed slot bumps, as any wait ending does.
        session.releaseWaits(reading.ownersGone)
        let waits = reading.waits
        if order != nil { lastWaits = waits }
        // A held wait is due but waits for its turn: it is not running.
        if waits.contains(where: { $0.remainingNanoseconds == 0 && !$0.held }) { return .due }
        guard waitChanges == changes else { return .busy }
        if let outside = classify(look, waits: waits) { return .held(by: named(outside)) }
        if order != nil {
            let held = waits.filter { $0.held && $0.remainingNanoseconds == 0 }
            if !held.isEmpty { return .release(from: held) }
        }
        guard let next = waits.first(where: { !unreachable.contains(key(of: $0)) }) else {
            if let beyond = waits.first { return .endOfRange(beyond) }
            let threads = look.threads.compactMap { thread -> BlockedThread? in
                guard case .wait(let wait) = classified[thread.tid]?.wait else { return nil }
                return wait
            }.map(named).filter { !$0.isTimectls }
            if !threads.isEmpty && threads.allSatisfy({ $0.side == .inside }) { return .deadlock(described(threads, of: look)) }
            return .idle
        }
        return .quiescent(next: next)
    }

    /// Classifies the threads the looks read afresh since the last classification (into `classified`), and
    /// returns one that waits on the outside world. A thread that has not run since it was last classified
    /// keeps its class; one in a listed wait that watches no descriptor waits on time alone. Only the rest are
    /// read from /proc: after a step, usually one (a pipe's reader woken and blocked again), or none. After a
    /// look that walked every thread, the classes of threads it did not see are dropped.
    private func classify(_ look: ProcessWatch.Look, waits: [PendingWait]) -> BlockedThread? {
        var attached: WaitClassifier.Attached? = nil  // made once, when a wait is classified afresh
        let attachedProcesses = { [ownProcessIsInside, ownPID] () -> WaitClassifier.Attached in
            if let attached { return attached }
            let made = WaitClassifier.Attached(all: Set(look.processes).union(ownProcessIsInside ? [ownPID] : []), inRun: look.inRun)
            attached = made
            return made
        }
        for thread in unclassified.values {
            let entry: Classified
            if let known = classified[thread.tid], known.runs == thread.runs {
                entry = known.wait
            } else {
                entry = classifyAfresh(thread, waits: waits, attached: attachedProcesses)
                classified[thread.tid] = (thread.runs, entry)
            }
            if case .wait(let wait) = entry, wait.side == .outside { outsideThreads.insert(thread.tid) } else { outsideThreads.remove(thread.tid) }
        }
        unclassified.removeAll(keepingCapacity: true)
        if look.complete && (classified.count > look.threads.count || outsideThreads.count > 0) {
            let live = Set(look.threads.map(\.tid))
            outsideThreads.formIntersection(live)
            if classified.count > 2 * live.count + 64 {
                classified = classified.filter { live.contains($0.key) }
                classifier.forget(allBut: live)
            }
        }
        guard let tid = outsideThreads.min(), case .wait(let wait)? = classified[tid]?.wait else { return nil }
        return wait
    }

    private func classifyAfresh(_ thread: ProcessWatch.Thread, waits: [PendingWait], attached: () -> WaitClassifier.Attached) -> Classified {
        if let index = waits.firstIndex(where: { $0.thread == thread.tid && $0.pid == thread.pid }),
           !Self.descriptorWaitKinds.contains(waits[index].kind) {
            return .timed
        }
        guard var wait = classifier.classify(pid: thread.pid, tid: thread.tid, attached: attached) else { return .none }
        wait.command = names.name(of: thread.pid)
        return .wait(wait)
    }

    /// The threads of a deadlock, described for its report: who holds each pipe they wait on.
    private func described(_ threads: [BlockedThread], of look: ProcessWatch.Look) -> [BlockedThread] {
        let attached = WaitClassifier.Attached(all: Set(look.processes).union(ownProcessIsInside ? [ownPID] : []), inRun: look.inRun)
        return threads.map { thread in
            guard var wait = classifier.describe(pid: thread.pid, tid: thread.thread, attached: { attached }) else { return thread }
            (wait.command, wait.threadName) = (thread.command, thread.threadName)
            return wait
        }
    }

    /// `wait` with its thread's name, for a report.
    private func named(_ wait: BlockedThread) -> BlockedThread {
        var named = wait
        named.threadName = ProcFS.threadName(pid: wait.pid, tid: wait.thread).flatMap { $0 == wait.command ? nil : $0 }
        return named
    }

    private func key(of wait: PendingWait) -> UInt64 {
        UInt64(UInt32(bitPattern: wait.slot)) &* 0x9E37_79B9_7F4A_7C15 ^ wait.owner ^ UInt64(bitPattern: wait.deadlineNanoseconds)
    }

    // MARK: Moving

    /// Advances exactly to `wait`'s deadline and counts the step. A deadline
    /// the session cannot reach (beyond 2200) is remembered and skipped.
    func advance(to wait: PendingWait) throws(TimeControlError) {
        if order != nil {
            // Every wait the step makes due waits for its turn (release(from:)); one due alone has no order to keep.
            let due = lastWaits.filter { $0.remainingNanoseconds <= wait.remainingNanoseconds }
            if due.count > 1 {
                for other in due { _ = session.mapping.hold(slot: other.slot, owner: other.owner) }
            }
        }
        do {
            try session.advance(toDeadlineOf: wait)
        } catch .outOfRange {
            unreachable.insert(key(of: wait))
            return
        }
        steps += 1
        spinningUntil = tc_real_ns(CLOCK_MONOTONIC).addingSaturating(Self.spinWindow)
        session.mapping.countSchedulerStep()
        if wait.thread != 0 { watch.expectRunning(pid: wait.pid, tid: wait.thread) }
        let identity = WaitIdentity(command: wait.command, kind: wait.kind, clock: wait.virtualClock)
        stepsByWait[identity] = ((stepsByWait[identity]?.steps ?? 0) + 1, wait.pid)
    }

    /// Lets the wait `order` draws from `candidates` (held waits due together) end, and expects its thread to run.
    func release(from candidates: [PendingWait]) {
        guard var order else { return }
        let wait = order.pick(from: candidates)
        self.order = order
        session.mapping.releaseHeld(slot: wait.slot)
        spinningUntil = tc_real_ns(CLOCK_MONOTONIC).addingSaturating(Self.spinWindow)
        if wait.thread != 0 { watch.expectRunning(pid: wait.pid, tid: wait.thread) }
    }

    /// Advances to `target` on the monotonic clock (nothing if it is already there).
    func advance(toMonotonic target: Int64) throws(TimeControlError) {
        try session.advance(to: SessionClock.Instant(nanoseconds: target))
    }

    /// The wait that was advanced to most often, for the step guard's message.
    var busiestWait: String {
        let described = stepsByWait.map { identity, count in
            let pids = count.steps == 1 ? "pid \(count.lastPID)" : "last pid \(count.lastPID)"
            return ("\(identity.command) (\(pids)): \(identity.kind) on \(identity.clock.name)",
                    count.steps)
        }
        return described.max { ($0.1, $1.0) < ($1.1, $0.0) }.map { "\($0.0), \($0.1) time\($0.1 == 1 ? "" : "s")" } ?? "none"
    }

    // MARK: Waiting

    /// Blocks until a wait begins or ends, `stop` changes, or `pause` real ns pass
    /// (`spinning` first, within the spin window: see ``maySpin()``). Returns whether the wait table changed.
    @discardableResult
    func pause(since changes: UInt32, nanoseconds: Int64, stop: StopFlag? = nil, spinning: Bool = false) -> Bool {
        var now = tc_real_ns(CLOCK_MONOTONIC)
        let end = now.addingSaturating(nanoseconds)
        if spinning {
            tc_words_spin(session.mapping.address(of: .waitChanges), changes, stop?.word, stop?.expected ?? 0,
                          min(end, spinningUntil), usableCPUs, &crowdedSince)
            now = tc_real_ns(CLOCK_MONOTONIC)
        }
        if now < end && waitChanges == changes && !(stop?.raised ?? false) {
            session.mapping.waitForChange(of: .waitChanges, from: changes, orOf: stop?.word, from: stop?.expected ?? 0,
                                          realNanoseconds: end - now)
        }
        return waitChanges != changes
    }

    /// One pause while a watched thread runs: a short spin right after a step (see ``maySpin()``), else
    /// `pause`, which starts again from the shortest when the wait table changed and doubles when it did not.
    private func pauseWhileRunning(since changes: UInt32, pause: inout Int64, atMost limit: Int64 = .max, stop: StopFlag? = nil) {
        let spinning = maySpin()
        if self.pause(since: changes, nanoseconds: min(spinning ? Self.spinningPause : pause, limit), stop: stop, spinning: spinning) {
            pause = Self.shortestPause
        } else if !spinning {
            pause = min(pause * 2, Self.longestPause)
        }
    }

    /// Whether a pause may spin now: within the spin window after a step, with a CPU to spare.
    private func maySpin() -> Bool {
        let now = tc_real_ns(CLOCK_MONOTONIC)
        return now < spinningUntil && tc_spin_may_go_on(usableCPUs, &crowdedSince, now) != 0
    }

    /// Waits until the watched processes are idle or quiescent, and returns
    /// which. Throws when `realTimeLimit` (the harness's own guard) passes,
    /// or when `loopGuard` finds a process that will never let time move.
    func settle(realTimeLimit: Duration, loopGuard: inout LoopGuard) throws(TimeControlError) -> Evaluation {
        let deadline = tc_real_ns(CLOCK_MONOTONIC).addingSaturating(SessionClock.Instant.nanoseconds(of: realTimeLimit))
        var pause = Self.shortestPause
        while true {
            let changes = waitChanges
            let evaluation = evaluate()
            switch evaluation {
            case .idle, .quiescent, .deadlock, .endOfRange: return evaluation
            case .release(let candidates): release(from: candidates)
            case .busy, .due, .held: break
            }
            let now = tc_real_ns(CLOCK_MONOTONIC)
            if now >= deadline {
                throw .realTimeLimitExceeded(waitingFor: "the processes of session '\(session.name)' to settle", limit: realTimeLimit)
            }
            try loopGuard.check(self, realNow: now)
            pauseWhileRunning(since: changes, pause: &pause, atMost: deadline - now)
        }
    }

    /// Advances through every pending deadline up to `target` (monotonic
    /// ns), in order, letting the processes settle before each step and
    /// after the last (`tick --step`).
    func step(to target: Int64, maxSteps: Int, realTimeLimit: Duration) throws(TimeControlError) -> RunResult {
        let start = session.monotonicNanoseconds
        var loopGuard = LoopGuard(session: session)
        while true {
            let evaluation = try settle(realTimeLimit: realTimeLimit, loopGuard: &loopGuard)
            let now = session.monotonicNanoseconds
            guard case .quiescent(let next) = evaluation, now.addingSaturating(next.remainingNanoseconds) <= target else {
                try advance(toMonotonic: target)
                _ = try settle(realTimeLimit: realTimeLimit, loopGuard: &loopGuard)
                return RunResult(steps: steps, elapsed: .nanoseconds(session.monotonicNanoseconds - start))
            }
            try checkSteps(maxSteps, goal: "reaching the target \(TimeFormats.formatDuration(target - start)) ahead")
            try advance(to: next)
        }
    }

    /// Advances from deadline to deadline until no wait is pending (`run-pending`).
    func runUntilIdle(maxSteps: Int, realTimeLimit: Duration) throws(TimeControlError) -> RunResult {
        let start = session.monotonicNanoseconds
        var loopGuard = LoopGuard(session: session)
        while case .quiescent(let next) = try settle(realTimeLimit: realTimeLimit, loopGuard: &loopGuard) {
            try checkSteps(maxSteps, goal: "running out of pending waits")
            try advance(to: next)
        }
        return RunResult(steps: steps, elapsed: .nanoseconds(session.monotonicNanoseconds - start))
    }

    /// The step guard of the bounded operations (sinon's loop limit): a
    /// process that re-arms a timer for ever would make them step for ever.
    func checkSteps(_ maxSteps: Int, goal: String) throws(TimeControlError) {
        guard steps < maxSteps else {
            throw .stepLimitExceeded(goal: goal, steps: steps, busiest: busiestWait)
        }
    }

    /// Advances whenever the processes are quiescent, until `stop` is
    /// raised (`timectl run --auto-advance`, `timectl daemon`). Stops early,
    /// with the error, when a loop guard trips, the session cannot be
    /// written, or nothing can ever happen again (a deadlock, or the end of
    /// the supported range); with `reportingOnly`, such a state is handed to
    /// it once instead (`timectl daemon`), and the scheduler goes on.
    ///
    /// While a thread waits on the world outside the session, a frozen
    /// session runs at real speed instead of jumping, so that the outside
    /// wait's timeout takes as long as it says; it is frozen again as soon as
    /// that wait is over.
    ///
    /// While `ready(exactly)` does not hold, everything counts as running:
    /// `timectl run --auto-advance` starts the scheduler before its command
    /// and stops it after, and a verdict taken on the other attached
    /// processes alone (a deadlock, when the only one waits for a signal)
    /// either ended the scheduler before the command existed, leaving it to
    /// hang on the frozen session, or made a command that had exited 0 exit 122.
    /// It is asked at every look with `exactly` false (an answer that may lag
    /// an exit by a moment: a step then is harmless) and again, `exactly`,
    /// before a verdict.
    func autoAdvance(until stop: StopFlag, maxSteps: Int? = nil, ready: (_ exactly: Bool) -> Bool = { _ in true },
                     reportingOnly: ((TimeControlError) -> Void)? = nil) -> TimeControlError? {
        var loopGuard = LoopGuard(session: session)
        var pause = Self.shortestPause
        var runningForOutside = false
        var heldPause = Self.shortestPause
        var reported: String? = nil
        defer { if runningForOutside { try? session.freeze() } }
        while !stop.raised {
            let changes = waitChanges
            do {
                var evaluation = ready(false) ? evaluate() : .busy
                switch evaluation {
                case .deadlock, .endOfRange: if !ready(true) { evaluation = .busy }
                default: break
                }
                if runningForOutside, case .held = evaluation {} else if runningForOutside {
                    try session.freeze()
                    runningForOutside = false
                }
                var stuck: TimeControlError? = nil
                switch evaluation {
                case .deadlock(let threads): stuck = .deadlock(threads: threads)
                case .endOfRange(let wait): stuck = .endOfTimeRange(wait: "\(wait.pid)/\(wait.thread) \(wait.command): \(wait.kind) on \(wait.clock)")
                default: reported = nil
                }
                if let stuck {
                    guard let reportingOnly else { return stuck }
                    if stuck.description != reported { reportingOnly(stuck) }
                    reported = stuck.description
                }
                switch evaluation {
                case .held:
                    if !runningForOutside && session.isFrozen {
                        try session.resume()
                        runningForOutside = true
                        heldPause = Self.shortestPause
                    }
                    // Time runs meanwhile, so looking again late costs nothing but real time the wait takes anyway.
                    self.pause(since: changes, nanoseconds: heldPause, stop: stop)
                    heldPause = min(heldPause * 2, Self.longestHeldPause)
                case .deadlock, .endOfRange:
                    self.pause(since: changes, nanoseconds: 50_000_000, stop: stop)
                case .quiescent(let next):
                    if let maxSteps { try checkSteps(maxSteps, goal: "the processes running out of waits") }
                    try advance(to: next)
                    pause = Self.shortestPause
                    self.pause(since: changes, nanoseconds: pause, stop: stop, spinning: maySpin())
                case .release(let candidates):
                    release(from: candidates)
                    pause = Self.shortestPause
                    self.pause(since: changes, nanoseconds: pause, stop: stop, spinning: maySpin())
                case .idle:
                    // Only a wait beginning can give a reason to advance.
                    self.pause(since: changes, nanoseconds: 50_000_000, stop: stop, spinning: maySpin())
                case .busy, .due:
                    try loopGuard.check(self, realNow: tc_real_ns(CLOCK_MONOTONIC))
                    pauseWhileRunning(since: changes, pause: &pause, stop: stop)
                }
            } catch {
                return error
            }
        }
        return nil
    }
}

/// The order in which a seeded scheduler lets waits due together end (SPEC §11): drawn from the seed and from
/// how many it drew before, among the waits sorted by their identities — which, like the draws, are the same in
/// every run of the same program.
struct SeededOrder: Sendable {
    let seed: UInt64
    private var draws: UInt64 = 0

    init(seed: UInt64) { self.seed = seed }

    mutating func pick(from candidates: [PendingWait]) -> PendingWait {
        let sorted = candidates.sorted { ($0.identity, $0.deadlineNanoseconds, $0.kind) < ($1.identity, $1.deadlineNanoseconds, $1.kind) }
        draws += 1
        return sorted[Int(tc_mix64(seed, draws) % UInt64(sorted.count))]
    }
}

/// A process-private futex word that ends a scheduler's loop when it changes.
final class StopFlag: @unchecked Sendable {
    // @unchecked: the word is only touched through atomic C calls.
    let word: UnsafeMutablePointer<UInt32>
    let expected: UInt32 = 0

    init() {
        word = .allocate(capacity: 1)
        word.initialize(to: 0)
    }

    deinit { word.deallocate() }

    var raised: Bool { tc_word_load(word) != expected }

    /// Ends the loop and wakes it.
    func raise() { tc_word_poke(word) }
}

/// The guard against a program that will never let virtual time move: one
/// that begins waits that are already due — a 0 s timer re-armed in a
/// loop, `sleep 0` forever — never blocks, so no scheduler can ever step it
/// forward, and real time does not move a frozen session either.
///
/// It trips when, while virtual time stood still, the session's processes
/// began more than `limit` such waits over at least `minimumRealTime`, and
/// every watched thread outside the processes that began them was blocked:
/// nothing else could still end the loop.
struct LoopGuard {
    static let limit: UInt32 = 100_000
    static let minimumRealTime: Int64 = 1_000_000_000

    private let session: TimeSession
    private var baseline: [Int32: UInt32] = [:]
    private var baselineElapsed: Int64
    private var baselineReal: Int64
    private var lastCheck: Int64 = 0

    init(session: TimeSession) {
        self.session = session
        baselineElapsed = session.monotonicNanoseconds
        baselineReal = tc_real_ns(CLOCK_MONOTONIC)
        baseline = session.immediateWaitCounts()
    }

    /// Throws ``TimeControlError/livelock(pid:command:immediateWaits:)`` when the loop is found.
    mutating func check(_ scheduler: SessionScheduler, realNow: Int64) throws(TimeControlError) {
        guard realNow - lastCheck >= 10_000_000 else { return }  // the table scan is cheap, but not free
        lastCheck = realNow
        let elapsed = session.monotonicNanoseconds
        let counts = session.immediateWaitCounts()
        if elapsed != baselineElapsed {
            (baseline, baselineElapsed, baselineReal) = (counts, elapsed, realNow)
            return
        }
        let rises = counts.compactMap { pid, count -> (pid: Int32, rise: UInt32)? in
            let rise = count &- (baseline[pid] ?? 0)
            return rise > 0 ? (pid, rise) : nil
        }
        let total = rises.reduce(UInt64(0)) { $0 + UInt64($1.rise) }
        guard total > UInt64(Self.limit), realNow - baselineReal >= Self.minimumRealTime,
              let busiest = rises.max(by: { $0.rise < $1.rise }),
              scheduler.watch.look(ignoring: Set(rises.map(\.pid))) != nil
        else { return }
        throw .livelock(pid: busiest.pid, command: ProcFS.command(of: busiest.pid) ?? "?", immediateWaits: Int(busiest.rise))
    }
}

/// The pids of a session's process table whose processes still run. Each
/// entry is checked once against a recycled pid (the fuller check reads
/// /proc), then trusted until the entry changes.
final class RunningRegisteredPIDs {
    private struct Entry: Hashable {
        var pid: Int32
        var registered: Int64
    }

    private unowned let session: TimeSession
    private var verdicts: [Entry: Bool] = [:]
    /// The table as last read, and a buffer for the next reading: a look reads it without allocating.
    private var last: [tc_proc_slot] = []
    private var lastCount = -1
    private var reading: [tc_proc_slot] = []
    private var lastPIDs: [Int32] = []

    init(session: TimeSession) {
        self.session = session
    }

    func current() -> [Int32] {
        let count = session.mapping.collectProcesses(into: &reading)
        if count == lastCount && (0..<count).allSatisfy({ reading[$0].pid == last[$0].pid && reading[$0].registered == last[$0].registered }) {
            return lastPIDs
        }
        swap(&reading, &last)
        lastCount = count
        let rows = last[..<count].map { Entry(pid: $0.pid, registered: $0.registered) }
        var next: [Entry: Bool] = [:]
        for entry in rows {
            next[entry] = verdicts[entry] ?? (RunningProcess.ifRunning(pid: entry.pid, registeredBoottime: entry.registered) != nil)
        }
        verdicts = next
        lastPIDs = rows.filter { next[$0] == true }.map(\.pid)
        return lastPIDs
    }
}
