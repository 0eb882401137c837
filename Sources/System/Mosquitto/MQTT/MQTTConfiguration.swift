import Glibc

/// Files for a TLS connection (`mqtts://`). Paths are read by libmosquitto (OpenSSL) when the client
/// is created; the daemon runs as its own user, so they must be readable by it.
public struct MQTTTLSFiles: Sendable, Equatable {
    /// PEM file of the certificate authorities that sign the broker's certificate; nil uses the
    /// system's trust store (`/etc/ssl/certs`).
    public var caFile: String?
    /// PEM client certificate, for brokers that authenticate clients by certificate; needs ``keyFile``.
    public var certFile: String?
    /// PEM private key of ``certFile`` (unencrypted).
    public var keyFile: String?

    public init(caFile: String? = nil, certFile: String? = nil, keyFile: String? = nil) {
        self.caFile = caFile
        self.certFile = certFile
        self.keyFile = keyFile
    }

    var isEmpty: Bool { caFile == nil && certFile == nil && keyFile == nil }
}

/// Everything an ``MQTTClient`` needs: where the broker is, who we are, what the broker says when we
/// vanish, and how patiently we reconnect.
///
/// A plain value: build it on any thread; ``validate()`` reports the first unusable field.
public struct MQTTConfiguration: Sendable, Equatable {
    /// The broker: host, port, and whether TLS is used (`mqtts://`).
    public var broker: MQTTURL
    /// The MQTT client identifier: unique per broker (a second client with the same id makes the
    /// broker drop the first). 1 to 128 bytes without spaces or control characters; up to 23
    /// characters from `[0-9A-Za-z]` is what every broker must accept (mosquitto accepts more).
    public var clientID: String
    /// The user name, or nil for an anonymous connection.
    public var username: String?
    /// The password (the daemon reads it from a file); needs ``username``.
    public var password: String?
    /// The MQTT keep-alive: the broker drops us (and publishes the will) when it hears nothing for
    /// 1.5 times this; we detect a dead broker in about the same time. 5 s to 18 h.
    public var keepAlive: Duration = .seconds(30)
    /// TLS files; only for an `mqtts://` broker.
    public var tls = MQTTTLSFiles()
    /// The most of a message's payload copied for `onMessage`: a longer one comes cut to this many
    /// bytes, with its whole length, so that its receiver can refuse it without a second copy of
    /// what may be hundreds of MB (a broker takes up to 256 MB by default; libmosquitto holds it
    /// whole already).
    public var maximumPayload = Int.max
    /// The last will, published by the broker when the connection drops without a DISCONNECT
    /// (crash, power loss, network loss). Not allowed together with ``availabilityTopic``, which sets
    /// its own will.
    public var will: MQTTMessage?
    /// Where to publish `online` (retained, QoS 1) on every connect and `offline` on ``MQTTClient/stop()``;
    /// the will is then `offline` on the same topic, so the topic says `offline` however we go away.
    public var availabilityTopic: String?
    /// The first wait after a failed connection attempt or a lost connection; the wait doubles after
    /// each further failure up to ``maximumReconnectDelay``, and returns to this after a connect.
    public var minimumReconnectDelay: Duration = .seconds(1)
    /// The longest wait between two connection attempts.
    public var maximumReconnectDelay: Duration = .seconds(60)

    /// The payload published to ``availabilityTopic`` on connect.
    public static let onlinePayload = "online"
    /// The payload of the will (and of a clean stop) on ``availabilityTopic``.
    public static let offlinePayload = "offline"

    public init(broker: MQTTURL, clientID: String) {
        self.broker = broker
        self.clientID = clientID
    }

    /// The will the client registers: ``will``, or `offline` on ``availabilityTopic``.
    public var effectiveWill: MQTTMessage? {
        if let availabilityTopic {
            return MQTTMessage(topic: availabilityTopic, text: Self.offlinePayload, qos: .atLeastOnce, retain: true)
        }
        return will
    }

    /// Checks every field; the error names the first one at fault (`client-id`, `tls.ca-file`, ...).
    public func validate() throws(MQTTError) {
        func fail(_ field: String, _ reason: String) -> MQTTError {
            .invalidConfiguration(field: field, reason: reason)
        }
        guard !broker.host.isEmpty else { throw fail("url", "the broker host is empty") }
        guard (1...65535).contains(broker.port) else { throw fail("url", "the port \(broker.port) is not 1...65535") }
        guard !clientID.isEmpty else { throw fail("client-id", "is empty") }
        guard clientID.utf8.count <= 128,
            !clientID.unicodeScalars.contains(where: {
                $0.properties.isWhitespace || $0.properties.generalCategory == .control
            })
        else {
            throw fail("client-id", "\"\(clientID)\" must be 1 to 128 bytes without spaces or control characters")
        }
        if let username, username.isEmpty { throw fail("username", "is empty (leave it out for anonymous access)") }
        if password != nil && username == nil { throw fail("password", "is set but the username is not") }
        let keepAliveSeconds = keepAlive.components.seconds
        guard keepAliveSeconds >= 5 && keepAliveSeconds <= 65535 else {
            throw fail("keepalive", "\(keepAlive) is not between 5 s and 65535 s")
        }
        guard minimumReconnectDelay > .zero else { throw fail("reconnect-delay.min", "must be more than 0 s") }
        guard maximumReconnectDelay >= minimumReconnectDelay else {
            throw fail(
                "reconnect-delay.max", "\(maximumReconnectDelay) is shorter than the minimum \(minimumReconnectDelay)")
        }
        if will != nil && availabilityTopic != nil {
            throw fail("will", "cannot be set together with the availability topic, whose will is \"offline\"")
        }
        if let will { try MQTTTopic.checkName(will.topic) }
        if let availabilityTopic { try MQTTTopic.checkName(availabilityTopic) }
        if broker.usesTLS {
            if (tls.certFile == nil) != (tls.keyFile == nil) {
                throw fail(
                    tls.certFile == nil ? "tls.cert-file" : "tls.key-file",
                    "tls.cert-file and tls.key-file go together: set both or neither")
            }
            for (field, path) in [
                ("tls.ca-file", tls.caFile), ("tls.cert-file", tls.certFile), ("tls.key-file", tls.keyFile),
            ] {
                guard let path else { continue }
                if access(path, R_OK) != 0 {
                    throw fail(field, "\(path): \(String(cString: strerror(errno)))")
                }
            }
        } else if !tls.isEmpty {
            throw fail("tls", "TLS files are set but the broker URL is \(broker): use mqtts://")
        }
    }
}
