import Synchronization
import Testing

/// An issue the case's own process recorded, as its event stream has it, to
/// record again in the runner so that it reads exactly as it did there: an
/// `Expectation failed: …` (of `#expect` or `#require`), a `Caught error: …`,
/// an `Issue recorded` with its comments, a time limit exceeded.
///
/// Swift Testing lets a scope rewrite every issue recorded in it
/// (`IssueHandlingTrait.compactMapIssues`, the public form of what its exit
/// tests do with a child's issues): each issue is recorded in the form
/// closest to its kind, then given, in that scope, its original kind,
/// comments and severity.
struct ReportedIssue: Sendable {
    /// The first line Swift Testing printed for it (`Expectation failed: (x → 1) == 2`).
    var headline: String
    var comments: [String]
    var severity: Issue.Severity
    var location: SourceLocation

    /// Records `issues` in order, as issues of the running test.
    static func record(_ issues: [ReportedIssue], for test: Test) async {
        guard !issues.isEmpty else { return }
        let current = Mutex<ReportedIssue?>(nil)
        let rewrite = IssueHandlingTrait.compactMapIssues { issue in
            guard let reported = current.withLock({ $0 }) else { return issue }
            var issue = issue
            issue.comments = reported.comments.map { Comment(rawValue: $0) }
            issue.severity = reported.severity
            if let kind = reported.kind { issue.kind = kind }
            return issue
        }
        try? await rewrite.provideScope(for: test, testCase: Test.Case.current) {
            for reported in issues {
                current.withLock { $0 = reported }
                reported.recordInItsForm()
            }
        }
    }

    /// Records the issue in the form that gives its kind: an expectation through the check its macro calls, an error as an error.
    private func recordInItsForm() {
        if let expression = headline.dropPrefix("Expectation failed: ") {
            _ = __checkValue(false, expression: .__fromSyntaxNode(expression), comments: [], isRequired: false, sourceLocation: location)
        } else if let error = headline.dropPrefix("Caught error: ") {
            Issue.record(Error(description: error), sourceLocation: location)
        } else if headline == "Issue recorded" || kind != nil {
            Issue.record(severity: severity, sourceLocation: location)
        } else {
            // A kind recorded otherwise: its headline kept as the first comment.
            Issue.record(Comment(rawValue: headline), severity: severity, sourceLocation: location)
        }
    }

    /// The kind to set for headlines that Swift Testing prints from the kind alone.
    private var kind: Issue.Kind? {
        switch headline {
        case "Known issue was not recorded": return .knownIssueNotRecorded
        case "An API was misused": return .apiMisused
        case "A system failure occurred": return .system
        default:
            // "Time limit was exceeded: 60.000 seconds"
            guard let limit = headline.dropPrefix("Time limit was exceeded: "), limit.hasSuffix(" seconds"),
                  let seconds = Double(limit.dropLast(8)) else { return nil }
            let whole = Int64(seconds)
            return .timeLimitExceeded(timeLimitComponents: (whole, Int64(((seconds - Double(whole)) * 1e18).rounded())))
        }
    }

    /// An error that describes itself as the case's process described its own.
    struct Error: Swift.Error, CustomStringConvertible {
        let description: String
    }
}

extension String {
    /// The rest of the string after `prefix`, or nil when it does not start with it.
    func dropPrefix(_ prefix: String) -> String? {
        hasPrefix(prefix) ? String(dropFirst(prefix.count)) : nil
    }
}
