import BatonTesting
import Glibc

/// A stand-in for systemd's notification socket: an AF_UNIX datagram socket bound to a temporary
/// path or an abstract name, whose address is what `NOTIFY_SOCKET` would hold. Receives what
/// libsystemd's `sd_notify` sends. Test thread only.
final class NotifySocket {
    let fd: Int32
    /// The value for `NOTIFY_SOCKET`: a path, or `@name` for an abstract socket.
    let address: String
    private let path: String?

    enum Kind: String, CustomStringConvertible, CaseIterable {
        case path, abstract
        var description: String { rawValue }
    }

    init(_ kind: Kind) {
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        precondition(fd >= 0, "socket: \(String(cString: strerror(errno)))")
        let name: String
        switch kind {
        case .path:
            name = TestDirectory.make("notify") + "/notify.sock"
            path = name
            address = name
        case .abstract:
            name = "baton-tooltests-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            path = nil
            address = "@" + name
        }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(name.utf8)
        let offset = kind == .abstract ? 1 : 0  // abstract: a leading NUL, then the name
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.initializeMemory(as: UInt8.self, repeating: 0)
            for (i, b) in bytes.enumerated() { raw[offset + i] = b }
        }
        let length = MemoryLayout<sa_family_t>.size + offset + bytes.count + (kind == .path ? 1 : 0)
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(length)) }
        }
        precondition(rc == 0, "bind \(address): \(String(cString: strerror(errno)))")
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit {
        close(fd)
        if let path {
            unlink(path)
            rmdir(String(path[..<path.lastIndex(of: "/")!]))
        }
    }

    /// The next datagram's text, or nil after 2 s without one.
    func receive() -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard n >= 0 else { return nil }
        return String(decoding: buffer[0..<n], as: UTF8.self)
    }
}
