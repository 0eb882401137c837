import Glibc
import OSThread
import Synchronization

/// A small HTTP/1.1 server on 127.0.0.1 that serves fixed files, each body spread over a chosen
/// time in chunks (a TTS engine or a slow network), for the daemon's URL announcement tests. Each
/// connection is answered on its own thread; one request per connection (`Connection: close`).
///
/// Thread: `route` and `stop` from the test's thread; `beforeLastChunk` runs on a connection thread.
public final class SlowHTTPServer: @unchecked Sendable {
    // @unchecked: `routes` and `served` are behind `state`; the socket is `let`.
    /// One file: its status, Content-Type (nil: none sent), body, and how it is sent.
    public struct Route: Sendable {
        public var status: Int
        public var contentType: String?
        public var body: [UInt8]
        /// The body is sent in `chunks` pieces spread evenly over `seconds`.
        public var seconds: Double
        public var chunks: Int
        /// Send `Content-Length` (false: the body ends with the connection).
        public var sendLength: Bool
        /// Called just before the last chunk is written (to look at what the daemon did meanwhile).
        public var beforeLastChunk: (@Sendable () -> Void)?
        /// Seconds between the head and the body's first byte (an engine still making the file).
        public var firstByteDelay: Double

        public init(
            status: Int = 200, contentType: String?, body: [UInt8], seconds: Double = 0, chunks: Int = 1,
            sendLength: Bool = true, firstByteDelay: Double = 0, beforeLastChunk: (@Sendable () -> Void)? = nil
        ) {
            self.status = status
            self.contentType = contentType
            self.body = body
            self.seconds = seconds
            self.chunks = max(1, chunks)
            self.sendLength = sendLength
            self.firstByteDelay = firstByteDelay
            self.beforeLastChunk = beforeLastChunk
        }
    }

    public let port: Int
    private let fd: Int32
    private struct State {
        var routes: [String: Route] = [:]
        /// Path → monotonic seconds at which its last byte was written.
        var lastByteAt: [String: Double] = [:]
        var requests: [String] = []
        /// The body of each request that had one (a POST), by its path.
        var bodies: [String: [UInt8]] = [:]
    }
    private let state = Mutex(State())
    private let running = Atomic<Bool>(true)
    private var acceptor: OSThread?

    public struct Failed: Error, CustomStringConvertible {
        public var description: String
    }

    public init() throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let fd = self.fd
        let ok = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard ok else {
            close(fd)
            throw Failed(description: "SlowHTTPServer: cannot listen: \(String(cString: strerror(errno)))")
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        acceptor = OSThread.start { [self] in acceptLoop() }
    }

    /// `http://127.0.0.1:<port><path>`.
    public func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    /// Serves `route` at `path` (with any query string when `path` has none).
    public func route(_ path: String, _ route: Route) { state.withLock { $0.routes[path] = route } }

    /// When the last byte of `path` was written (`CLOCK_MONOTONIC` seconds), if it was.
    public func lastByteAt(_ path: String) -> Double? { state.withLock { $0.lastByteAt[path] } }

    /// The request paths received, in order.
    public var requests: [String] { state.withLock { $0.requests } }

    /// The body of the last request to `path` that had one (a POST's form), as text.
    public func body(_ path: String) -> String? {
        state.withLock { $0.bodies[path] }.map { String(decoding: $0, as: UTF8.self) }
    }

    public func stop() {
        guard running.exchange(false, ordering: .acquiringAndReleasing) else { return }
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
        acceptor?.join()
    }

    deinit { stop() }

    /// `CLOCK_MONOTONIC` in seconds.
    public static func now() -> Double {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
    }

    private func acceptLoop() {
        while running.load(ordering: .acquiring) {
            let client = accept(fd, nil, nil)
            // Not inherited by the processes other tests start: a child that kept it held the
            // connection open after this server closed it (`accept4` does not import).
            if client >= 0 { _ = fcntl(client, F_SETFD, FD_CLOEXEC) }
            if client < 0 {
                if errno == EINTR { continue }
                return
            }
            OSThread.detach { [self] in serve(client) }
        }
    }

    private func serve(_ client: Int32) {
        defer { close(client) }
        var request: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 4096)
        func headEnd() -> Int? {
            guard request.count >= 4 else { return nil }
            return (0...(request.count - 4)).first { request[$0..<($0 + 4)] == [13, 10, 13, 10] }.map { $0 + 4 }
        }
        while headEnd() == nil && request.count < 65_536 {
            let n = buf.withUnsafeMutableBytes { recv(client, $0.baseAddress, 4096, 0) }
            if n <= 0 { return }
            request += buf[..<n]
        }
        // A body (a POST's form): read whole, as its Content-Length says (unread, the close would
        // reset the connection under the client's feet).
        let headText = String(decoding: request.prefix(headEnd() ?? request.count), as: UTF8.self)
        let length =
            headText.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
            .flatMap { Int($0.dropFirst("content-length:".count).drop { $0 == " " }.prefix { $0.isNumber }) } ?? 0
        while request.count - (headEnd() ?? 0) < min(length, 1 << 20) {
            let n = buf.withUnsafeMutableBytes { recv(client, $0.baseAddress, 4096, 0) }
            if n <= 0 { return }
            request += buf[..<n]
        }
        let body = Array(request[(headEnd() ?? request.count)...])
        let line = String(decoding: request.prefix { $0 != 13 }, as: UTF8.self).split(separator: " ")
        let path = line.count > 1 ? String(line[1]) : "/"
        let route = state.withLock { s in
            s.requests.append(path)
            if !body.isEmpty { s.bodies[path] = body }
            // A route without a query string serves every query (a Subsonic call's token varies).
            return s.routes[path] ?? s.routes[String(path.prefix { $0 != "?" })]
        }
        guard let route else {
            send(client, Array("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8))
            markDone(path)
            return
        }
        var head = "HTTP/1.1 \(route.status) \(route.status == 200 ? "OK" : "Status")\r\nConnection: close\r\n"
        if let type = route.contentType { head += "Content-Type: \(type)\r\n" }
        if route.sendLength { head += "Content-Length: \(route.body.count)\r\n" }
        guard send(client, Array((head + "\r\n").utf8)) else { return }
        if route.firstByteDelay > 0 { usleep(UInt32(route.firstByteDelay * 1e6)) }
        let size = (route.body.count + route.chunks - 1) / route.chunks
        var offset = 0
        var index = 0
        while offset < route.body.count {
            let end = min(route.body.count, offset + max(1, size))
            if end == route.body.count { route.beforeLastChunk?() }
            guard send(client, Array(route.body[offset..<end])) else { return }
            offset = end
            index += 1
            if offset < route.body.count && route.seconds > 0 {
                usleep(UInt32(route.seconds / Double(route.chunks) * 1e6))
            }
        }
        markDone(path)
    }

    private func markDone(_ path: String) {
        let at = Self.now()
        state.withLock { $0.lastByteAt[path] = at }
    }

    @discardableResult
    private func send(_ client: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes {
                Glibc.send(client, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            }
            if n <= 0 { return false }
            offset += n
        }
        return true
    }
}

extension Array where Element == UInt8 {
    fileprivate func ends(with suffix: [UInt8]) -> Bool {
        count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix
    }
}
