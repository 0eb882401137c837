import FoundationEssentials

/// batond's control API as batonctl uses it: JSON in and out, errors turned into `Failure`s
/// (connection refused → "batond is not running", an error answer → its `error` text).
/// Main thread only.
struct BatonClient {
    var http: APIConnection
    /// Where the token sent came from (`--token-file` or `BATON_TOKEN_FILE`), to name in a refusal.
    var tokenFile: String? = nil
    var address: ServerAddress { http.address }

    /// GETs `path` and returns the body of a 2xx answer.
    func get(_ path: String) throws(Failure) -> [UInt8] {
        try check(exchange { () throws(ConnectionError) in try http.request("GET", path) }, path: path)
    }

    /// POSTs `body` as JSON (none: an empty object) and returns the body of a 2xx answer.
    func post<Body: Encodable>(_ path: String, _ body: Body) throws(Failure) -> [UInt8] {
        try post(path, body, alsoAccepting: []).body
    }

    func post(_ path: String) throws(Failure) -> [UInt8] { try post(path, [String: String]()) }

    /// POSTs `body` as JSON and returns the status and body of a 2xx answer or of one whose status is
    /// in `alsoAccepting` (an answer the caller reads itself, as reload's 422 report).
    func post<Body: Encodable>(_ path: String, _ body: Body, alsoAccepting: Set<Int>) throws(Failure)
        -> (status: Int, body: [UInt8])
    {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        guard let data = try? encoder.encode(body) else { throw .failed("cannot encode the request for \(path)") }
        let response = try exchange { () throws(ConnectionError) in
            try http.request("POST", path, json: Array(data))
        }
        if alsoAccepting.contains(response.status) { return (response.status, response.body) }
        return (response.status, try check(response, path: path, method: "POST"))
    }

    /// Reads the Server-Sent Events at `path`, handing each complete event to `onEvent` until the
    /// stream ends or `onEvent` returns false.
    func events(_ path: String, onEvent: (EventStreamReader) -> Bool) throws(Failure) {
        var parser = ServerSentEventParser()
        let failed: APIConnection.Response?
        do {
            failed = try http.stream(path, accept: "text/event-stream") { bytes throws(ConnectionError) in
                for event in try parser.feed(bytes) { if !onEvent(event) { return false } }
                return true
            }
        } catch .noAnswer {
            throw .unreachable(
                address,
                "nothing from it for \(APIConnection.streamSilenceSeconds) s, not even a keep-alive (it sends one every 15 s): "
                    + "the speaker or the network is gone")
        } catch .refused {
            throw .notRunning(address)
        } catch let error where error.isAnotherServer {
            throw notBatond(error)
        } catch .answerBroken(let why) {
            // batond's stop ends the stream without its last chunk: what a stop looks like here.
            throw eventStreamEnded(why)
        } catch {
            throw .unreachable(address, error.text)
        }
        if let failed { _ = try check(failed, path: path) }
    }

    /// batond ended its event stream: at its stop (without the stream's last chunk: `why`, what
    /// was seen), or, cleanly, for a client whose queue of unsent events overflowed.
    func eventStreamEnded(_ why: String? = nil) -> Failure {
        .failed(
            "batond at \(address.display) ended the event stream (it is stopping, or batonctl fell behind)"
                + (why.map { ": \($0)" } ?? ""))
    }

    /// Decodes a JSON answer, or explains that batond answered something else.
    func decode<T: Decodable>(_ type: T.Type, _ body: [UInt8], what: String) throws(Failure) -> T {
        do {
            return try JSONDecoder().decode(T.self, from: Data(body))
        } catch {
            throw .failed("unexpected answer for \(what) from batond at \(address.display): \(error)")
        }
    }

    private func exchange<T>(_ body: () throws(ConnectionError) -> T) throws(Failure) -> T {
        do {
            return try body()
        } catch .refused {
            throw .notRunning(address)
        } catch .noAnswer(let seconds) {
            // Not "cannot reach": the request went, and may be carried out (a text being spoken).
            throw .failed(
                "batond at \(address.display) did not answer within \(seconds) s: it was reached, and may still carry the request out"
            )
        } catch .unfinishedAnswer(let seconds) {
            throw .failed(
                "the server at \(address.display) did not finish its answer within \(seconds) s (batond's take far less: "
                    + "is it batond?); it was reached, and may have carried the request out")
        } catch let error where error.isAnotherServer {
            throw notBatond(error)
        } catch .answerBroken(let why) {
            // Exit 1, not 3: the request went whole, so a retry on "cannot reach" would do it twice.
            throw .failed(
                "batond at \(address.display) was reached, but its answer broke off: \(why); "
                    + "the request may have been carried out")
        } catch {
            // Not connected, or the request not sent whole.
            throw .unreachable(address, error.text)
        }
    }

    /// A server that answers what batond never would (another Content-Type, an endless body).
    /// A server that answers what batond never would. An error status in another type is a proxy
    /// in front of batond as often as another server (nginx's HTML 502 while batond restarts): a
    /// 502 or 503 says batond behind it was not reached (exit 3: the request was not carried
    /// out), any other error status says what came; only a success in another type is surely
    /// not batond.
    private func notBatond(_ error: ConnectionError) -> Failure {
        if case .notBatond(let status, let type) = error, status >= 400 {
            let what = "HTTP \(status)\(type.map { " (\($0))" } ?? ""), not batond's JSON"
            if status == 502 || status == 503 {
                return .unreachable(
                    address, "\(what): a proxy in front of batond that cannot reach it (is batond running?)")
            }
            return .failed(
                "the server at \(address.display) answered \(what): a proxy in front of batond, or another server; "
                    + "is --url (or BATON_URL) right?")
        }
        return .failed("the server at \(address.display) is not batond: \(error.text); is --url (or BATON_URL) right?")
    }

    private struct ErrorAnswer: Decodable { var error: String }

    private func check(_ response: APIConnection.Response, path: String, method: String = "GET") throws(Failure)
        -> [UInt8]
    {
        if (200..<300).contains(response.status) { return response.body }
        // batond's own 401 text asks for a token "or a session" (the web page's login): it said a
        // token is required when one was sent, never that it was wrong, and sent a script's user
        // to a browser login.
        if response.status == 401 {
            if let tokenFile {
                throw .failed(
                    "batond at \(address.display) refused the token from \(tokenFile) (HTTP 401): "
                        + "it is not the first line of batond's api.token-file")
            }
            throw .failed(
                "batond at \(address.display) requires a token (HTTP 401): give --token-file or set BATON_TOKEN_FILE "
                    + "(a file holding the token of batond's api.token-file)")
        }
        var message =
            (try? JSONDecoder().decode(ErrorAnswer.self, from: Data(response.body)))?.error
            ?? String(decoding: response.body, as: UTF8.self).trimmed
        if message.isEmpty { message = "HTTP \(response.status) for \(method) \(path)" }
        if response.status == 404 && message.hasPrefix("no such endpoint") {
            // Behind a proxy, a wrong prefix reaches batond at a path it does not have: it was
            // called an older batond.
            message +=
                address.prefix.isEmpty
                ? "; this batond is older than batonctl and does not have it yet"
                : "; is the prefix \(address.prefix) of --url (or BATON_URL) right? (or this batond is older than "
                    + "batonctl and does not have it yet)"
        }
        throw .api(status: response.status, message: message)
    }
}

extension ConnectionError {
    /// The answer shows that the server is not batond.
    var isAnotherServer: Bool {
        switch self {
        case .notBatond, .tooLarge: true
        default: false
        }
    }
}
