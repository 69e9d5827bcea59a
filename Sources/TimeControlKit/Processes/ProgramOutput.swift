#if canImport(Glibc)
import Glibc
#endif
import SystemPackage

/// What a short helper program prints (`timectl faketime` asks `date -d` for a timestamp, as faketime does).
@_spi(CommandLine)
public enum ProgramOutput {
    /// Runs `arguments` (the program looked up in the environment's `PATH`) with `environment`; returns its
    /// exit status (128+N if killed by signal N) and what it wrote to standard output and standard error.
    public static func of(_ arguments: [String], environment: [String]) throws(TimeControlError) -> (status: Int32, output: String) {
        guard let command = arguments.first else { throw .commandNotFound("") }
        let executable = try Spawn.resolve(command, path: Spawn.searchPath(in: environment))
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { throw .system(call: "pipe2", path: nil, errno: Errno(rawValue: errno)) }
        let pid: pid_t
        do {
            pid = try Spawn.start(executable, arguments: arguments,
                                  options: .init(environment: environment, standardOutput: ends[1], standardError: ends[1],
                                                closeInChild: [ends[0]]))
        } catch {
            close(ends[0])
            close(ends[1])
            throw error
        }
        close(ends[1])
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(ends[0], &buffer, buffer.count)
            if count > 0 { output += buffer[0..<count] } else if count == 0 || errno != EINTR { break }
        }
        close(ends[0])
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return (Spawn.exitStatus(status), String(decoding: output, as: UTF8.self))
    }
}
