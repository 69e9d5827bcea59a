import Foundation
import Testing
@testable import TimeControlKit

/// Time stamps the kernel hands a program with the packets it receives are
/// mapped to the session, as file times are: an instant the session lived
/// through shows as the virtual time at which it happened.
@Suite("Packet time stamps follow the session")
struct PacketTimeStampsTests {
    /// packet_stamps's lines as NAME → nanoseconds since the epoch.
    func stamps(_ result: ProcessResult) throws -> [String: Int64] {
        var stamps: [String: Int64] = [:]
        for line in result.lines {
            let fields = line.split(separator: " ")
            let parts = try #require(fields.count == 2 ? fields[1].split(separator: ".") : nil, "\(result)")
            let seconds = try #require(Int64(parts[0]), "\(line)"), nanoseconds = try #require(Int64(parts[1]), "\(line)")
            stamps[String(fields[0])] = seconds * 1_000_000_000 + nanoseconds
        }
        return stamps
    }

    static let names = ["timestampns", "timestamp", "timestampns_new", "timestamping", "recvmmsg", "siocgstampns", "siocgstamp", "siocgstampns_new"]

    @Test("every stamp (SO_TIMESTAMPNS, SO_TIMESTAMP, SO_TIMESTAMPNS_NEW and SO_TIMESTAMPING through recvmsg, recvmmsg, SIOCGSTAMPNS, SIOCGSTAMP and SIOCGSTAMPNS_NEW) is the frozen time")
    func frozen() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let probe = try CFixture.path("packet_stamps")
        let result = try sandbox.timectl("run", "--at", "@1451649600", "--frozen", "--", probe)
        #expect(result.status == 0, "\(result)")
        let stamps = try stamps(result)
        for name in ["before", "after"] + Self.names {
            #expect(stamps[name] == Sandbox.frozenStart, "\(name): \(result)")
        }
    }

    @Test("on a running session each stamp lies between the program's own clock reads before and after")
    func running() throws {
        try Build.requireShim()
        let sandbox = try Sandbox()
        let probe = try CFixture.path("packet_stamps")
        let result = try sandbox.timectl("run", "--at", "@1451649600", "--", probe)
        #expect(result.status == 0, "\(result)")
        let stamps = try stamps(result)
        let before = try #require(stamps["before"]), after = try #require(stamps["after"])
        #expect(before >= Sandbox.frozenStart && after < Sandbox.frozenStart + 600 * 1_000_000_000, "\(result)")
        for name in Self.names {
            // SO_TIMESTAMP and SIOCGSTAMP carry microseconds, cut; and the stamps map through the session's
            // CLOCK_REALTIME history, its clock reads through CLOCK_MONOTONIC: up to a microsecond either way.
            let stamp = try #require(stamps[name], "\(name): \(result)")
            #expect(stamp >= before - 1_000 && stamp <= after + 1_000, "\(name): \(result)")
        }
    }

    /// ping (iputils) prints with -D the time it read, and computes each round trip from the send time it read
    /// (carried in the packet) and the kernel's SO_TIMESTAMP stamp of the reply; as root it runs controlled.
    @Test("ping -D on a frozen session prints the session's time and a round trip of 0 ms",
          .enabled(if: geteuid() == 0, "ping runs controlled only as root: for other users it has file capabilities, and is refused"))
    func ping() throws {
        try Build.requireShim()
        let ping = try #require(["/usr/bin/ping", "/bin/ping"].first { FileManager.default.isExecutableFile(atPath: $0) },
                                "ping is missing: scripts/install-deps.sh installs iputils-ping")
        let sandbox = try Sandbox()
        let result = try sandbox.timectl("run", "--at", "@1451649600", "--frozen", "--", ping, "-D", "-c", "1", "127.0.0.1")
        #expect(result.status == 0, "\(result)")
        let reply = try #require(result.lines.first { $0.contains("icmp_seq=1") }, "\(result)")
        #expect(reply.hasPrefix("[1451649600.000000] ") && reply.hasSuffix(" time=0.000 ms"), "\(result)")
        #expect(result.lines.last == "rtt min/avg/max/mdev = 0.000/0.000/0.000/0.000 ms", "\(result)")
    }
}
