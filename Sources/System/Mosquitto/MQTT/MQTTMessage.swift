/// MQTT's delivery guarantee for one message or subscription.
public enum MQTTQoS: Int32, Sendable, Equatable, CaseIterable {
    /// At most once: never retried, never queued while disconnected.
    case atMostOnce = 0
    /// At least once: acknowledged by the broker; libmosquitto keeps it until then, across reconnects.
    case atLeastOnce = 1
    /// Exactly once: a four-way handshake; kept like QoS 1.
    case exactlyOnce = 2
}

/// One message to publish: also the form of a last will.
///
/// A plain value: safe to use from any thread.
public struct MQTTMessage: Sendable, Equatable {
    public var topic: String
    public var payload: [UInt8]
    public var qos: MQTTQoS
    /// Whether the broker keeps it as the topic's last value for future subscribers.
    public var retain: Bool

    public init(topic: String, payload: [UInt8], qos: MQTTQoS = .atLeastOnce, retain: Bool = false) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
    }

    /// A message whose payload is the UTF-8 of `text`.
    public init(topic: String, text: String, qos: MQTTQoS = .atLeastOnce, retain: Bool = false) {
        self.init(topic: topic, payload: Array(text.utf8), qos: qos, retain: retain)
    }
}
