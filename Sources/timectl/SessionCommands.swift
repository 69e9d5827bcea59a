import ArgumentParser
import TimeControlKit

struct SessionCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "session",
        abstract: "List, create and remove sessions.",
        subcommands: [List.self, Create.self, Remove.self],
        defaultSubcommand: List.self)

    struct List: ParsableCommand, TakesNoSession {
        static let whyNoSession = "it lists every session"

        static let configuration = CommandConfiguration(
        commandName: "list", abstract: "List the sessions of this user.")

        @Flag(help: "Print JSON for programs instead of text for people.")
        var json = false

        func run() throws {
            let directory = SessionDirectory()
            var rows: [SessionListing] = []
            for name in try directory.sessionNames() {
                do {
                    let status = try TimeSession.open(named: name, in: directory).status()
                    rows.append(SessionListing(name: name, wallClock: status.wallClock, rate: status.frozen ? "frozen" : status.rateText,
                                               wallFrozen: status.wallFrozen, processes: status.processes.count, problem: nil))
                } catch {
                    rows.append(SessionListing(name: name, wallClock: nil, rate: nil, wallFrozen: nil, processes: nil, problem: error.description))
                }
            }
            if json {
                print(try StatusFormat.json(rows))
                return
            }
            if rows.isEmpty {
                print("no sessions in \(directory.path)")
                return
            }
            for row in rows {
                if let problem = row.problem {
                    print("\(row.name)  unusable: \(problem)")
                } else {
                    // A wall frozen under a moving monotonic clock (freeze --wall) must not read as a running session.
                    let wallOnly = row.wallFrozen == true && row.rate != "frozen" ? ", wall frozen" : ""
                    print("\(row.name)  \(row.wallClock ?? "")  \(row.rate ?? "")\(wallOnly)  \(row.processes ?? 0) attached")
                }
            }
        }
    }

    struct Create: ParsableCommand, TakesNoSession {
        static let whyNoSession = "name the session as its argument: 'timectl session create NAME'"

        static let configuration = CommandConfiguration(
            commandName: "create", abstract: "Create a session at real time, or pinned and frozen at AT.",
            discussion: """
                With --at the session is pinned, as the private session of 'timectl run --at' is: \
                frozen, its wall clock at AT and its monotonic clocks at 1000 s, so that runs on \
                sessions created alike read the same values ('timectl resume' starts them).
                """)

        @Argument(help: ArgumentHelp("Session name: letters, digits, '.', '_' and '-'.", valueName: "name"))
        var name: String

        @Option(help: ArgumentHelp("Pin the session and freeze it with its wall clock at AT (formats as for 'freeze').", valueName: "at"))
        var at: String?

        func run() throws {
            guard let at else {
                _ = try TimeSession.create(named: name)
                return
            }
            let target = try InvalidValue.reporting { () throws(FormatError) in try TimeFormats.parseInstant(at) }
            let session = try TimeSession.create(named: name, pinned: true)
            do {
                try session.freeze(at: target)
            } catch {
                try? TimeSession.removeUnchecked(named: name)
                throw error
            }
        }
    }

    struct Remove: ParsableCommand, TakesNoSession {
        static let whyNoSession = "name the sessions as its arguments: 'timectl session remove NAME...'"

        static let configuration = CommandConfiguration(
        commandName: "remove",
            abstract: "Remove sessions.",
            discussion: "Processes still attached keep the timeline they have mapped, running at real speed from where it stands (so none of their waits stays frozen for ever); new processes can no longer attach. Without --force, a session with attached processes is kept. With --force, even a segment that cannot be trusted is removed. Every name is checked first: an unknown one, or one kept, removes none of them.")

        @Argument(help: ArgumentHelp("Sessions to remove.", valueName: "name"))
        var names: [String]

        @Flag(help: "Remove even if processes are attached or the segment is broken.")
        var force = false

        func validate() throws {
            if names.isEmpty { throw ValidationError("no session named: expected 'timectl session remove NAME...'") }
        }

        func run() throws {
            // Every name is checked before anything is removed: a typo in one, or one
            // session still in use, leaves all of them in place.
            var sessions: [(name: String, session: TimeSession?)] = []
            for name in names {
                let session: TimeSession
                do {
                    session = try TimeSession.open(named: name)
                } catch {
                    if case .sessionNotFound(_, let path) = error {
                        throw CommandFailure(message: "no session '\(name)' to remove (\(path) does not exist); 'timectl session list' shows the sessions", status: 1)
                    }
                    guard force, case .untrustedSegment = error else { throw error }
                    sessions.append((name, nil))
                    continue
                }
                let attached = session.attachedProcesses()
                if !force && !attached.isEmpty { throw TimeControlError.sessionInUse(name: name, pids: attached.map(\.pid)) }
                sessions.append((name, session))
            }
            for (name, session) in sessions {
                if let session {
                    try session.remove(force: force)
                } else {
                    try TimeSession.removeUnchecked(named: name)
                }
            }
        }
    }
}

struct SessionListing: Codable {
    var name: String
    var wallClock: String?
    var rate: String?
    /// True when the wall clock stands still: frozen, or `freeze --wall` with the monotonic clocks running.
    var wallFrozen: Bool?
    var processes: Int?
    var problem: String?
}
