import BatonTesting
import MQTT
import Testing

@Suite(.ownThread) struct MQTTURLTests {
    /// Good URLs give host, port (default by scheme) and TLS.
    @Test(arguments: [
        ("mqtt://broker.lan", "broker.lan", 1883, false),
        ("mqtt://127.0.0.1:1884", "127.0.0.1", 1884, false),
        ("mqtts://broker.lan", "broker.lan", 8883, true),
        ("MQTTS://broker.lan:8884/", "broker.lan", 8884, true),
        ("mqtt://[::1]:1885", "::1", 1885, false),
        ("mqtt://[fd00::2]", "fd00::2", 1883, false),
    ])
    func parsesHostPortAndScheme(text: String, host: String, port: Int, tls: Bool) throws {
        let url = try MQTTURL(parsing: text)
        #expect(url == MQTTURL(host: host, port: port, usesTLS: tls))
    }

    /// Each bad URL is refused with a message naming the URL and the fault.
    @Test(arguments: [
        ("broker.lan:1883", "MQTT broker URL \"broker.lan:1883\": expected mqtt://host:port or mqtts://host:port"),
        (
            "http://broker.lan",
            "MQTT broker URL \"http://broker.lan\": the scheme must be mqtt:// or mqtts://, not \"http://\""
        ),
        ("mqtt://", "MQTT broker URL \"mqtt://\": the host is missing"),
        ("mqtt://:1883", "MQTT broker URL \"mqtt://:1883\": the host is missing"),
        ("mqtt://broker:0", "MQTT broker URL \"mqtt://broker:0\": the port \"0\" is not a number from 1 to 65535"),
        (
            "mqtt://broker:http",
            "MQTT broker URL \"mqtt://broker:http\": the port \"http\" is not a number from 1 to 65535"
        ),
        (
            "mqtt://broker:70000",
            "MQTT broker URL \"mqtt://broker:70000\": the port \"70000\" is not a number from 1 to 65535"
        ),
        (
            "mqtt://user:pw@broker",
            "MQTT broker URL \"mqtt://user:pw@broker\": credentials do not belong in the URL: set the username and the password file"
        ),
        (
            "mqtt://broker/baton",
            "MQTT broker URL \"mqtt://broker/baton\": unexpected \"/baton\" after the host and port"
        ),
        ("mqtt://[::1", "MQTT broker URL \"mqtt://[::1\": the IPv6 address has no closing \"]\""),
        ("mqtt://bro ker", "MQTT broker URL \"mqtt://bro ker\": the host \"bro ker\" is not a host name or address"),
    ])
    func refusesBadURLsWithTheReason(text: String, message: String) {
        let error = #expect(throws: MQTTError.self) { try MQTTURL(parsing: text) }
        #expect(error?.description == message)
    }

    /// The description is a URL that parses back to the same value.
    @Test func describesItselfAsAParsableURL() throws {
        for url in [MQTTURL(host: "::1", port: 1883), MQTTURL(host: "b.lan", port: 8883, usesTLS: true)] {
            #expect(try MQTTURL(parsing: url.description) == url)
        }
        #expect(MQTTURL(host: "::1", port: 1883).description == "mqtt://[::1]:1883")
    }
}
