import ArgumentParser

/// A command that runs a program named by its last arguments (run, record,
/// replay): the program may come with or without '--' in front of it, as
/// with `env`, `nice` or `timeout`.
protocol RunsAProgram: ParsableCommand {
    /// The command's options that take a value: the word after one is its
    /// value, not the program. (`--session`, the root command's, is one for
    /// every command.)
    static var optionsTakingValues: Set<String> { get }
    /// How many positional arguments come before the program (replay's trace).
    static var argumentsBeforeProgram: Int { get }
    /// Whether a word that starts with '-' is the first of the positional arguments, not an option
    /// (faketime's '-10d').
    static func startsProgram(_ word: String) -> Bool
}

extension RunsAProgram {
    static var argumentsBeforeProgram: Int { 0 }
    static func startsProgram(_ word: String) -> Bool { false }
}

enum ProgramArguments {
    static let commands: [any RunsAProgram.Type] = [Run.self, Record.self, Replay.self, Faketime.self]

    /// `[--session S] COMMAND OPTIONS [ARGUMENTS] PROGRAM…` with `--` put in
    /// front of PROGRAM when it was left out, so that every word from the
    /// program on is the program's, options included. (ArgumentParser's
    /// passthrough capture would take the program without '--', but then no
    /// longer accepts --session after the command, an option the root
    /// command has too.)
    static func terminatingOptions(_ words: [String]) -> [String] {
        var index = words.startIndex
        while index < words.endIndex, words[index].hasPrefix("-") {
            guard isSession(words[index]) else { return words }
            index += words[index] == "--session" ? 2 : 1
        }
        guard index < words.endIndex,
              let command = commands.first(where: { $0.configuration.commandName == words[index] })
        else { return words }
        index += 1
        var positionals = 0
        while index < words.endIndex {
            let word = words[index]
            if word == "--" { return words }
            if command.startsProgram(word) {
                var terminated = words
                terminated.insert("--", at: index)
                return terminated
            }
            if word.hasPrefix("-") {
                index += word == "--session" || command.optionsTakingValues.contains(word) ? 2 : 1
            } else if positionals < command.argumentsBeforeProgram {
                positionals += 1
                index += 1
            } else {
                var terminated = words
                terminated.insert("--", at: index)
                return terminated
            }
        }
        return words
    }

    private static func isSession(_ word: String) -> Bool { word == "--session" || word.hasPrefix("--session=") }
}
