import BatonTesting
import MQTT
import Testing

/// One broken configuration and the error it must give.
struct BadField: Sendable, CustomTestStringConvertible {
    let message: String
    let change: @Sendable (inout MQTTConfiguration) -> Void
    init(_ message: String, _ change: @escaping @Sendable (inout MQTTConfiguration) -> Void) {
        self.message = message
        self.change = change
    }
    var testDescription: String { message }
}

@Suite(.ownThread) struct MQTTConfigurationTests {
    static func base() -> MQTTConfiguration {
        MQTTConfiguration(broker: MQTTURL(host: "127.0.0.1", port: 1883), clientID: "baton-kitchen")
    }

    /// The defaults are valid.
    @Test func acceptsTheDefaults() throws {
        try Self.base().validate()
    }

    /// Each unusable field is named with the reason.
    @Test(arguments: [
        BadField("MQTT client-id: is empty") { $0.clientID = "" },
        BadField("MQTT client-id: \"baton kitchen\" must be 1 to 128 bytes without spaces or control characters") {
            $0.clientID = "baton kitchen"
        },
        BadField("MQTT password: is set but the username is not") { $0.password = "secret" },
        BadField("MQTT username: is empty (leave it out for anonymous access)") { $0.username = "" },
        BadField("MQTT keepalive: 2.0 seconds is not between 5 s and 65535 s") { $0.keepAlive = .seconds(2) },
        BadField("MQTT reconnect-delay.min: must be more than 0 s") { $0.minimumReconnectDelay = .zero },
        BadField("MQTT reconnect-delay.max: 0.5 seconds is shorter than the minimum 1.0 seconds") {
            $0.maximumReconnectDelay = .milliseconds(500)
        },
        BadField("MQTT will: cannot be set together with the availability topic, whose will is \"offline\"") {
            $0.availabilityTopic = "baton/kitchen/availability"
            $0.will = MQTTMessage(topic: "baton/kitchen/will", text: "gone")
        },
        BadField("MQTT topic \"baton/+/availability\": a topic to publish to cannot contain the wildcards + or #") {
            $0.availabilityTopic = "baton/+/availability"
        },
        BadField("MQTT tls: TLS files are set but the broker URL is mqtt://127.0.0.1:1883: use mqtts://") {
            $0.tls.caFile = "/etc/ssl/certs/ca-certificates.crt"
        },
        BadField("MQTT tls.ca-file: /nonexistent/ca.pem: No such file or directory") {
            $0.broker.usesTLS = true
            $0.tls.caFile = "/nonexistent/ca.pem"
        },
        BadField("MQTT tls.key-file: tls.cert-file and tls.key-file go together: set both or neither") {
            $0.broker.usesTLS = true
            $0.tls.certFile = "/etc/hostname"
        },
    ])
    func namesTheBadField(bad: BadField) {
        var configuration = Self.base()
        bad.change(&configuration)
        let error = #expect(throws: MQTTError.self) { try configuration.validate() }
        #expect(error?.description == bad.message)
    }

    /// The availability topic makes the will `offline`, retained, QoS 1, on that topic.
    @Test func availabilityTopicSetsTheWill() {
        var configuration = Self.base()
        #expect(configuration.effectiveWill == nil)
        configuration.availabilityTopic = "baton/kitchen/availability"
        #expect(
            configuration.effectiveWill
                == MQTTMessage(
                    topic: "baton/kitchen/availability", text: "offline",
                    qos: .atLeastOnce, retain: true))
    }

    /// Topic filters and names are checked by libmosquitto's rules, with a reason.
    @Test func checksTopicsAndFilters() throws {
        try MQTTTopic.checkFilter("baton/+/zones/#")
        try MQTTTopic.checkName("baton/kitchen/state")
        #expect(
            throws: MQTTError.invalidTopic(
                topic: "baton/#/x",
                reason: "+ must be a whole level and # the whole last level (a/+/c, a/#)")
        ) {
            try MQTTTopic.checkFilter("baton/#/x")
        }
        #expect(
            throws: MQTTError.invalidTopic(
                topic: "baton/k+/x",
                reason: "+ must be a whole level and # the whole last level (a/+/c, a/#)")
        ) {
            try MQTTTopic.checkFilter("baton/k+/x")
        }
        #expect(throws: MQTTError.invalidTopic(topic: "", reason: "is empty")) { try MQTTTopic.checkName("") }
    }
}
