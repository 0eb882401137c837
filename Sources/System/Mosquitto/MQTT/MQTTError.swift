/// What went wrong with an MQTT setting, topic or call: each case names the input at fault and why.
///
/// A plain value: safe to use from any thread.
public enum MQTTError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A broker URL that cannot be used (`url` is the text as given).
    case invalidURL(url: String, reason: String)
    /// A configuration value that cannot be used: `field` names it (`client-id`, `tls.ca-file`, ...).
    case invalidConfiguration(field: String, reason: String)
    /// A topic or topic filter that MQTT does not allow.
    case invalidTopic(topic: String, reason: String)
    /// A QoS 0 message published while the client is not connected: it was dropped (QoS 1 and 2
    /// messages are queued instead; see ``MQTTClient/publish(_:payload:qos:retain:)``).
    case notConnected(topic: String)
    /// libmosquitto refused a call: `operation` is what we asked, `code` its `MOSQ_ERR_*` value.
    case library(operation: String, code: Int32, message: String)

    public var description: String {
        switch self {
        case .invalidURL(let url, let reason):
            return "MQTT broker URL \"\(url)\": \(reason)"
        case .invalidConfiguration(let field, let reason):
            return "MQTT \(field): \(reason)"
        case .invalidTopic(let topic, let reason):
            return "MQTT topic \"\(topic)\": \(reason)"
        case .notConnected(let topic):
            return "MQTT publish to \"\(topic)\" dropped: not connected to the broker (QoS 0 is never queued)"
        case .library(let operation, let code, let message):
            return "MQTT \(operation) failed: \(message) (libmosquitto error \(code))"
        }
    }
}
