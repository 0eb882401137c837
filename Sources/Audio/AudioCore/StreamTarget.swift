/// Where a stream output writes: a Snapcast stream source that reads raw interleaved S16_LE PCM.
public enum StreamTarget: Sendable, Equatable, CustomStringConvertible {
    /// A TCP source in `mode=server`: Baton connects to `host` (a numeric IPv4 or IPv6 address:
    /// names are never resolved on the output thread) at `port` and writes.
    case tcp(host: String, port: Int)
    /// A FIFO the server reads (a `pipe://` source); Baton opens it for writing without blocking.
    case fifo(path: String)

    /// `tcp://127.0.0.1:4953`, `tcp://[::1]:4953` or the FIFO's path.
    public var description: String {
        switch self {
        case .tcp(let host, let port): host.contains(":") ? "tcp://[\(host)]:\(port)" : "tcp://\(host):\(port)"
        case .fifo(let path): path
        }
    }
}
