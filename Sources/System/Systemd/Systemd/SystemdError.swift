import Glibc

/// A notification that libsystemd could not deliver to the service manager although `NOTIFY_SOCKET`
/// is set: the socket is gone, the path is invalid, or the datagram was refused.
public struct SystemdError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The state line that was not delivered, e.g. `READY=1`.
    public var state: String
    /// The errno libsystemd returned (positive, e.g. `ECONNREFUSED`).
    public var code: Int32

    public init(state: String, code: Int32) {
        self.state = state
        self.code = code
    }

    public var description: String {
        "sd_notify(\"\(state)\") failed: \(String(cString: strerror(code))) (\(code))"
    }
}
