import Glibc
import Synchronization

/// An address bound and listening, not served yet: a program takes it before it sets anything else
/// going, so that an address it cannot have stops it first; connections wait in the backlog until
/// `HTTPServer(serving:)` serves it. Its socket is closed when it is let go unserved. Any thread.
public final class HTTPListener: Sendable {
    private let socket: Mutex<ListeningSocket?>
    /// The address as asked (`host` of `HTTPServer`).
    public let host: String
    /// The port bound (the kernel's choice for port 0).
    public let port: Int

    /// Binds `host:port` and listens (see `HTTPServer.init(host:port:…)` for the forms of `host`).
    public init(host: String, port: Int, limits: HTTPServer.Limits = HTTPServer.Limits()) throws(HTTPServerError) {
        let bound = try ListeningSocket(host: host, port: port, connectionLimit: limits.maxConnections)
        socket = Mutex(bound)
        self.host = host
        self.port = bound.boundPort
    }

    /// The socket, for the server that serves it from now on; an error if one took it already.
    func take() throws(HTTPServerError) -> ListeningSocket {
        guard
            let taken = socket.withLock({ s -> ListeningSocket? in
                defer { s = nil }
                return s
            })
        else { throw HTTPServerError(kind: .cannotStart, address: "\(host):\(port)") }
        return taken
    }

    deinit {
        if let unserved = socket.withLock({ $0 }) { close(unserved.fd) }
    }
}

/// A TCP socket bound to one address and listening, made here rather than by libmicrohttpd so that a bind
/// failure comes back with its real `errno` and the bound port is known (`getsockname`).
/// libmicrohttpd takes ownership of `fd` once the daemon starts.
struct ListeningSocket {
    let fd: Int32
    let isIPv6: Bool
    let boundPort: Int
    /// `host:port` as asked, IPv6 in brackets, for messages.
    let displayAddress: String
    /// How long what is sent to a client may go unacknowledged before its connection is dropped
    /// (`TCP_USER_TIMEOUT`): three of an event stream's 15 s keep-alives.
    static let unacknowledgedMilliseconds = 45_000

    init(host: String, port: Int, connectionLimit: Int) throws(HTTPServerError) {
        var bare = host
        if bare.hasPrefix("[") && bare.hasSuffix("]") { bare = String(bare.dropFirst().dropLast()) }
        if bare == "localhost" { bare = "127.0.0.1" }
        let isIPv6 = bare.contains(":")
        let display = isIPv6 ? "[\(bare)]:\(port)" : "\(bare):\(port)"
        displayAddress = display
        guard (0...65535).contains(port) else {
            throw HTTPServerError(kind: .invalidAddress, address: displayAddress)
        }

        var storage = sockaddr_storage()
        let length: socklen_t
        let parsed = withUnsafeMutableBytes(of: &storage) { raw -> Bool in
            if isIPv6 {
                let address = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in6.self)
                address.pointee.sin6_family = sa_family_t(AF_INET6)
                address.pointee.sin6_port = in_port_t(UInt16(port).bigEndian)
                return inet_pton(AF_INET6, bare, &address.pointee.sin6_addr) == 1
            } else {
                let address = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in.self)
                address.pointee.sin_family = sa_family_t(AF_INET)
                address.pointee.sin_port = in_port_t(UInt16(port).bigEndian)
                return inet_pton(AF_INET, bare, &address.pointee.sin_addr) == 1
            }
        }
        guard parsed else { throw HTTPServerError(kind: .invalidAddress, address: displayAddress) }
        length = socklen_t(isIPv6 ? MemoryLayout<sockaddr_in6>.size : MemoryLayout<sockaddr_in>.size)

        let socketFD = socket(
            isIPv6 ? AF_INET6 : AF_INET,
            Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard socketFD >= 0 else { throw HTTPServerError(kind: .cannotListen, address: display, errno: Glibc.errno) }
        func fail() -> HTTPServerError {
            let error = HTTPServerError(kind: .cannotListen, address: display, errno: Glibc.errno)
            close(socketFD)
            return error
        }
        var one: Int32 = 1
        // SO_REUSEADDR only lets a restarted daemon bind past TIME_WAIT; a live listener still gets EADDRINUSE.
        guard setsockopt(socketFD, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size)) == 0 else {
            throw fail()
        }
        if isIPv6 {
            // `::` is every interface, IPv4 too (as CONFIG.md and the cross-site guard have it): a
            // socket only for IPv6 refused every IPv4 browser. Any other address is IPv6's alone.
            let unspecified = withUnsafeBytes(of: &storage) {
                $0.load(fromByteOffset: MemoryLayout<sockaddr_in6>.offset(of: \.sin6_addr)!, as: in6_addr.self)
            }
            var only: Int32 = withUnsafeBytes(of: unspecified) { $0.allSatisfy { $0 == 0 } } ? 0 : 1
            guard
                setsockopt(socketFD, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &only, socklen_t(MemoryLayout<Int32>.size)) == 0
            else { throw fail() }
        }
        // A client that vanished without a word (a phone off the Wi-Fi): what is sent to it (an
        // event stream's keep-alives) goes unacknowledged, and after this long the connection is
        // dropped; it held a connection thread and one of the client's slots for about 15 minutes,
        // until TCP's retransmissions gave up. The accepted sockets inherit it from this one.
        var userTimeout = UInt32(Self.unacknowledgedMilliseconds)
        guard
            setsockopt(
                socketFD, Int32(IPPROTO_TCP), TCP_USER_TIMEOUT, &userTimeout, socklen_t(MemoryLayout<UInt32>.size))
                == 0
        else { throw fail() }
        let bound = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socketFD, $0, length) }
        }
        guard bound == 0 else { throw fail() }
        guard listen(socketFD, Int32(clamping: max(16, connectionLimit))) == 0 else { throw fail() }

        var actual = sockaddr_storage()
        var actualLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socketFD, $0, &actualLength) }
        }
        guard named == 0 else { throw fail() }
        let networkPort = withUnsafeBytes(of: &actual) { raw in
            isIPv6 ? raw.load(as: sockaddr_in6.self).sin6_port : raw.load(as: sockaddr_in.self).sin_port
        }
        self.fd = socketFD
        self.isIPv6 = isIPv6
        self.boundPort = Int(UInt16(bigEndian: networkPort))
    }
}

/// The numeric form of an IPv4 or IPv6 socket address, or nil.
func numericHost(_ address: UnsafePointer<sockaddr>) -> String? {
    var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
    let family = Int32(address.pointee.sa_family)
    let result: UnsafePointer<CChar>?
    switch family {
    case AF_INET:
        result = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 in
            withUnsafePointer(to: v4.pointee.sin_addr) { inet_ntop(AF_INET, $0, &buffer, socklen_t(buffer.count)) }
        }
    case AF_INET6:
        result = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 in
            withUnsafeBytes(of: v6.pointee.sin6_addr) { bytes in
                // An IPv4 client of a `::` socket (`::ffff:a.b.c.d`) is named by its IPv4 address,
                // as on an IPv4 socket: one client, one name, for the guess limits and the log.
                if bytes.prefix(10).allSatisfy({ $0 == 0 }) && bytes[10] == 0xff && bytes[11] == 0xff {
                    return inet_ntop(AF_INET, bytes.baseAddress! + 12, &buffer, socklen_t(buffer.count))
                }
                return inet_ntop(AF_INET6, bytes.baseAddress!, &buffer, socklen_t(buffer.count))
            }
        }
    default:
        return nil
    }
    guard result != nil else { return nil }
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
