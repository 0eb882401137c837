import Glibc

/// Why a connection or exchange failed, below HTTP.
enum ConnectionError: Error {
    /// Every address of the host refused the connection: nothing listens on the port.
    case refused
    case cannotResolve(String)
    case timedOut
    /// Connected and asked, but no answer came within the read timeout: batond was reached and
    /// may still carry the request out.
    case noAnswer(seconds: Int)
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
        case .system(let call, let code): "\(call): \(String(cString: strerror(code)))"
        case .protocolError(let why): why
        }
    }
}

/// One TCP connection with a read buffer: the bytes batonctl sends and the lines and blocks it reads.
/// Blocking I/O with a per-read timeout (none for an event stream). Main thread only.
final class Connection {
    private let fd: Int32
    /// Seconds a read waits for data (0: for ever).
    private let readTimeout: Int
    private var buffer: [UInt8] = []
    private var start = 0

    /// Connects to `host:port` (each resolved address in turn), waiting at most `connectTimeout` seconds
    /// per address. Reads then wait at most `readTimeout` seconds for data (0: forever).
    init(host: String, port: UInt16, connectTimeout: Int, readTimeout: Int) throws(ConnectionError) {
        self.readTimeout = readTimeout
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
                var timeout = timeval(tv_sec: readTimeout, tv_usec: 0)
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
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
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                buffer += chunk[0..<n]
                return true
            }
            if n == 0 { return false }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK { throw .noAnswer(seconds: readTimeout) }
            throw .system("recv", errno)
        }
    }

    /// The next line without its CRLF (or LF), or nil at end of stream.
    func readLine() throws(ConnectionError) -> String? {
        while true {
            if let newline = buffer[start...].firstIndex(of: UInt8(ascii: "\n")) {
                var end = newline
                if end > start && buffer[end - 1] == UInt8(ascii: "\r") { end -= 1 }
                let line = String(decoding: buffer[start..<end], as: UTF8.self)
                start = newline + 1
                return line
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
