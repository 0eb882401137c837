import MQTT
import Testing

@Suite struct HomeAssistantDiscoveryTests {
    static func discovery() throws -> HomeAssistantDiscovery {
        try HomeAssistantDiscovery(device: "kitchen", name: "Kitchen speaker", zones: ["main", "patio"])
    }

    static let device =
        #""device":{"identifiers":["baton_kitchen"],"manufacturer":"Baton","model":"Baton","name":"Kitchen speaker"}"#

    /// The doorbell button: topic and exact JSON.
    @Test func buildsTheDoorbellButton() throws {
        let message = try Self.discovery().doorbellButton()
        #expect(message.topic == "homeassistant/button/baton_kitchen/doorbell/config")
        #expect(
            message.text
                == #"{"availability_topic":"baton/kitchen/availability","command_topic":"baton/kitchen/announce","#
                + Self.device + #","icon":"mdi:doorbell","name":"Doorbell","payload_press":"{\"sound\":\"doorbell\"}","#
                + #""unique_id":"baton_kitchen_doorbell"}"#)
    }

    /// A zone's volume number: 0–100, command and state topics, exact JSON.
    @Test func buildsAZoneVolumeNumber() throws {
        let message = try Self.discovery().volumeNumber(zone: "patio")
        #expect(message.topic == "homeassistant/number/baton_kitchen/patio_volume/config")
        #expect(
            message.text == #"{"availability_topic":"baton/kitchen/availability","#
                + #""command_topic":"baton/kitchen/zones/patio/volume/set","# + Self.device
                + #","icon":"mdi:volume-high","max":100,"min":0,"mode":"slider","name":"patio volume","#
                + #""state_topic":"baton/kitchen/zones/patio/volume","step":1,"unique_id":"baton_kitchen_patio_volume"}"#
        )
    }

    /// A zone's state sensor: the state field, the rest as attributes, exact JSON.
    @Test func buildsAZoneStateSensor() throws {
        let message = try Self.discovery().stateSensor(zone: "main")
        #expect(message.topic == "homeassistant/sensor/baton_kitchen/main_state/config")
        #expect(
            message.text == #"{"availability_topic":"baton/kitchen/availability","# + Self.device
                + #","icon":"mdi:speaker","json_attributes_topic":"baton/kitchen/zones/main/state","#
                + #""name":"main state","state_topic":"baton/kitchen/zones/main/state","#
                + #""unique_id":"baton_kitchen_main_state","value_template":"{{ value_json.state }}"}"#)
    }

    /// All messages: the button, then volume and state per zone, in zone order.
    @Test func listsEveryEntity() throws {
        #expect(
            try Self.discovery().messages().map(\.topic) == [
                "homeassistant/button/baton_kitchen/doorbell/config",
                "homeassistant/number/baton_kitchen/main_volume/config",
                "homeassistant/sensor/baton_kitchen/main_state/config",
                "homeassistant/number/baton_kitchen/patio_volume/config",
                "homeassistant/sensor/baton_kitchen/patio_state/config",
            ])
    }

    /// Names that cannot be topic levels and HA ids are refused, naming the field.
    @Test func refusesNamesThatCannotBeIDs() {
        #expect(
            throws: MQTTError.invalidConfiguration(
                field: "zones[1]",
                reason:
                    "\"living room\" must be letters, digits, \"-\" or \"_\" (it is used in topics and Home Assistant ids)"
            )
        ) {
            try HomeAssistantDiscovery(device: "kitchen", name: "K", zones: ["main", "living room"])
        }
        #expect(throws: MQTTError.self) { try HomeAssistantDiscovery(device: "a/b", name: "K", zones: []) }
        #expect(throws: MQTTError.self) { try HomeAssistantDiscovery(device: "", name: "K", zones: []) }
    }
}
