import ArgumentParser
import TimeControlKit

/// `--session NAME`, accepted before or after the subcommand.
struct SessionOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The session to act on (default: $TIMECTL_SESSION, else 'default').", valueName: "name"))
    var session: String?

    /// The session name in effect.
    func name() throws(TimeControlError) -> String {
        try Self.resolve(session)
    }

    /// The explicit name, else `$TIMECTL_SESSION`, else `default`.
    static func resolve(_ explicit: String?) throws(TimeControlError) -> String {
        let name = named(explicit) ?? "default"
        try SessionDirectory.validate(name: name)
        return name
    }

    /// The explicit name, else `$TIMECTL_SESSION`; nil when neither names a
    /// session (for `record`, which then uses a private one).
    static func named(_ explicit: String?) -> String? {
        explicit ?? ProcessEnvironment.value("TIMECTL_SESSION").flatMap { $0.isEmpty ? nil : $0 }
    }

    func openExisting() throws(TimeControlError) -> TimeSession {
        try TimeSession.open(named: try name())
    }

    func openOrCreate() throws(TimeControlError) -> TimeSession {
        try TimeSession.openOrCreate(named: try name())
    }
}

/// A command that does not act on a session: `--session` (accepted by the
/// root command, before or after any verb) would be silently ignored, so it
/// is refused, saying why.
protocol TakesNoSession {
    /// Why the command has no use for a session, e.g. "it runs the command on a private session of its own".
    static var whyNoSession: String { get }
}

extension SessionOptions {
    /// The one-line refusal when `--session` is given to a command that takes none, else nil.
    static func refusal(for command: ParsableCommand, arguments: ArraySlice<String>) -> String? {
        guard let command = command as? TakesNoSession else { return nil }
        let options = arguments.prefix { $0 != "--" }
        guard options.contains(where: { $0 == "--session" || $0.hasPrefix("--session=") }) else { return nil }
        return "'\(Main.commandPath())' takes no --session: \(type(of: command).whyNoSession)"
    }
}
