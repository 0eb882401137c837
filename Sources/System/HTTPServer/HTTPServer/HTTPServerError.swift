import Glibc

/// Why an `HTTPServer` could not start.
public struct HTTPServerError: Error, CustomStringConvertible, Sendable, Equatable {
    /// What went wrong.
    public enum Kind: Sendable, Equatable {
        /// `host` is not a numeric IPv4/IPv6 address (or `localhost`), or `port` is not 0...65535.
        case invalidAddress
        /// The socket could not be created, bound or put into listening; `errno` says why.
        case cannotListen
        /// libmicrohttpd refused to start (out of threads or memory).
        case cannotStart
    }

    /// What went wrong.
    public var kind: Kind
    /// The address as given, `host:port` (IPv6 hosts in brackets).
    public var address: String
    /// The C `errno` for `.cannotListen`, else 0.
    public var errno: Int32

    /// Makes an error.
    public init(kind: Kind, address: String, errno: Int32 = 0) {
        self.kind = kind
        self.address = address
        self.errno = errno
    }

    /// E.g. `cannot listen on 127.0.0.1:8470: Address already in use (errno 98)`.
    public var description: String {
        switch kind {
        case .invalidAddress:
            return "cannot listen on \(address): not a numeric IPv4 or IPv6 address and port"
        case .cannotListen:
            return "cannot listen on \(address): \(String(cString: strerror(errno))) (errno \(errno))"
        case .cannotStart:
            return "cannot listen on \(address): libmicrohttpd failed to start"
        }
    }
}
