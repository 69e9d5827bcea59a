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
        commandName: "create", abstract: "Create a session at real time.")

        @Argument(help: ArgumentHelp("Session name: letters, digits, '.', '_' and '-'.", valueName: "name"))
        var name: String

        func run() throws {
            _ = try TimeSession.create(named: name)
        }
    }

    struct Remove: ParsableCommand, TakesNoSession {
        static let whyNoSession = "name the sessions as its arguments: 'timectl session remove NAME...'"

        static let configuration = CommandConfiguration(
        commandName: "remove",
            abstract: "Remove sessions.",
            discussion: "Processes still attached keep the timeline they have mapped, running at real speed from where it stands (so none of their waits stays frozen for ever); new processes can no longer attach. Without --force, a session with attached processes is kept. With --force, even a segment that cannot be trusted is removed.")

        @Argument(help: ArgumentHelp("Sessions to remove.", valueName: "name"))
        var names: [String]

        @Flag(help: "Remove even if processes are attached or the segment is broken.")
        var force = false

        func validate() throws {
            if names.isEmpty { throw ValidationError("no session named: expected 'timectl session remove NAME...'") }
        }

        func run() throws {
            for name in names {
                do {
                    try TimeSession.open(named: name).remove(force: force)
                } catch {
                    guard force, case .untrustedSegment = error else { throw error }
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
