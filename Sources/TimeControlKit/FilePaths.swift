#if canImport(Glibc)
import Glibc
#endif

/// Paths as text, without Foundation: the shim's, the loader's, a trace's
/// directory are worked out before anything is opened.
enum FilePaths {
    /// The directory of the running program (where this repository's builds put the shim), or the current one.
    static func executableDirectory() -> String {
        guard let executable = ProcFS.ownExecutablePath() else { return currentDirectory() }
        return parent(of: executable)
    }

    static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    static func currentDirectory() -> String {
        guard let cwd = getcwd(nil, 0) else { return "." }
        defer { free(cwd) }
        return String(cString: cwd)
    }
}
