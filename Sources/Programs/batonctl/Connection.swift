import Glibc

/// Why a connection or exchange failed, below HTTP.
enum ConnectionError: Error {
    /// Every address of the host refused the connection: nothing listens on the port.
    case refused
    case cannotResolve(String)
    case timedOut
    /// Connected and asked, but no answer came within the read timeout or the exchange's deadline:
    /// batond was reached and may still carry the request out.
    case noAnswer(seconds: Int)
    /// An answer began but did not end within the exchange's deadline (a server that streams or
    /// trickles without end).
    case unfinishedAnswer(seconds: Int)
    /// The answer's head is not from batond: its status and Content-Type (nil: none).
    case notBatond(status: Int, contentType: String?)
    /// The answer (a body, a line, an event) is larger than batond ever sends.
    case tooLarge(String)
    /// The request was sent whole, then the answer broke (closed early, reset, not HTTP, a bad
    /// chunk): the server was reached.
    case answerBroken(String)
    /// A socket call failed: the call's name and errno.
    case system(String, Int32)
    /// The peer closed the connection or sent something that is not HTTP/1.1.
    case protocolError(String)

    var text: String {
        switch self {
        case .refused: "connection refused"
        case .cannotResolve(let why): "cannot resolve the host: \(why)"
        case .timedOut: "timed out"
        case .noAnswer(let seconds): "no answer within \(seconds) s (batond was reached and may still carry it out)"
        case .unfinishedAnswer(let seconds): "the answer did not end within \(seconds) s"
        case .notBatond(let status, let type):
            "it answered HTTP \(status) with \(type.map { "Content-Type \($0)" } ?? "no Content-Type"), not batond's JSON"
        case .tooLarge(let what): what
        case .answerBroken(let why): why
        case .system(let call, let code): "\(call): \(String(cString: strerror(code)))"
        case .protocolError(let why): why
        }
    }
}

/// One TCP connection with a read buffer: the bytes batonctl sends and the lines and blocks it reads.
/// Blocking I/O with a per-read timeout and, for a request, a deadline for the whole exchange (a
/// per-read timeout alone let a server that never stops sending hold batonctl for ever).
/// Main thread only.
final class Connection {
    private let fd: Int32
    /// Seconds a read waits for data.
    private let readTimeout: Int
    /// When every read must be over, and how many seconds after the start that is; nil: no limit
    /// (an event stream, which the per-read timeout watches).
    private let deadline: (at: ContinuousClock.Instant, seconds: Int)?
    private var buffer: [UInt8] = []
    private var start = 0
    /// The longest line `readLine` takes (a status line, a header, a chunk size): a server that
    /// sends no line break is not buffered without end.
    static let maxLine = 65_536

    /// Connects to `host:port` (each resolved address in turn), waiting at most `connectTimeout` seconds
    /// per address. Reads then wait at most `readTimeout` seconds for data, and none goes on past
    /// `deadlineSeconds` after the connection (nil: no deadline).
    init(host: String, port: UInt16, connectTimeout: Int, readTimeout: Int, deadlineSeconds: Int? = nil)
        throws(ConnectionError)
    {
        self.readTimeout = readTimeout
        deadline = deadlineSeconds.map { (ContinuousClock.now + .seconds($0), $0) }
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &list)
        guard rc == 0, let first = list else {
            throw .cannotResolve(
                rc == EAI_SYSTEM ? String(cString: strerror(errno)) : String(cString: gai_strerror(rc)))
        }
        defer { freeaddrinfo(list) }
        var lastError = ConnectionError.refused
        var allRefused = true
        var node: UnsafeMutablePointer<addrinfo>? = first
        while let info = node?.pointee {
            node = info.ai_next
            let fd = socket(info.ai_family, info.ai_socktype | Int32(SOCK_CLOEXEC.rawValue), info.ai_protocol)
            if fd < 0 {
                lastError = .system("socket", errno)
                allRefused = false
                continue
            }
            switch Self.connect(fd, info.ai_addr, info.ai_addrlen, seconds: connectTimeout) {
            case nil:
                self.fd = fd
                // Sends too are bounded: a server that does not read cannot hold batonctl.
                var timeout = timeval(tv_sec: readTimeout, tv_usec: 0)
                setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                return
            case .refused?:
                close(fd)
            case let error?:
                close(fd)
                lastError = error
                allRefused = false
            }
        }
        throw allRefused ? .refused : lastError
    }

    deinit { close(fd) }

    /// A non-blocking connect bounded by `seconds`, then back to blocking. Nil on success.
    private static func connect(
        _ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>?, _ length: socklen_t,
        seconds: Int
    ) -> ConnectionError? {
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        if Glibc.connect(fd, address, length) != 0 {
            if errno == ECONNREFUSED { return .refused }
            guard errno == EINPROGRESS else { return .system("connect", errno) }
            var pfd = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            var ready: Int32
            repeat { ready = poll(&pfd, 1, Int32(seconds * 1000)) } while ready < 0 && errno == EINTR
            if ready == 0 { return .timedOut }
            var error: Int32 = 0
            var size = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size)
            if error == ECONNREFUSED { return .refused }
            if error != 0 { return .system("connect", error) }
        }
        _ = fcntl(fd, F_SETFL, flags)
        return nil
    }

    /// Sends all of `bytes`.
    func send(_ bytes: [UInt8]) throws(ConnectionError) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL))
            }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { throw .timedOut }
                throw .system("send", errno)
            }
            offset += n
        }
    }

    /// Reads more from the socket into the buffer; false at end of stream.
    private func fill() throws(ConnectionError) -> Bool {
        if start > 0 && start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        }
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while true {
            try waitForData()
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                buffer += chunk[0..<n]
                return true
            }
            if n == 0 { return false }
            if errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK { continue }
            throw .system("recv", errno)
        }
    }

    /// Waits until the socket has data (or its end), at most the read timeout and never past the
    /// deadline; `noAnswer` with the limit that ran out.
    private func waitForData() throws(ConnectionError) {
        let readEnd = ContinuousClock.now + .seconds(readTimeout)
        var end = readEnd
        var limit = readTimeout
        if let deadline, deadline.at < readEnd { (end, limit) = (deadline.at, deadline.seconds) }
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while true {
            let left = ContinuousClock.now.duration(to: end)
            if left <= .zero { throw .noAnswer(seconds: limit) }
            let (seconds, attoseconds) = left.components
            let milliseconds = Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1)
            let ready = poll(&pfd, 1, milliseconds)
            if ready > 0 { return }
            if ready < 0 && errno != EINTR { throw .system("poll", errno) }
        }
    }

    /// The next line without its CRLF (or LF), or nil at end of stream. A line longer than
    /// `maxLine` is refused.
    func readLine() throws(ConnectionError) -> String? {
        while true {
            if let newline = buffer[start...].firstIndex(of: UInt8(ascii: "\n")) {
                var end = newline
                if end > start && buffer[end - 1] == UInt8(ascii: "\r") { end -= 1 }
                let line = String(decoding: buffer[start..<end], as: UTF8.self)
                start = newline + 1
                return line
            }
            if buffer.count - start > Self.maxLine {
                throw .tooLarge(
                    "a line of the answer (of its head, or a chunk size) is longer than \(Self.maxLine / 1024) KiB")
            }
            guard try fill() else {
                if start == buffer.count { return nil }
                throw .protocolError("the connection closed in the middle of a line")
            }
        }
    }

    /// Up to `limit` bytes: what is buffered, else one read. Empty at end of stream.
    func readSome(limit: Int = .max) throws(ConnectionError) -> [UInt8] {
        if start == buffer.count {
            guard try fill() else { return [] }
        }
        let end = start + min(limit, buffer.count - start)
        let bytes = Array(buffer[start..<end])
        start = end
        return bytes
    }
}
