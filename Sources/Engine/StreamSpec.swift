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

/// What a stream output needs beyond the format: where to write, and how late its audio is heard.
public struct StreamSpec: Sendable, Equatable {
    public var target: StreamTarget
    /// Frames between Baton writing a frame and a listener hearing it: the server's `buffer`.
    /// Reported as the zone's `delayFrames`.
    public var latencyFrames: Int
    /// Silence written right after each (re)connect, so the server's first chunk is complete and it
    /// inserts no gap (about one server chunk, 20 ms).
    public var prefillFrames: Int
    /// First retry delay after a failed connect; it doubles up to `maxBackoffNanoseconds`.
    public var backoffNanoseconds: Int
    public var maxBackoffNanoseconds: Int

    public init(target: StreamTarget, latencyFrames: Int, prefillFrames: Int, backoffNanoseconds: Int = 100_000_000,
                maxBackoffNanoseconds: Int = 2_000_000_000) {
        self.target = target
        self.latencyFrames = latencyFrames
        self.prefillFrames = prefillFrames
        self.backoffNanoseconds = backoffNanoseconds
        self.maxBackoffNanoseconds = maxBackoffNanoseconds
    }
}
