#if canImport(Glibc)
import Glibc
#endif
import TimeShimC

/// What kind of program an executable is, as the shim decides it at every
/// exec (`tc_program_inspect` in timectl_program.h: one decision, in C, for
/// `timectl run` and for the shim), following `#!` lines to the interpreter.
struct Program {
    let kind: tc_program_kind
    /// What the file itself is, leaving out secure execution (which an exec by this process would bring).
    let elfKind: tc_program_kind
    /// The file the kind was decided on: the executable or its interpreter.
    let decidedOn: String
    /// The sanitizer runtime among its DT_NEEDED (it must be preloaded before the shim).
    let sanitizerRuntime: String?
    /// Its DT_NEEDED entries.
    let needed: [String]
    /// Whether musl's dynamic loader starts it (its `PT_INTERP` is `ld-musl-*`): it needs the musl build of the shim.
    let isMusl: Bool
    /// Its dynamic loader (`PT_INTERP`), empty when it has none.
    let interpreter: String

    init(path: String) {
        var program = tc_program()
        tc_program_inspect(AT_FDCWD, path, &program)
        self.path = path
        kind = program.kind
        elfKind = program.elf_kind
        decidedOn = withUnsafeBytes(of: &program.decided_on) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let runtime = withUnsafeBytes(of: &program.sanitizer_runtime) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        sanitizerRuntime = runtime.isEmpty ? nil : runtime
        isMusl = program.is_musl != 0
        interpreter = withUnsafeBytes(of: &program.interpreter) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let count = Int(program.needed_count)
        needed = withUnsafeBytes(of: &program.needed) { raw in
            let width = raw.count / Int(TC_PROGRAM_MAX_NEEDED)
            return (0..<count).map { index in
                String(decoding: raw[index * width..<(index + 1) * width].prefix { $0 != 0 }, as: UTF8.self)
            }
        }
    }

    /// Whether it is statically linked and runs through `timectl-static-loader`
    /// (docs/go-and-static.md), as the shim starts static programs at exec.
    var runsThroughLoader: Bool { kind == TC_PROGRAM_STATIC && decidedOn == path && tc_shim_controls_static() != 0 }

    /// The file it was asked about.
    let path: String

    /// Why the shim cannot control it, or nil.
    var problem: String? { runsThroughLoader ? nil : tc_program_problem(kind).map { String(cString: $0) } }
}
