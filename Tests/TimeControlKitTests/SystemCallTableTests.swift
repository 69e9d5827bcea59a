import Foundation
import Testing
@testable import TimeControlKit

/// The scheduler reads which system call a blocked thread is in as a number
/// (`/proc/PID/task/TID/syscall`); each architecture numbers them its own
/// way (issue 32). Its tables are checked against the kernel's own headers,
/// as each architecture's C compiler sees them.
@Suite("System-call numbers per architecture")
struct SystemCallTableTests {
    /// What `compiler` makes of `__NR_<name>` for every call after `#include <asm/unistd.h>`: the number, or nil
    /// where the architecture has no such call (the macro is left as it was).
    func kernelNumbers(compiler: String) throws -> [SystemCall: Int?] {
        let directory = try makeScratchDirectory("timectl-syscalls")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let source = directory + "/numbers.c"
        let lines = ["#include <asm/unistd.h>"] + SystemCall.allCases.map { "\($0.rawValue) __NR_\($0.rawValue)" }
        try lines.joined(separator: "\n").appending("\n").write(toFile: source, atomically: true, encoding: .utf8)
        let result = try runProgram("/usr/bin/env", [compiler, "-E", "-P", source], environment: ProcessInfo.processInfo.environment)
        try #require(result.status == 0, "\(compiler) -E: \(result) (scripts/install-deps.sh installs the compilers)")
        var numbers: [SystemCall: Int?] = [:]
        for line in result.lines {
            let words = line.split(separator: " ", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard words.count == 2, let call = SystemCall(rawValue: words[0]) else { continue }
            // asm-generic spells some as arithmetic, e.g. (__NR_arch_specific_syscall + 0): none of ours, but say so.
            numbers[call] = words[1].hasPrefix("__NR_") ? .some(nil) : .some(Int(words[1]))
            try #require(words[1].hasPrefix("__NR_") || Int(words[1]) != nil, "\(compiler): \(line)")
        }
        try #require(numbers.count == SystemCall.allCases.count, "\(compiler) -E gave \(result.stdout)")
        return numbers
    }

    @Test("the x86-64 table is the host compiler's asm/unistd.h")
    func x86_64() throws {
        let numbers = try kernelNumbers(compiler: "x86_64-linux-gnu-gcc")
        for call in SystemCall.allCases {
            #expect(numbers[call] == SystemCall.x86_64[call], "\(call)")
        }
    }

    @Test("the aarch64 table is the cross toolchain's asm/unistd.h (asm-generic): the same calls but poll, select, epoll_wait and pause, which aarch64 does not have")
    func aarch64() throws {
        let numbers = try kernelNumbers(compiler: "aarch64-linux-gnu-gcc")
        for call in SystemCall.allCases {
            #expect(numbers[call] == SystemCall.aarch64[call], "\(call)")
        }
        #expect(Set(SystemCall.allCases).subtracting(SystemCall.aarch64.keys) == [.poll, .select, .epoll_wait, .pause])
    }

    @Test("the table timectl was built with is its own machine's")
    func chosenAtCompileTime() {
        var machine = utsname()
        uname(&machine)
        let name = withUnsafeBytes(of: machine.machine) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let expected = name == "aarch64" ? SystemCall.aarch64 : SystemCall.x86_64
        #expect(SystemCall.numbers == expected, "\(name)")
        #expect(SystemCall(number: expected[.futex]!) == .futex && SystemCall.name(of: 100_000) == "system call 100000")
    }
}
