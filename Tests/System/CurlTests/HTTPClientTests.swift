import BatonTesting
import Curl
import Glibc
import OSThread
import Testing

/// HTTPClient failures that need no Subsonic server: a closed port and a server that never answers.
@Suite(.ownThread) struct HTTPClientTests {
    /// A closed port on 127.0.0.1 fails at once with curl's "couldn't connect" (7), a transient error.
    @Test func reportsAClosedPort() throws {
        let port = try FreePort.next()
        let error = #expect(throws: CurlError.self) { try HTTPClient().fetch(url: "http://127.0.0.1:\(port)/x") }
        #expect(error?.code == CurlError.couldNotConnect)
        #expect(error?.isTransient == true)
        #expect(error?.detail.contains("\(port)") == true)
    }

    /// A connection that drops during the TLS handshake (a Wi-Fi blip on the way to an https
    /// server) is curl's "SSL connect error" (35): transient, retried, as the HTTP/2 framing and
    /// stream errors (16, 92) are — an nginx that resets a stream idle past its send timeout, a
    /// pause long. They were final: the track was cut and the one after skipped.
    @Test func aHandshakeCutShortIsTransient() throws {
        let listener = try Listener()
        defer { close(listener.fd) }
        let fd = listener.fd
        OSThread.detach(name: "cutter") {
            let client = accept(fd, nil, nil)
            guard client >= 0 else { return }
            var hello = [UInt8](repeating: 0, count: 512)
            _ = recv(client, &hello, hello.count, 0)  // the ClientHello, then gone
            close(client)
        }
        let error = #expect(throws: CurlError.self) {
            try HTTPClient().fetch(url: "https://127.0.0.1:\(listener.port)/x")
        }
        #expect(error?.code == 35, "\(String(describing: error))")
        #expect(error?.isTransient == true)
        for code: Int32 in [16, 92] {
            #expect(CurlError(code: code, message: "", detail: "", url: "").isTransient, "\(code)")
        }
    }

    /// A server that accepts the connection but never answers is cut off by the stall timeout.
    @Test func detectsAStalledServer() throws {
        let listener = try Listener()
        defer { close(listener.fd) }
        var options = HTTPClient.Options()
        options.stallTimeout = .milliseconds(1200)
        let error = #expect(throws: CurlError.self) {
            try HTTPClient(options: options).get(url: "http://127.0.0.1:\(listener.port)/x") { _ in true }
        }
        #expect(error?.code == CurlError.timedOut)
        #expect(error?.detail.contains("stall") == true)
    }

    /// A `stop` flag set while the request waits for a server that never answers ends it at
    /// libcurl's next progress call (cancelled, "the program is stopping"), long before its 30 s
    /// timeout or the 20 s stall; one set before the request ends it at once.
    @Test func aStopFlagEndsARequestThatWaits() throws {
        let listener = try Listener()
        defer { close(listener.fd) }
        var options = HTTPClient.Options()
        options.stop = StopFlag()
        let flag = options.stop!
        OSThread.detach(name: "stopper") {
            usleep(300_000)
            flag.set()
        }
        let began = monotonicNanoseconds()
        let error = #expect(throws: CurlError.self) {
            try HTTPClient(options: options).fetch(url: "http://127.0.0.1:\(listener.port)/x", timeout: .seconds(30))
        }
        let took = Double(monotonicNanoseconds() - began) / 1e9
        #expect(error?.cancelled == true)
        #expect(error?.detail.contains("the program is stopping") == true, "\(String(describing: error))")
        #expect(took < 5, "ended \(took) s after it began")
        #expect(throws: CurlError.self) {
            try HTTPClient(options: options).fetch(url: "http://127.0.0.1:\(listener.port)/y", timeout: .seconds(30))
        }
    }

    /// The head is handed over as soon as the headers are in, not with the body's first bytes: a
    /// body 5 s behind its head leaves `onResponse` called at once, and its `false` stops the
    /// transfer there (cancelled), before the server sent any of the body.
    @Test func handsTheHeadOverBeforeALateBody() throws {
        let server = try SlowHTTPServer()
        defer { server.stop() }
        server.route(
            "/late", .init(contentType: "audio/flac", body: [UInt8](repeating: 1, count: 1000), firstByteDelay: 5))
        var heads: [HTTPResponseHead] = []
        var chunks = 0
        let error = #expect(throws: CurlError.self) {
            try HTTPClient().get(
                url: server.url("/late"),
                onResponse: { head in
                    heads.append(head)
                    return false
                },
                onData: { _ in
                    chunks += 1
                    return true
                })
        }
        #expect(error?.cancelled == true, "\(String(describing: error))")
        #expect(heads.map(\.status) == [200] && heads.first?.headers.contentLength == 1000)
        #expect(chunks == 0)
        #expect(server.lastByteAt("/late") == nil, "the body was sent before the head was handed over")
    }
}
