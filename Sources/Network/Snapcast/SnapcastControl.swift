import Curl
import FoundationEssentials
import OSThread

/// snapserver's JSON-RPC control API over HTTP (`POST /jsonrpc`), through libcurl's wrapper.
///
/// Every call blocks the calling thread until the answer (at most `timeout`). Any thread but an
/// output thread; many threads may call at once.
public struct SnapcastControl: Sendable {
    /// The endpoint, `http://HOST:PORT/jsonrpc`.
    public let endpoint: String
    public let timeout: Duration
    private let http: HTTPClient

    /// - Parameter control: `http://HOST:PORT` (the server's `[http]` section); `/jsonrpc` is added
    ///   unless the URL already ends with it.
    /// - Parameter stop: once set, a call that waits ends at once (libcurl's next progress call).
    public init(control: String, timeout: Duration = .seconds(3), stop: StopFlag? = nil) {
        endpoint = Self.endpoint(control)
        self.timeout = timeout
        var options = HTTPClient.Options()
        options.connectTimeout = .seconds(2)
        options.maxRedirects = 0
        options.stop = stop
        http = HTTPClient(options: options)
    }

    /// The JSON-RPC endpoint of `control` (`http://HOST:PORT`): `/jsonrpc` added unless it ends
    /// with it, after any `/`.
    public static func endpoint(_ control: String) -> String {
        var base = control
        while base.hasSuffix("/") { base.removeLast() }
        return base.hasSuffix("/jsonrpc") ? base : base + "/jsonrpc"
    }

    /// One text for every spelling of the server `control` reaches: its `endpoint(_:)` with the
    /// scheme and host in lower case, no credentials, `localhost` as 127.0.0.1 and the scheme's
    /// default port written out (`http://LOCALHOST:1780/` and `http://127.0.0.1:1780/jsonrpc` are
    /// both `http://127.0.0.1:1780/jsonrpc`). Two controls with one identity are one server.
    public static func identity(_ control: String) -> String {
        let url = endpoint(control)
        guard let separator = url.firstRange(of: "://") else { return url }
        let scheme = url[..<separator.lowerBound].lowercased()
        let rest = url[separator.upperBound...]
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        var authority = rest[..<slash]
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        var host = authority.lowercased()
        var port = scheme == "https" ? "443" : "80"
        // `HOST:PORT` or `[V6]:PORT`: the last colon, when no `]` follows it.
        if let colon = host.lastIndex(of: ":"), !host[colon...].contains("]") {
            port = String(host[host.index(after: colon)...])
            host = String(host[..<colon])
        }
        if host == "localhost" { host = "127.0.0.1" }
        return "\(scheme)://\(host):\(port)\(rest[slash...])"
    }

    /// `control` with any credentials hidden (`http://user:***@host:1780`), for the log and status.
    public static func shown(_ control: String) -> String { URLRedaction.redact(control) }

    /// The same control, whose calls end at once when `stop` is set.
    public func stopping(at stop: StopFlag) -> SnapcastControl {
        SnapcastControl(control: endpoint, timeout: timeout, stop: stop)
    }

    /// Groups, clients and streams now. The corresponding method is `Server.GetStatus`.
    public func status() throws(SnapcastError) -> ServerStatus {
        struct Result: Decodable { var server: ServerStatus }
        return try call("Server.GetStatus", Empty(), answer: Result.self).server
    }

    /// Makes `clients` the members of group `group` (others are moved to groups of their own).
    /// The corresponding method is `Group.SetClients`.
    public func setClients(group: String, clients: [String]) throws(SnapcastError) {
        struct Params: Encodable {
            var id: String
            var clients: [String]
        }
        _ = try call("Group.SetClients", Params(id: group, clients: clients), answer: Ignored.self)
    }

    /// Makes group `group` play stream `stream`. The corresponding method is `Group.SetStream`.
    public func setStream(group: String, stream: String) throws(SnapcastError) {
        struct Params: Encodable {
            var id: String
            var streamID: String
            enum CodingKeys: String, CodingKey {
                case id
                case streamID = "stream_id"
            }
        }
        _ = try call("Group.SetStream", Params(id: group, streamID: stream), answer: Ignored.self)
    }

    /// Sets a client's volume (0...100, unmuted). The corresponding method is `Client.SetVolume`.
    public func setVolume(client: String, percent: Int) throws(SnapcastError) {
        struct Volume: Encodable {
            var muted: Bool
            var percent: Int
        }
        struct Params: Encodable {
            var id: String
            var volume: Volume
        }
        _ = try call(
            "Client.SetVolume", Params(id: client, volume: Volume(muted: false, percent: percent)),
            answer: Ignored.self)
    }

    /// Sets how many milliseconds earlier a client plays; returns what the server holds it to (it
    /// keeps it within its own `[stream] buffer`: `result.latency`), `milliseconds` when the answer
    /// does not say. The corresponding method is `Client.SetLatency`.
    @discardableResult
    public func setLatency(client: String, milliseconds: Int) throws(SnapcastError) -> Int {
        struct Params: Encodable {
            var id: String
            var latency: Int
        }
        struct Held: Decodable {
            var latency: Int?
            private enum CodingKeys: String, CodingKey { case latency }
            // Anything else said there is taken as no word: the call was answered.
            init(from decoder: any Decoder) throws {
                latency = try? decoder.container(keyedBy: CodingKeys.self).decodeIfPresent(Int.self, forKey: .latency)
            }
        }
        let held = try call("Client.SetLatency", Params(id: client, latency: milliseconds), answer: Held.self)
        return held.latency ?? milliseconds
    }

    // MARK: JSON-RPC

    private struct Empty: Encodable {}
    private struct Ignored: Decodable {}
    private struct Request<Params: Encodable>: Encodable {
        var id: Int
        var jsonrpc = "2.0"
        var method: String
        var params: Params
    }
    private struct RPCError: Decodable {
        var code: Int
        var message: String
        /// Said when it is text; JSON-RPC lets it be any value, which must not hide the message.
        var data: String?
        private enum CodingKeys: String, CodingKey { case code, message, data }
        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            code = try c.decode(Int.self, forKey: .code)
            message = try c.decode(String.self, forKey: .message)
            data = try? c.decodeIfPresent(String.self, forKey: .data)
        }
    }
    private struct Response<Answer: Decodable>: Decodable {
        var result: Answer?
        var error: RPCError?
    }

    private func call<Params: Encodable, Answer: Decodable>(
        _ method: String, _ params: Params,
        answer: Answer.Type
    ) throws(SnapcastError) -> Answer {
        func failure(_ problem: String, transient: Bool = false, answered: Bool = true) -> SnapcastError {
            SnapcastError(
                endpoint: endpoint, method: method, problem: problem, isTransient: transient, serverAnswered: answered)
        }
        let body: Data
        do {
            body = try JSONEncoder().encode(Request(id: 1, method: method, params: params))
        } catch {
            throw failure("cannot encode the request: \(error)")
        }
        let response: HTTPClientResponse
        do {
            response = try http.post(
                url: endpoint, body: Array(body), contentType: "application/json",
                maxBodyBytes: 4 << 20, timeout: timeout)
        } catch {
            // An answer larger than the bound is an answer (the server runs): not one that is
            // tried again every 0.1 s, 4 MiB each time, while a new connection waits for it.
            if error.tooLarge { throw failure(error.description) }
            throw failure(error.description, transient: true, answered: false)
        }
        guard response.status == 200 else {
            let text = String(decoding: response.body.prefix(200), as: UTF8.self)
            throw failure(
                "HTTP \(response.status)\(text.isEmpty ? "" : ": \(text)")", transient: response.status >= 500)
        }
        let decoded: Response<Answer>
        do {
            decoded = try JSONDecoder().decode(Response<Answer>.self, from: Data(response.body))
        } catch let error as DecodingError {
            throw failure("unexpected answer: \(error.summary)")
        } catch {
            throw failure("unexpected answer: \(error)")
        }
        if let error = decoded.error {
            // Cut as an HTTP error's body is: a server's words may be megabytes long.
            let words = error.message + (error.data.map { " (\($0))" } ?? "")
            throw failure("error \(error.code): \(words.count > 200 ? words.prefix(200) + "…" : words)")
        }
        guard let result = decoded.result else { throw failure("unexpected answer: neither result nor error") }
        return result
    }
}
