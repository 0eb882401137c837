/// Where an ``MQTTClient`` stands, for the status page and for logs.
///
/// A plain value: safe to use from any thread.
public struct MQTTStatus: Sendable, Equatable, CustomStringConvertible {
    /// The connection's state.
    public enum Connection: String, Sendable, Equatable {
        /// Not started, or stopped.
        case stopped
        /// An attempt is under way: TCP/TLS connect, CONNECT/CONNACK, or re-subscribing.
        case connecting
        /// Connected and every subscription acknowledged by the broker: a command published now is
        /// received. `online` has been published to the availability topic.
        case connected
        /// The last attempt failed or the connection dropped; the next attempt comes after the backoff.
        case disconnected
    }

    public var connection: Connection
    /// Why the last attempt failed or the last connection ended (`mqtt://host:1883: Connection
    /// refused`, `...: the broker refused the connection: not authorised`), or nil if nothing failed
    /// yet. Kept after a successful reconnect, so the status page can say what happened last.
    public var lastError: String?
    /// How many times the client has been connected (the first connect counts 1).
    public var connectCount: Int
    /// Topic filters the broker refused to subscribe (SUBACK 0x80: not authorised, with mosquitto):
    /// connected, but what is published there does not come.
    public var refusedSubscriptions: [String] = []

    public init(connection: Connection = .stopped, lastError: String? = nil, connectCount: Int = 0) {
        self.connection = connection
        self.lastError = lastError
        self.connectCount = connectCount
    }

    public var isConnected: Bool { connection == .connected }

    public var description: String {
        "\(connection.rawValue) (connects: \(connectCount)\(lastError.map { ", last error: \($0)" } ?? ""))"
    }
}
