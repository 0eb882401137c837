import Glibc
import Synchronization

/// Ports on 127.0.0.1 for servers the tests start. The kernel's choice for port 0 is free only
/// while the probe socket is open: once it is closed, the next probe may get the same port. Tests
/// run in parallel and servers take a moment to bind (snapserver, mosquitto), so two tests could
/// be handed one port and one would talk to the other's server. This hands out each port once per
/// process.
public enum FreePort {
    private static let handedOut = Mutex<Set<Int>>([])

    /// A port nothing in this process has been given before and nothing listens on right now.
    /// `kind` is `SOCK_STREAM` (TCP) or `SOCK_DGRAM` (UDP).
    public static func next(kind: Int32 = Int32(SOCK_STREAM.rawValue)) throws -> Int {
        // Probes stay open until a new port is found, so the kernel cannot offer one twice here.
        var probes: [Int32] = []
        defer { probes.forEach { _ = close($0) } }
        for _ in 0..<64 {
            let (fd, port) = try probe(kind: kind)
            probes.append(fd)
            let fresh = handedOut.withLock { ports in ports.insert(port).inserted }
            if fresh { return port }
        }
        throw FreePortError(description: "no port on 127.0.0.1 this process has not handed out in 64 tries")
    }

    private static func probe(kind: Int32) throws -> (Int32, Int) {
        let fd = socket(AF_INET, kind, 0)
        guard fd >= 0 else { throw FreePortError(description: "socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else {
            let message = String(cString: strerror(errno))
            close(fd)
            throw FreePortError(description: "no free port on 127.0.0.1: \(message)")
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }
}

/// Why no port could be found.
public struct FreePortError: Error, CustomStringConvertible {
    public var description: String
}
