/// A small HTTP/1.1 client over `Connection`: one request per connection (`Connection: close`),
/// bodies by `Content-Length`, chunked transfer encoding or until close. Enough for batond's JSON
/// API and its Server-Sent Events; no TLS, no redirects. Main thread only.
struct APIConnection {
    var address: ServerAddress
    /// Sent as `Authorization: Bearer <token>` when set.
    var token: String?
    var connectTimeout = 5
    /// Seconds a whole exchange may take, from the connection to the body's end. Longer than
    /// batond's own limits on a request (speech is rendered within 30 s), so an answer that is
    /// coming is waited for; a deadline for the exchange, not per read, so a server that sends
    /// without end (not batond: an audio stream at a wrong `--url`) cannot hold batonctl for ever.
    var answerTimeout = 40
    /// The largest body batonctl reads. batond's largest answer (the 2,000 kept events) is well
    /// under 1 MiB; more is another server.
    static let maxBody = 4 << 20

    struct Response {
        var status: Int
        var headers: [(name: String, value: String)]
        var body: [UInt8]

        func header(_ name: String) -> String? {
            headers.first { $0.name.lowercased() == name.lowercased() }?.value
        }
    }

    /// Sends one request and reads the whole answer.
    func request(_ method: String, _ path: String, json body: [UInt8]? = nil) throws(ConnectionError) -> Response {
        let connection = try open(
            method, path, body: body, accept: "application/json", readTimeout: answerTimeout,
            deadlineSeconds: answerTimeout)
        return try Self.afterSending { () throws(ConnectionError) in
            let head = try readHead(connection)
            try Self.check(head, is: "application/json", method: method)
            var reader = BodyReader(connection: connection, head: head, method: method)
            let bytes: [UInt8]
            do throws(ConnectionError) {
                bytes = try Self.whole(&reader)
            } catch .noAnswer(let seconds) {
                throw .unfinishedAnswer(seconds: seconds)
            }
            return Response(status: head.status, headers: head.headers, body: bytes)
        }
    }

    /// Runs `read` (what follows a request sent whole), with a broken answer (closed early, reset,
    /// not HTTP, a bad chunk) as `answerBroken`: the server was reached and may have carried the
    /// request out, so it is not "cannot reach" (exit 3), on which a script retries and a
    /// doorbell rang twice.
    private static func afterSending<T>(_ read: () throws(ConnectionError) -> T) throws(ConnectionError) -> T {
        do {
            return try read()
        } catch .system(let call, let code) {
            throw .answerBroken(ConnectionError.system(call, code).text)
        } catch .protocolError(let why) {
            throw .answerBroken(why)
        }
    }

    /// How long a stream may bring nothing, not even a keep-alive, before it is taken as lost.
    static let streamSilenceSeconds = 45

    /// Sends a GET and hands each piece of the body to `onBytes` as it arrives, until the server ends
    /// it or `onBytes` returns false. A non-2xx answer is read whole and returned instead.
    func stream(
        _ path: String, accept: String, onBytes: ([UInt8]) throws(ConnectionError) -> Bool
    ) throws(ConnectionError) -> Response? {
        // Not for ever: batond sends a keep-alive every 15 s, so a stream silent for three of them
        // is a speaker gone (power, network); `events --follow` waited on it without end.
        let connection = try open(
            "GET", path, body: nil, accept: accept, readTimeout: Self.streamSilenceSeconds, deadlineSeconds: nil)
        return try Self.afterSending { () throws(ConnectionError) -> Response? in
            let head = try readHead(connection)
            let success = (200..<300).contains(head.status)
            // batond's error answers are JSON, as for any request.
            try Self.check(head, is: success ? accept : "application/json", method: "GET")
            var reader = BodyReader(connection: connection, head: head, method: "GET")
            if !success {
                return Response(status: head.status, headers: head.headers, body: try Self.whole(&reader))
            }
            while let piece = try reader.next() {
                if !(try onBytes(piece)) { break }
            }
            return nil
        }
    }

    struct Head {
        var status: Int
        var headers: [(name: String, value: String)]
        func header(_ name: String) -> String? {
            headers.first { $0.name.lowercased() == name.lowercased() }?.value
        }
    }

    /// The whole body, at most `maxBody` bytes.
    private static func whole(_ reader: inout BodyReader) throws(ConnectionError) -> [UInt8] {
        var bytes: [UInt8] = []
        while let piece = try reader.next() {
            guard bytes.count + piece.count <= maxBody else {
                throw .tooLarge("its answer is larger than \(maxBody >> 20) MiB, where batond's are far smaller")
            }
            bytes += piece
        }
        return bytes
    }

    /// Refuses an answer that is not batond's: batond labels every answer `application/json`
    /// (its event stream `text/event-stream`), so another type is another server, e.g. a web
    /// server or an audio stream at a wrong `--url`, whose body batonctl has no reason to read.
    /// No Content-Type is accepted only with no body.
    private static func check(_ head: Head, is expected: String, method: String) throws(ConnectionError) {
        let type = head.header("Content-Type")
        let media = type.map { $0.split(separator: ";", maxSplits: 1).first.map { $0.trimmed.lowercased() } ?? "" }
        if media == expected { return }
        let noBody =
            method == "HEAD" || head.status == 204 || head.status == 304
            || head.header("Content-Length")?.trimmed == "0"
        if type == nil && noBody { return }
        throw .notBatond(status: head.status, contentType: type.map { String($0.prefix(80)) })
    }

    private func open(
        _ method: String, _ path: String, body: [UInt8]?, accept: String,
        readTimeout: Int, deadlineSeconds: Int?
    ) throws(ConnectionError) -> Connection {
        let connection = try Connection(
            host: address.host, port: address.port, connectTimeout: connectTimeout,
            readTimeout: readTimeout, deadlineSeconds: deadlineSeconds)
        var text = "\(method) \(address.prefix)\(path) HTTP/1.1\r\n"
        text += "Host: \(address.hostHeader)\r\nUser-Agent: batonctl\r\nAccept: \(accept)\r\nConnection: close\r\n"
        if let token { text += "Authorization: Bearer \(token)\r\n" }
        if let body { text += "Content-Type: application/json\r\nContent-Length: \(body.count)\r\n" }
        text += "\r\n"
        try connection.send(Array(text.utf8) + (body ?? []))
        return connection
    }

    /// The most header lines a head may have.
    static let maxHeaders = 200

    private func readHead(_ connection: Connection) throws(ConnectionError) -> Head {
        var head: Head
        repeat {
            guard let statusLine = try connection.readLine() else {
                throw .protocolError("the server closed the connection without answering")
            }
            let parts = statusLine.split(separator: " ", maxSplits: 2)
            guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
                throw .protocolError("not an HTTP answer: \"\(statusLine.prefix(80))\"")
            }
            head = Head(status: status, headers: [])
            while let line = try connection.readLine(), !line.isEmpty {
                guard head.headers.count < Self.maxHeaders else {
                    throw .tooLarge("its answer has more than \(Self.maxHeaders) header lines")
                }
                guard let colon = line.firstIndex(of: ":") else { continue }
                head.headers.append((String(line[..<colon]), String(line[line.index(after: colon)...]).trimmed))
            }
        } while (100..<200).contains(head.status)  // skip 100 Continue
        return head
    }
}

/// Reads a response body piece by piece, undoing chunked transfer encoding.
struct BodyReader {
    private enum Framing {
        case none
        case length(Int)
        case chunked(remaining: Int, done: Bool)
        case untilClose
    }
    private let connection: Connection
    private var framing: Framing

    init(connection: Connection, head: APIConnection.Head, method: String) {
        self.connection = connection
        if method == "HEAD" || head.status == 204 || head.status == 304 {
            framing = .none
        } else if head.header("Transfer-Encoding")?.lowercased().contains("chunked") == true {
            framing = .chunked(remaining: 0, done: false)
        } else if let length = head.header("Content-Length").flatMap({ Int($0) }) {
            framing = .length(length)
        } else {
            framing = .untilClose
        }
    }

    /// The next piece of the body, or nil at its end.
    mutating func next() throws(ConnectionError) -> [UInt8]? {
        switch framing {
        case .none:
            return nil
        case .length(let left):
            guard left > 0 else { return nil }
            let bytes = try connection.readSome(limit: left)
            guard !bytes.isEmpty else { throw .protocolError("the body ended \(left) bytes early") }
            framing = .length(left - bytes.count)
            return bytes
        case .untilClose:
            let bytes = try connection.readSome()
            return bytes.isEmpty ? nil : bytes
        case .chunked(var remaining, let done):
            if done { return nil }
            if remaining == 0 {
                guard let sizeLine = try connection.readLine() else {
                    throw .protocolError("the chunked body ended early")
                }
                let hex = sizeLine.split(separator: ";").first.map { String($0).trimmed } ?? ""
                // Hex digits only: Int("-5", radix: 16) is -5, and a read of -5 bytes trapped.
                guard !hex.isEmpty, hex.allSatisfy(\.isHexDigit), let size = Int(hex, radix: 16) else {
                    throw .protocolError("bad chunk size \"\(sizeLine)\"")
                }
                if size == 0 {
                    while let trailer = try connection.readLine(), !trailer.isEmpty {}
                    framing = .chunked(remaining: 0, done: true)
                    return nil
                }
                remaining = size
            }
            let bytes = try connection.readSome(limit: remaining)
            guard !bytes.isEmpty else { throw .protocolError("the chunked body ended early") }
            remaining -= bytes.count
            if remaining == 0 { _ = try connection.readLine() }  // the CRLF after the chunk
            framing = .chunked(remaining: remaining, done: false)
            return bytes
        }
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces, tabs and line breaks.
    var trimmed: String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0.isNewline }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else {
            return ""
        }
        return String(self[first...last])
    }
}
