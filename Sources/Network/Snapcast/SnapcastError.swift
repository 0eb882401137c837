import Curl

/// Why a JSON-RPC call to snapserver failed: which server and method, and what went wrong there
/// (transport, HTTP status, a JSON-RPC error, or an answer that does not have the expected shape,
/// with the JSON path of the bad value). A plain value.
public struct SnapcastError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The JSON-RPC endpoint (`http://127.0.0.1:1780/jsonrpc`).
    public var endpoint: String
    /// The method called (`Server.GetStatus`).
    public var method: String
    /// What went wrong.
    public var problem: String
    /// True when retrying later may help (the server is unreachable or answered with a 5xx).
    public var isTransient: Bool
    /// True when an HTTP answer came back (an error status, a JSON-RPC error, a body of the wrong
    /// shape), false when none did (no connection, a timeout): the server runs, if not as wished.
    public var serverAnswered: Bool

    public init(
        endpoint: String, method: String, problem: String, isTransient: Bool = false, serverAnswered: Bool = true
    ) {
        self.endpoint = endpoint
        self.method = method
        self.problem = problem
        self.isTransient = isTransient
        self.serverAnswered = serverAnswered
    }

    /// The endpoint with any credentials hidden: it goes to the log and the status.
    public var description: String { "snapserver \(URLRedaction.redact(endpoint)): \(method): \(problem)" }
}
