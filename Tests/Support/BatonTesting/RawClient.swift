import Glibc

public struct ClientError: Error, CustomStringConvertible {
    public var description: String
    public init(description: String) { self.description = description }
}

/// A blocking HTTP/1.1 client over a raw loopback socket, with a 5 s receive timeout.
public final class RawClient {
    public struct Head {
        public var status: Int
        public var headers: [String: String]
    }

    public struct Response {
        public var status: Int
        public var headers: [String: String]
        public var body: [UInt8]
        public var text: String { String(decoding: body, as: UTF8.self) }

        public init(status: Int, headers: [String: String], body: [UInt8]) {
            self.status = status
            self.headers = headers
            self.body = body
        }
    }

    private var fd: Int32
    private var buffer: [UInt8] = []

    public init(port: Int, ipv6: Bool = false) throws {
        fd = socket(ipv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ClientError(description: "socket: errno \(errno)") }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let result: Int32
        if ipv6 {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = in_port_t(UInt16(port).bigEndian)
            address.sin6_addr = in6addr_loopback
            result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
        } else {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
            result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        guard result == 0 else {
            let code = errno
            // Closed here and marked so: the deinit runs after a throwing init (every property
            // is set), and closed it a second time — by then perhaps another test's socket.
            Glibc.close(fd)
            fd = -1
            throw ClientError(description: "connect: errno \(code)")
        }
    }

    deinit { close() }

    public func close() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
    }

    public func send(_ text: String) {
        let bytes = Array(text.utf8)
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            sent += n
        }
    }

    /// Reads more bytes into the buffer; false on end of file, error or timeout.
    private func fill() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 4096)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return false }
        buffer += chunk[..<n]
        return true
    }

    private func readLine() throws -> String {
        while true {
            if let index = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                var line = Array(buffer[..<index])
                buffer.removeFirst(index + 1)
                if line.last == UInt8(ascii: "\r") { line.removeLast() }
                return String(decoding: line, as: UTF8.self)
            }
            guard fill() else { throw ClientError(description: "connection ended inside a line") }
        }
    }

    private func readExactly(_ count: Int) throws -> [UInt8] {
        while buffer.count < count {
            guard fill() else { throw ClientError(description: "connection ended inside a body") }
        }
        defer { buffer.removeFirst(count) }
        return Array(buffer[..<count])
    }

    public func readHead() throws -> Head {
        let statusLine = try readLine()
        let parts = statusLine.split(separator: " ")
        guard parts.count >= 2, let status = Int(parts[1]) else {
            throw ClientError(description: "bad status line \(statusLine)")
        }
        var headers: [String: String] = [:]
        while true {
            let line = try readLine()
            if line.isEmpty { break }
            guard let colon = line.firstIndex(of: ":") else { continue }
            let value = line[line.index(after: colon)...].drop { $0 == " " }
            headers[line[..<colon].lowercased()] = String(value)
        }
        return Head(status: status, headers: headers)
    }

    /// Reads one whole response (Content-Length, chunked, or until the connection closes).
    public func readResponse() throws -> Response {
        let head = try readHead()
        var body: [UInt8] = []
        if let length = head.headers["content-length"].flatMap({ Int($0) }) {
            body = try readExactly(length)
        } else if head.headers["transfer-encoding"] == "chunked" {
            while let chunk = try readChunk() { body += chunk }
        } else {
            while fill() {}
            body = buffer
            buffer = []
        }
        return Response(status: head.status, headers: head.headers, body: body)
    }

    /// One chunk of a chunked body, or nil for the terminating chunk.
    private func readChunk() throws -> [UInt8]? {
        let sizeLine = try readLine()
        guard let size = Int(sizeLine.split(separator: ";").first ?? "", radix: 16) else {
            throw ClientError(description: "bad chunk size \(sizeLine)")
        }
        if size == 0 {
            _ = try readLine()
            return nil
        }
        let data = try readExactly(size)
        _ = try readLine()
        return data
    }

    private var pendingStream: [UInt8] = []

    /// Reads `count` bytes of a chunked body, whatever the chunk boundaries.
    public func readChunkedBytes(count: Int) throws -> [UInt8] {
        while pendingStream.count < count {
            guard let chunk = try readChunk() else { throw ClientError(description: "stream ended early") }
            pendingStream += chunk
        }
        defer { pendingStream.removeFirst(count) }
        return Array(pendingStream[..<count])
    }

    /// True if the next thing in a chunked body is its end.
    public func readChunkedEnd() throws -> Bool {
        pendingStream.isEmpty ? try readChunk() == nil : false
    }

    /// True if the server closes the connection (within the receive timeout) with nothing more to say
    /// but perhaps the end of a chunked body.
    public func readsEndOfFile() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { return true }  // orderly end of file
            if n < 0 { return errno == ECONNRESET }  // reset also means closed; a timeout does not
        }
    }
}

extension RawClient {
    /// Reads the next Server-Sent Event of a chunked `text/event-stream` body: its `event:` type and
    /// `data:` text (comments skipped), or nil when the stream ends.
    public func readServerSentEvent() throws -> (type: String, data: String, id: String?)? {
        var line: [UInt8] = []
        var type = "message"
        var data = ""
        var id: String?
        var sawField = false
        while true {
            let byte: UInt8
            do { byte = try readChunkedBytes(count: 1)[0] } catch { return nil }
            if byte != UInt8(ascii: "\n") {
                line.append(byte)
                continue
            }
            let text = String(decoding: line, as: UTF8.self)
            line.removeAll()
            if text.isEmpty {
                if sawField { return (type, data, id) }
                continue
            }
            if text.hasPrefix(":") { continue }
            sawField = true
            if text.hasPrefix("event: ") { type = String(text.dropFirst(7)) }
            if text.hasPrefix("data: ") { data = String(text.dropFirst(6)) }
            if text.hasPrefix("id: ") { id = String(text.dropFirst(4)) }
        }
    }
}
