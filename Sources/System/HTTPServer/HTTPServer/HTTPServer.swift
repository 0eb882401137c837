import CMicroHTTPD
import Glibc
import Synchronization

/// An HTTP/1.1 server on one address, built on libmicrohttpd with one thread per connection.
///
/// Threads: the handler runs on the connection's own libmicrohttpd thread, possibly on several connections
/// at once, so it must be `@Sendable` and may block only briefly (a streaming body blocks in its stream
/// instead, on that same thread). `port` and `stop()` may be called from any thread except a handler's.
///
/// Answers the wrapper gives by itself are JSON `{"error": "..."}`: 400 for a request target that is not
/// valid percent-encoded UTF-8 or whose `Content-Length` is given twice (a request smuggling shape) or
/// is not a number, 413 for a body over `maxBodyBytes`, 500 for a response the handler built
/// wrongly. A request that has not arrived whole within `Limits.requestSeconds` is closed without
/// an answer; an answer of bytes not sent within it is cut (the connection reset). libmicrohttpd itself answers a few malformed requests (431 for headers over the connection
/// memory limit, 414 for a request target over it, 400 for a broken request line) with its own short
/// HTML bodies (Debian builds it with its messages), which cannot be made JSON.
///
/// SIGPIPE: libmicrohttpd sends with `MSG_NOSIGNAL` on Linux, so a client that vanishes never raises it.
public final class HTTPServer: Sendable {
    /// Limits applied to every connection.
    public struct Limits: Sendable {
        /// libmicrohttpd's memory pool per connection; request line and headers must fit in about half.
        public var connectionMemoryBytes: Int = 32 * 1024
        /// Seconds of silence after which libmicrohttpd closes a connection (not while a stream waits).
        public var idleTimeoutSeconds: Int = 30
        /// Simultaneous connections (each is a thread).
        public var maxConnections: Int = 64
        /// Simultaneous connections from one client address: one host on the network (hostile, or
        /// a buggy client) cannot take every slot from the others. Past it a connection is closed
        /// at once.
        public var maxConnectionsPerClient: Int = 16
        /// Seconds a request may take to arrive whole (request line, headers, body), counted from
        /// the connection's opening or the end of the previous request on it: past it the
        /// connection is closed without an answer. Once it has arrived the handler takes as long as
        /// it takes; an answer of bytes must then be sent within the limit again, counted from when
        /// it is queued (past it the connection is reset), while a streaming answer lasts as long as
        /// it lasts (an event stream for days). The idle timeout counts from the last byte, so a
        /// head or body trickled a byte every 25 s, or an answer read a few bytes every 25 s, held
        /// its connection (a thread, a slot) for ever, the first before any check of who sent it.
        public var requestSeconds: Int = 60
        /// Makes the default limits.
        public init() {}
    }

    /// The actual bound port (the ephemeral one chosen by the kernel when `port` 0 was asked for).
    public let port: Int
    /// The host as given.
    public let host: String
    /// How many times the whole-request reaper woke to look (`Limits.requestSeconds`): at a
    /// deadline due, or one set while it slept with none — never while nothing is due.
    package var requestDeadlineLooks: Int { core.deadlines.looks.load(ordering: .relaxed) }

    private let core: ServerCore
    private let daemon: Mutex<OpaquePointer?>

    /// Binds `host:port` and starts serving on libmicrohttpd's threads. Any thread.
    ///
    /// - Parameters:
    ///   - host: a numeric IPv4 address (`127.0.0.1`, `0.0.0.0`), an IPv6 one (`::1`, `[::1]`), or
    ///     `localhost` (= `127.0.0.1`). Only that address is bound.
    ///   - port: 0...65535; 0 lets the kernel choose (read `port` afterwards).
    ///   - maxBodyBytes: larger request bodies are answered 413 and never buffered.
    ///   - admit: looks at each request once its head has come (`body` empty), before any of its
    ///     body is read: refuses it, lets it go on to `handler`, or with a body of at most so many
    ///     bytes (`HTTPAdmission`). On the connection's thread.
    ///   - handler: answers each request; called on the connection's thread (see the type).
    /// - Throws: `HTTPServerError`, e.g. `cannot listen on 127.0.0.1:8470: Address already in use (errno 98)`.
    public convenience init(
        host: String, port: Int, maxBodyBytes: Int, limits: Limits = Limits(),
        admit: (@Sendable (HTTPRequest) -> HTTPAdmission)? = nil,
        handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse
    ) throws(HTTPServerError) {
        try self.init(
            serving: HTTPListener(host: host, port: port, limits: limits), maxBodyBytes: maxBodyBytes, limits: limits,
            admit: admit, handler: handler)
    }

    /// Starts serving an address bound before (`HTTPListener`), as `init(host:port:…)` does. Any
    /// thread.
    public init(
        serving bound: HTTPListener, maxBodyBytes: Int, limits: Limits = Limits(),
        admit: (@Sendable (HTTPRequest) -> HTTPAdmission)? = nil,
        handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse
    ) throws(HTTPServerError) {
        let listener = try bound.take()
        let host = bound.host
        let core = ServerCore(
            maxBodyBytes: max(0, maxBodyBytes), requestTime: .seconds(max(1, limits.requestSeconds)),
            admit: admit, handler: handler)
        var flags =
            MHD_USE_THREAD_PER_CONNECTION.rawValue | MHD_USE_INTERNAL_POLLING_THREAD.rawValue
            | MHD_USE_POLL.rawValue
        if listener.isIPv6 { flags |= MHD_USE_IPv6.rawValue }
        let context = Unmanaged.passUnretained(core).toOpaque()
        guard
            let daemon = baton_mhd_start(
                flags, listener.fd,
                mhdAccessHandler, context,
                mhdRequestCompleted, context,
                mhdURILog, context,
                mhdConnectionNotify, context,
                max(4096, limits.connectionMemoryBytes), UInt32(clamping: max(1, limits.idleTimeoutSeconds)),
                UInt32(clamping: max(1, limits.maxConnections)),
                UInt32(clamping: max(1, limits.maxConnectionsPerClient)))
        else {
            // Leaked on purpose if libmicrohttpd already closed it: never risk closing a reused descriptor.
            throw HTTPServerError(kind: .cannotStart, address: listener.displayAddress)
        }
        self.host = host
        self.port = listener.boundPort
        self.core = core
        self.daemon = Mutex(daemon)
        core.deadlines.start()
    }

    /// Stops serving: open streams end (their `close()` runs), connections close, handler threads are joined
    /// and the socket is released. Returns within about 100 ms plus the longest running handler. Idempotent:
    /// a later or concurrent second call returns at once.
    /// Any thread except a handler's (it would wait for itself).
    public func stop() {
        guard
            let daemon = self.daemon.withLock({ d -> OpaquePointer? in
                defer { d = nil }
                return d
            })
        else { return }
        core.stopping.store(true, ordering: .releasing)
        core.deadlines.stop()
        MHD_stop_daemon(daemon)
    }

    deinit {
        stop()
    }
}

/// State shared by all of a server's libmicrohttpd callbacks; lives as long as the `HTTPServer`, which
/// stops the daemon before releasing it.
final class ServerCore: Sendable {
    let maxBodyBytes: Int
    /// `Limits.requestSeconds`, kept by its reaper.
    let deadlines: RequestDeadlines
    let admit: (@Sendable (HTTPRequest) -> HTTPAdmission)?
    let handler: @Sendable (HTTPRequest) -> HTTPResponse
    /// Set by `stop()` before `MHD_stop_daemon`, so blocked stream readers give up.
    let stopping = Atomic<Bool>(false)

    init(
        maxBodyBytes: Int, requestTime: Duration, admit: (@Sendable (HTTPRequest) -> HTTPAdmission)?,
        handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse
    ) {
        self.maxBodyBytes = maxBodyBytes
        self.deadlines = RequestDeadlines(limit: requestTime)
        self.admit = admit
        self.handler = handler
    }
}
