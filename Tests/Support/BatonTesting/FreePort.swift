import Glibc
import OSThread
import Synchronization

/// Ports on 127.0.0.1 for servers the tests start, each handed out once per process, and taken below
/// the kernel's ephemeral range (`ip_local_port_range`, 32768–60999 here). A port the kernel chose
/// for a probe bound to port 0 is an ephemeral port: once the probe is closed, any outgoing
/// connection of the ~100 tests running in parallel (libcurl, an HTTP client, mpd) may be given it
/// as its local port before the server binds it — batond then failed with "address in use" and the
/// test waited for it in vain ("batond did not start", seen once in a parallel run). Below that range
/// only an explicit bind takes a port, and every test's goes through here.
public enum FreePort {
    private static let handedOut = Mutex<Set<Int>>([])

    /// The ports handed out: from 10000 to just below the ephemeral range.
    static let candidates: Range<Int> = {
        let low =
            (FileIO.firstLine("/proc/sys/net/ipv4/ip_local_port_range") ?? "")
            .split(whereSeparator: { $0 == " " || $0 == "\t" }).first.flatMap { Int($0) } ?? 32_768
        return 10_000..<max(10_001, low)
    }()

    /// A port nothing in this process has been given before and nothing is bound to right now.
    /// `kind` is `SOCK_STREAM` (TCP) or `SOCK_DGRAM` (UDP).
    public static func next(kind: Int32 = Int32(SOCK_STREAM.rawValue)) throws -> Int {
        for _ in 0..<256 {
            let port = Int.random(in: candidates)
            guard handedOut.withLock({ $0.insert(port).inserted }) else { continue }
            if try isFree(port, kind: kind) { return port }
        }
        throw FreePortError(description: "no free port on 127.0.0.1 in \(candidates) after 256 tries")
    }

    /// True when `port` can be bound on 127.0.0.1 now (bound and closed at once: no listen, no TIME_WAIT).
    private static func isFree(_ port: Int, kind: Int32) throws -> Bool {
        let fd = socket(AF_INET, kind, 0)
        guard fd >= 0 else { throw FreePortError(description: "socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}

/// Why no port could be found.
public struct FreePortError: Error, CustomStringConvertible {
    public var description: String
}
