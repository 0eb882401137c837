import BatonTesting
import Glibc
import HTTPServer
import Synchronization
import Testing

// Loopback tests of the HTTPServer wrapper through a tiny raw-socket HTTP/1.1 client, so that malformed
// requests, oversize bodies and streamed chunks can be seen byte by byte.

@Suite("HTTPServer", .ownThread)
struct HTTPServerTests {
    /// A handler echoing the request in a fixed textual form.
    static let echo: @Sendable (HTTPRequest) -> HTTPResponse = { request in
        let query = request.query.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "&")
        let text =
            "\(request.method) \(request.path) ?\(query) from \(request.remoteAddress ?? "-") "
            + "x-test=\(request.headers["x-test"] ?? "-") body=\(String(decoding: request.body, as: UTF8.self))"
        return .text(200, text)
    }

    /// A GET reaches the handler with method, path, headers and client address, and the answer comes back.
    @Test func answersGet() throws {
        let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 1024, handler: Self.echo)
        defer { server.stop() }
        #expect(server.port > 0)
        let client = try RawClient(port: server.port)
        client.send("GET /hello HTTP/1.1\r\nHost: x\r\nX-Test: yes\r\n\r\n")
        let response = try client.readResponse()
        #expect(response.status == 200)
        #expect(response.headers["content-type"] == "text/plain; charset=utf-8")
        #expect(response.text == "GET /hello ? from 127.0.0.1 x-test=yes body=")
    }

    /// A connection the server accepted gives up on a client that stops acknowledging after 45 s
    /// (`TCP_USER_TIMEOUT`, from the listening socket): a phone gone from the Wi-Fi held its event
    /// stream's thread about 15 minutes. Read from the accepted socket itself, found among this
    /// process's descriptors by its ports.
    @Test func anAcceptedConnectionGivesUpOnASilentClient() throws {
        let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 1024, handler: Self.echo)
        defer { server.stop() }
        let client = try RawClient(port: server.port)
        client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try client.readResponse().status == 200)
        func port(_ fd: Int32, peer: Bool) -> Int? {
            var address = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let r = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    peer ? getpeername(fd, $0, &length) : getsockname(fd, $0, &length)
                }
            }
            guard r == 0, address.sin_family == sa_family_t(AF_INET) else { return nil }
            return Int(UInt16(bigEndian: address.sin_port))
        }
        let accepted = (0..<4096).first { fd in
            port(Int32(fd), peer: false) == server.port && port(Int32(fd), peer: true) != nil
        }
        let fd = try #require(accepted.map(Int32.init), "the accepted socket")
        var timeout: UInt32 = 0
        var length = socklen_t(MemoryLayout<UInt32>.size)
        #expect(getsockopt(fd, Int32(IPPROTO_TCP), TCP_USER_TIMEOUT, &timeout, &length) == 0)
        #expect(timeout == 45_000)
    }

    /// A TCP connection to 127.0.0.1:`port` from the loopback address `source` (127.0.0.x), or -1;
    /// with `receiveBuffer`, its `SO_RCVBUF` set before it connects (the window it offers).
    static func connect(from source: String, to port: Int, receiveBuffer: Int32? = nil) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return -1 }
        if var size = receiveBuffer {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr(source)
        var remote = sockaddr_in()
        remote.sin_family = sa_family_t(AF_INET)
        remote.sin_port = in_port_t(UInt16(port).bigEndian)
        remote.sin_addr.s_addr = inet_addr("127.0.0.1")
        let ok = withUnsafePointer(to: &local) { l in
            withUnsafePointer(to: &remote) { r in
                l.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                } == 0
                    && r.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    } == 0
            }
        }
        if !ok {
            close(fd)
            return -1
        }
        return fd
    }

    /// One client address holding every connection it can (each sending a request line and never
    /// finishing its head: a slow or hostile host) gets `maxConnectionsPerClient` of them; a client
    /// on another address is still answered. Before, one host could take all the slots.
    @Test func oneClientCannotTakeEverySlot() throws {
        var limits = HTTPServer.Limits()
        limits.maxConnections = 8
        limits.maxConnectionsPerClient = 4
        let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 1024, limits: limits, handler: Self.echo)
        defer { server.stop() }
        var hog: [Int32] = []
        defer { for fd in hog { close(fd) } }
        for _ in 0..<8 {
            let fd = Self.connect(from: "127.0.0.1", to: server.port)
            #expect(fd >= 0)
            _ = "GET / HTTP/1.1\r\n".withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
            hog.append(fd)
        }
        usleep(300_000)  // the server has taken (or closed) them all
        // Those past the limit were closed: they read the end at once.
        let closed = hog.filter { fd in
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            var byte: UInt8 = 0
            return poll(&p, 1, 0) == 1 && recv(fd, &byte, 1, Int32(MSG_DONTWAIT)) <= 0
        }
        #expect(closed.count == 4, "\(closed.count) of the 8 closed")
        let other = Self.connect(from: "127.0.0.2", to: server.port)
        #expect(other >= 0)
        defer { close(other) }
        _ = "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".withCString {
            send(other, $0, strlen($0), Int32(MSG_NOSIGNAL))
        }
        var timeout = timeval(tv_sec: 3, tv_usec: 0)
        setsockopt(other, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var answer = [UInt8](repeating: 0, count: 256)
        let n = recv(other, &answer, answer.count, 0)
        let text = n > 0 ? String(decoding: answer[..<n], as: UTF8.self) : ""
        #expect(text.hasPrefix("HTTP/1.1 200"), "\(text)")
    }

    /// A POST body with Content-Length is delivered whole to the handler.
    @Test func echoesPostBody() throws {
        let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 1024, handler: Self.echo)
        defer { server.stop() }
        let client = try RawClient(port: server.port)
        client.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world")
        let response = try client.readResponse()
        #expect(response.status == 200)
        #expect(response.text == "POST /echo ? from 127.0.0.1 x-test=- body=hello world")
    }

    /// A chunked POST body is reassembled before the handler sees it.
    @Test func echoesChunkedPostBody() throws {
        let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 1024, handler: Self.echo)
        defer { server.stop() }
        let client = try RawClient(port: server.port)
        client.send(
            "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
        )
        let response = try client.readResponse()
        #expect(response.text == "POST /echo ? from 127.0.0.1 x-test=- body=hello world")
    }

    /// Two requests on one kept-alive connection are both answered (per-request state is reset).
    @Test func servesTwoRequestsOnOneConnection() throws {
        let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 1024, handler: Self.echo)
        defer { server.stop() }
        let client = try RawClient(port: server.port)
        client.send("POST /one HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
        #expect(try client.readResponse().text == "POST /one ? from 127.0.0.1 x-test=- body=abc")
        client.send("GET /two?a=1 HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try client.readResponse().text == "GET /two ?a=1 from 127.0.0.1 x-test=- body=")
    }

    /// A declared body over the limit is refused with 413 JSON before the body is sent.
    @Test func refusesDeclaredOversizeBody() throws {
        let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 100, handler: Self.echo)
        defer { server.stop() }
        let client = try RawClient(port: server.port)
        client.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n")
        let response = try client.readResponse()
        #expect(response.status == 413)
        #expect(response.headers["content-type"] == "application/json")
        #expect(response.text == #"{"error":"request body exceeds 100 bytes"}"#)
    }

    /// A chunked body that grows over the limit is answered 413 JSON without reaching the handler.
    @Test func refusesChunkedOversizeBody() throws {
        let called = Flag()
        let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 10) { request in
            called.set()
            return Self.echo(request)
        }
        defer { server.stop() }
        let client = try RawClient(port: server.port)
        let piece = String(repeating: "x", count: 8)
        client.send(
            "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                + "8\r\n\(piece)\r\n8\r\n\(piece)\r\n8\r\n\(piece)\r\n0\r\n\r\n")
        let response = try client.readResponse()
        #expect(response.status == 413)
        #expect(response.text == #"{"error":"request body exceeds 10 bytes"}"#)
        #expect(!called.isSet)
    }

    /// A body still coming `requestSeconds` after the request began (one that never ends, or trickles)
    /// closes the connection: the idle timeout counts from the last byte, so a peer with no token
    /// held a thread and a slot for ever with a byte every 20 s, before anyone looked at who it was.
    @Test func aBodyThatNeverEndsOrTricklesClosesTheConnection() throws {
        var limits = HTTPServer.Limits()
        limits.requestSeconds = 1
        let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 10, limits: limits, handler: Self.echo)
        defer { server.stop() }
        let endless = try RawClient(port: server.port)
        let piece = String(repeating: "x", count: 8_192)
        endless.send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        // 8 KiB every 50 ms, for ever (as far as the server knows): 2.5 s of it.
        for _ in 0..<50 {
            endless.send("2000\r\n\(piece)\r\n")
            usleep(50_000)
        }
        #expect(endless.readsEndOfFile(), "a body still coming past requestSeconds did not close the connection")

        let slow = try RawClient(port: server.port)
        slow.send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n")
        usleep(2_000_000)  // well past requestSeconds (the server's clock starts at its first look)
        slow.send("1\r\nx\r\n")
        #expect(slow.readsEndOfFile(), "a body trickled past requestSeconds did not close the connection")
    }

    /// The whole-request reaper sleeps while nothing is due: it looked a few times per
    /// `requestSeconds` (at most once a second), an idle daemon's wake-ups for nothing.
    @Test func theRequestReaperSleepsWhileNothingIsDue() throws {
        var limits = HTTPServer.Limits()
        limits.requestSeconds = 1
        let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 10, limits: limits, handler: Self.echo)
        defer { server.stop() }
        let client = try RawClient(port: server.port)
        client.send("GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        #expect(try client.readHead().status == 200)
        #expect(client.readsEndOfFile())
        let before = server.requestDeadlineLooks
        usleep(2_000_000)  // two limits with no connection open
        // At most the one deadline it slept for when the request came (cleared since).
        #expect(server.requestDeadlineLooks - before <= 1, "\(server.requestDeadlineLooks - before) looks for nothing")
    }

    /// A request whose head is still coming `requestSeconds` after its connection opened (a byte
    /// every 200 ms, each restarting the idle timeout), and a connection that never sends one,
    /// are closed; a request that did arrive is served however long its answer lasts (an event
    /// stream kept past the limit), and a kept-alive connection gets the limit again for its next
    /// request. Before, libmicrohttpd never called the server while it read a head, and a byte
    /// every 25 s held a connection thread and slot for days.
    @Test func aHeadStillComingPastRequestSecondsClosesTheConnection() throws {
        var limits = HTTPServer.Limits()
        limits.requestSeconds = 1
        let streams = StreamBox()
        let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 1024, limits: limits) { request in
            request.path == "/events" ? .eventStream(streams.make(), keepAlive: .seconds(60)) : Self.echo(request)
        }
        defer { server.stop() }
        let trickle = try RawClient(port: server.port)
        let silent = try RawClient(port: server.port)
        let events = try RawClient(port: server.port)
        events.send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try events.readHead().status == 200)
        trickle.send("GET /hello HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        for _ in 0..<12 {  // 2.4 s of one byte every 200 ms
            usleep(200_000)
            trickle.send("a")
        }
        #expect(trickle.readsEndOfFile(), "a head trickled past requestSeconds did not close the connection")
        #expect(silent.readsEndOfFile(), "a connection without a request was kept past requestSeconds")
        // The stream, opened 2.4 s ago, still delivers.
        let queue = try #require(streams.waitForStream())
        let event = ServerSentEvent.encode(event: "tick", data: "late")
        #expect(queue.send(event))
        #expect(try events.readChunkedBytes(count: event.count) == event)
        // Two requests on one connection, the second 0.6 s after the first and 1.2 s after the opening.
        let kept = try RawClient(port: server.port)
        usleep(600_000)
        kept.send("GET /one HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try kept.readResponse().text.hasPrefix("GET /one"))
        usleep(600_000)
        kept.send("GET /two HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try kept.readResponse().text.hasPrefix("GET /two"))
    }

    /// An answer of bytes must be sent within `requestSeconds` of being queued: a client offering
    /// a small window and reading 256 bytes every 50 ms (each send restarting libmicrohttpd's idle
    /// timeout) is reset by then, having had a sliver of an 8 MiB answer. A client reading at its
    /// pace gets the answer whole and its kept-alive connection answers again; an event stream
    /// outlives the limit. Before, the deadline was cleared once any answer was queued, and an
    /// anonymous client reading /app.js a few bytes every 25 s held a connection thread for as
    /// long as it liked (with keep-alive, for ever).
    @Test func anAnswerReadSlowerThanRequestSecondsClosesTheConnection() throws {
        var limits = HTTPServer.Limits()
        limits.requestSeconds = 1
        let big = [UInt8](repeating: UInt8(ascii: "x"), count: 8 << 20)
        let streams = StreamBox()
        let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 1024, limits: limits) { request in
            switch request.path {
            case "/events": .eventStream(streams.make(), keepAlive: .seconds(60))
            case "/big": HTTPResponse(status: 200, body: .bytes(big))
            default: Self.echo(request)
            }
        }
        defer { server.stop() }
        let events = try RawClient(port: server.port)
        events.send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try events.readHead().status == 200)

        let slow = Self.connect(from: "127.0.0.1", to: server.port, receiveBuffer: 4096)
        try #require(slow >= 0)
        defer { close(slow) }
        _ = "GET /big HTTP/1.1\r\nHost: x\r\n\r\n".withCString { send(slow, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        let began = ContinuousClock.now
        var read = 0
        var ended = false
        var chunk = [UInt8](repeating: 0, count: 256)
        while !ended && ContinuousClock.now - began < .seconds(4) {
            let n = recv(slow, &chunk, chunk.count, Int32(MSG_DONTWAIT))
            if n > 0 { read += n }
            ended = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            usleep(50_000)
        }
        #expect(ended, "an answer read slowly was still being sent 4 s in (\(read) bytes of it read)")
        #expect(read < big.count / 16, "\(read) bytes read")

        // A client reading at its own pace, and the stream opened before the slow one.
        let normal = try RawClient(port: server.port)
        normal.send("GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        let whole = try normal.readResponse()
        #expect(whole.status == 200)
        #expect(whole.body.count == big.count)
        normal.send("GET /again HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try normal.readResponse().text.hasPrefix("GET /again"))
        let queue = try #require(streams.waitForStream())
        let event = ServerSentEvent.encode(event: "tick", data: "late")
        #expect(queue.send(event))
        #expect(try events.readChunkedBytes(count: event.count) == event)
    }

    /// Path and query are percent-decoded by the wrapper: `+` is a space only in the query.
    @Test func decodesPathAndQuery() throws {
        let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 1024, handler: Self.echo)
        defer { server.stop() }
        let client = try RawClient(port: server.port)
        client.send("GET /a%20b+c/%C3%A9?x=1+2&y=%26%3D&flag HTTP/1.1\r\nHost: x\r\n\r\n")
        let response = try client.readResponse()
        #expect(response.text == "GET /a b+c/é ?flag=&x=1 2&y=&= from 127.0.0.1 x-test=- body=")
    }

    /// Invalid UTF-8, a broken escape or an encoded NUL in the path is refused with 400 JSON.
    @Test(arguments: ["/%FF", "/%zz", "/abc%4", "/a%00b", "/q?x=%C3"])
    func refusesUndecodableTarget(target: String) throws {
        let called = Flag()
        let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 1024) { request in
            called.set()
            return Self.echo(request)
        }
        defer { server.stop() }
        let client = try RawClient(port: server.port)
        client.send("GET \(target) HTTP/1.1\r\nHost: x\r\n\r\n")
        let response = try client.readResponse()
        #expect(response.status == 400)
        #expect(response.headers["content-type"] == "application/json")
        #expect(response.text.hasPrefix(#"{"error":"#))
        #expect(!called.isSet)
    }

    /// A response with a header containing CR LF is replaced by a 500 JSON error.
    @Test func refusesHeaderInjection() throws {
        let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 1024) { _ in
            HTTPResponse(status: 200, headers: [("X-Evil", "a\r\nSet-Cookie: b")], body: .bytes([]))
        }
        defer { server.stop() }
        let client = try RawClient(port: server.port)
        client.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        let response = try client.readResponse()
        #expect(response.status == 500)
        #expect(response.headers["set-cookie"] == nil)
        #expect(response.text == #"{"error":"handler answered with an invalid header"}"#)
    }

    /// A streaming response delivers each chunk as it is sent, in order, then ends; the stream is closed.
    @Test func streamsChunksInOrderThenEnds() throws {
        let streams = StreamBox()
        let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 1024) { _ in
            .eventStream(streams.make())
        }
        defer { server.stop() }
        let client = try RawClient(port: server.port)
        client.send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
        let queue = try #require(streams.waitForStream())
        let head = try client.readHead()
        #expect(head.status == 200)
        #expect(head.headers["content-type"] == "text/event-stream")
        #expect(head.headers["transfer-encoding"] == "chunked")
        for index in 1...3 {
            let event = ServerSentEvent.encode(event: "tick", data: "n=\(index)")
            #expect(queue.send(event))
            #expect(try client.readChunkedBytes(count: event.count) == event)
        }
        queue.finish()
        #expect(try client.readChunkedEnd())
        #expect(eventually { streams.closed.isSet })
    }

    /// An idle event stream sends the SSE keep-alive comment after its interval.
    @Test func sendsKeepAliveWhileIdle() throws {
        let streams = StreamBox()
        let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 1024) { _ in
            .eventStream(streams.make(), keepAlive: .milliseconds(30))
        }
        defer { server.stop() }
        let client = try RawClient(port: server.port)
        client.send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
        _ = try client.readHead()
        let comment = Array(": keep-alive\n\n".utf8)
        #expect(try client.readChunkedBytes(count: comment.count) == comment)
    }

    /// A client that disconnects mid-stream makes the server close (and free) the stream.
    @Test func closesStreamWhenClientLeaves() throws {
        let streams = StreamBox()
        let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 1024) { _ in
            HTTPResponse(status: 200, body: .stream(streams.make(), keepAlive: nil))
        }
        defer { server.stop() }
        let client = try RawClient(port: server.port)
        client.send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
        let queue = try #require(streams.waitForStream())
        #expect(try client.readHead().status == 200)
        #expect(queue.send("first"))
        #expect(try client.readChunkedBytes(count: 5) == Array("first".utf8))
        client.close()
        #expect(eventually { streams.closed.isSet })
        #expect(queue.isClosed)
        #expect(!queue.send("late"))
    }

    /// `stop()` with an SSE client attached returns promptly, closes the stream and the connection.
    @Test func stopsPromptlyWithOpenStream() throws {
        let streams = StreamBox()
        let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 1024) { _ in
            .eventStream(streams.make())
        }
        let client = try RawClient(port: server.port)
        client.send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
        _ = try #require(streams.waitForStream())
        _ = try client.readHead()
        let started = ContinuousClock.now
        server.stop()
        #expect(ContinuousClock.now - started < .seconds(2))
        #expect(streams.closed.isSet)
        #expect(client.readsEndOfFile())
        server.stop()  // idempotent
    }

    /// A client that leaves in the middle of a large body does not kill the process (no SIGPIPE), and
    /// the server keeps serving. In a child process with SIGPIPE at its default, process-killing
    /// action: in the test process libmosquitto (the MQTT tests) sets it to ignored.
    @Test func survivesClientLeavingMidBody() async {
        await #expect(processExitsWith: .success) {
            signal(SIGPIPE, SIG_DFL)
            let large = [UInt8](repeating: UInt8(ascii: "z"), count: 8 << 20)
            let server = try! HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 1024) { request in
                request.path == "/large" ? HTTPResponse(status: 200, body: .bytes(large)) : Self.echo(request)
            }
            for _ in 0..<3 {
                let leaving = try! RawClient(port: server.port)
                leaving.send("GET /large HTTP/1.1\r\nHost: x\r\n\r\n")
                guard try! leaving.readHead().status == 200 else { exit(2) }
                leaving.close()
            }
            let client = try! RawClient(port: server.port)
            client.send("GET /after HTTP/1.1\r\nHost: x\r\n\r\n")
            guard try! client.readResponse().text == "GET /after ? from 127.0.0.1 x-test=- body=" else { exit(3) }
            server.stop()
            exit(0)
        }
    }

    /// Request headers larger than the connection memory limit are refused by libmicrohttpd with 431.
    @Test func refusesOversizeHeaders() throws {
        var limits = HTTPServer.Limits()
        limits.connectionMemoryBytes = 8 * 1024
        let server = try HTTPServer(
            host: "127.0.0.1", port: 0, maxBodyBytes: 1024, limits: limits,
            handler: Self.echo)
        defer { server.stop() }
        let client = try RawClient(port: server.port)
        client.send("GET / HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "b", count: 16 * 1024))\r\n\r\n")
        #expect(try client.readHead().status == 431)
    }

    /// Listening on a port already in use fails with an error naming the address and the reason.
    @Test func reportsTakenPort() throws {
        let first = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 1024, handler: Self.echo)
        defer { first.stop() }
        let error = #expect(throws: HTTPServerError.self) {
            _ = try HTTPServer(host: "127.0.0.1", port: first.port, maxBodyBytes: 1024, handler: Self.echo)
        }
        #expect(error?.kind == .cannotListen)
        #expect(error?.errno == EADDRINUSE)
        #expect(error?.description == "cannot listen on 127.0.0.1:\(first.port): Address already in use (errno 98)")
    }

    /// A host that is not a numeric address is refused without touching the network.
    @Test func refusesNonNumericHost() throws {
        let error = #expect(throws: HTTPServerError.self) {
            _ = try HTTPServer(host: "speaker.local", port: 0, maxBodyBytes: 1024, handler: Self.echo)
        }
        #expect(error?.kind == .invalidAddress)
    }

    /// An IPv6 loopback address in brackets binds and serves (skipped when the host has no IPv6).
    @Test func servesIPv6Loopback() throws {
        let started = Result { () throws(HTTPServerError) -> HTTPServer in
            try HTTPServer(host: "[::1]", port: 0, maxBodyBytes: 1024, handler: Self.echo)
        }
        if case .failure(let error) = started, error.kind == .cannotListen, error.errno == EADDRNOTAVAIL {
            return  // no IPv6 loopback in this container
        }
        let server = try started.get()
        defer { server.stop() }
        let client = try RawClient(port: server.port, ipv6: true)
        client.send("GET /six HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try client.readResponse().text == "GET /six ? from ::1 x-test=- body=")
    }

    /// `[::]` is every interface, IPv4 too: an IPv4 client is served. The socket was IPv6's only,
    /// and every IPv4 browser refused (skipped when the host has no IPv6).
    @Test func theIPv6WildcardServesIPv4Too() throws {
        let started = Result { () throws(HTTPServerError) -> HTTPServer in
            try HTTPServer(host: "[::]", port: 0, maxBodyBytes: 1024, handler: Self.echo)
        }
        if case .failure(let error) = started, error.kind == .cannotListen, error.errno == EAFNOSUPPORT {
            return  // no IPv6 in this container
        }
        let server = try started.get()
        defer { server.stop() }
        let client = try RawClient(port: server.port)
        client.send("GET /four HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try client.readResponse().text.hasPrefix("GET /four ? from 127.0.0.1"))
    }

    /// Server-Sent Events encoding splits multi-line data into one `data:` line each.
    @Test func encodesServerSentEvents() {
        let bytes = ServerSentEvent.encode(event: "zone", id: "7", data: "a\nb")
        #expect(String(decoding: bytes, as: UTF8.self) == "event: zone\nid: 7\ndata: a\ndata: b\n\n")
    }
}

// MARK: - Helpers

/// Polls `condition` every 2 ms until it holds or `limit` passes.
func eventually(within limit: Duration = .seconds(3), _ condition: () -> Bool) -> Bool {
    let deadline = ContinuousClock.now + limit
    while ContinuousClock.now < deadline {
        if condition() { return true }
        usleep(2_000)
    }
    return condition()
}

/// A thread-safe boolean set once.
final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .releasing) }
    var isSet: Bool { value.load(ordering: .acquiring) }
}

/// Makes one `HTTPChunkQueue` for a streaming handler and lets the test reach it.
final class StreamBox: Sendable {
    let closed = Flag()
    private let queue = Mutex<HTTPChunkQueue?>(nil)

    func make() -> HTTPChunkQueue {
        let closed = self.closed
        let made = HTTPChunkQueue(onClose: { closed.set() })
        queue.withLock { $0 = made }
        return made
    }

    func waitForStream() -> HTTPChunkQueue? {
        var found: HTTPChunkQueue?
        _ = eventually {
            found = queue.withLock { $0 }
            return found != nil
        }
        return found
    }
}
