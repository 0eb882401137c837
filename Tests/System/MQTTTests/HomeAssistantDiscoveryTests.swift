import BatonTesting
import MQTT
import Testing

@Suite(.ownThread) struct HomeAssistantDiscoveryTests {
    static func discovery() throws -> HomeAssistantDiscovery {
        try HomeAssistantDiscovery(
            device: "kitchen", name: "Kitchen speaker", zones: ["main", "patio"], sounds: ["chime", "doorbell"])
    }

    /// A zone entity's availability: the speaker online and the zone's state not `unavailable`.
    static func zoneAvailability(_ zone: String) -> String {
        #""availability":[{"topic":"baton/kitchen/availability"},{"topic":"baton/kitchen/zones/"#
            + zone
            + #"/state","value_template":"{{ 'offline' if value_json.state == 'unavailable' else 'online' }}"}],"#
            + #""availability_mode":"all","#
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
            message.text == "{" + Self.zoneAvailability("patio")
                + #""command_topic":"baton/kitchen/zones/patio/volume/set","# + Self.device
                + #","icon":"mdi:volume-high","max":100,"min":0,"mode":"slider","name":"patio volume","#
                + #""state_topic":"baton/kitchen/zones/patio/volume","step":1,"unique_id":"baton_kitchen_patio_volume"}"#
        )
    }

    /// A zone with a `max-volume` gets a slider that ends there: past it every value would be
    /// refused (on `<base>/errors`, which HA does not show), and the slider would snap back.
    @Test func aZoneVolumeSliderEndsAtItsMaxVolume() throws {
        let discovery = try HomeAssistantDiscovery(
            device: "kitchen", name: "K", zones: ["patio", "main"], maxVolumes: ["patio": 60])
        #expect(discovery.volumeNumber(zone: "patio").text.contains(#""max":60,"min":0"#))
        #expect(discovery.volumeNumber(zone: "main").text.contains(#""max":100,"min":0"#))
    }

    /// A zone whose `max-volume` is below 1 % gets a slider in tenths up to it, rounded down (0.55 %
    /// → 0.5); below 0.1 % none, its discovery message empty (removing one published before). The
    /// slider went from 0 to 0, which Home Assistant refuses (max must be above min): the zone had
    /// no volume entity.
    @Test func aZoneBelowOnePercentGetsASliderInTenthsOrNone() throws {
        let discovery = try HomeAssistantDiscovery(
            device: "kitchen", name: "K", zones: ["patio", "tiny", "off"],
            maxVolumes: ["patio": 0.55, "tiny": 0.05, "off": 0])
        #expect(discovery.volumeNumber(zone: "patio").text.contains(#""max":0.5,"min":0,"mode":"slider""#))
        #expect(discovery.volumeNumber(zone: "patio").text.contains(#""step":0.1,"#))
        for zone in ["tiny", "off"] {
            let none = discovery.volumeNumber(zone: zone)
            #expect(none.topic == "homeassistant/number/baton_kitchen/\(zone)_volume/config" && none.payload.isEmpty)
            #expect(discovery.messages().contains(none))
        }
        #expect(HomeAssistantDiscovery.volumeSlider(maxPercent: 1)! == (1, 1))
        #expect(HomeAssistantDiscovery.volumeSlider(maxPercent: 55.5)! == (55, 1))
        #expect(HomeAssistantDiscovery.volumeSlider(maxPercent: 0.1)! == (0.1, 0.1))
        #expect(HomeAssistantDiscovery.volumeSlider(maxPercent: 0.099) == nil)
    }

    /// A zone's state sensor: the state field, the rest as attributes, exact JSON.
    @Test func buildsAZoneStateSensor() throws {
        let message = try Self.discovery().stateSensor(zone: "main")
        #expect(message.topic == "homeassistant/sensor/baton_kitchen/main_state/config")
        #expect(
            message.text == "{" + Self.zoneAvailability("main") + Self.device
                + #","icon":"mdi:speaker","json_attributes_topic":"baton/kitchen/zones/main/state","#
                + #""name":"main state","state_topic":"baton/kitchen/zones/main/state","#
                + #""unique_id":"baton_kitchen_main_state","value_template":"{{ value_json.state }}"}"#)
    }

    /// The select of sounds: every sound an option, its choice read back from `baton/<device>/sound`.
    @Test func buildsTheSoundSelect() throws {
        let message = try Self.discovery().soundSelect()
        #expect(message.topic == "homeassistant/select/baton_kitchen/sound/config")
        #expect(
            message.text
                == #"{"availability_topic":"baton/kitchen/availability","command_topic":"baton/kitchen/sound/set","#
                + Self.device + #","icon":"mdi:bell-ring","name":"Sound","options":["chime","doorbell"],"#
                + #""state_topic":"baton/kitchen/sound","unique_id":"baton_kitchen_sound"}"#)
    }

    /// The notify entity: HA publishes the message to `baton/<device>/notify`.
    @Test func buildsTheNotifyEntity() throws {
        let message = try Self.discovery().notify()
        #expect(message.topic == "homeassistant/notify/baton_kitchen/speak/config")
        #expect(
            message.text
                == #"{"availability_topic":"baton/kitchen/availability","command_topic":"baton/kitchen/notify","#
                + Self.device + #","icon":"mdi:account-voice","name":"Speak","unique_id":"baton_kitchen_speak"}"#)
    }

    /// A zone's now-playing sensor: the title or `idle`, the JSON as attributes, the zone's availability.
    @Test func buildsANowPlayingSensor() throws {
        let message = try Self.discovery().nowPlayingSensor(zone: "patio")
        #expect(message.topic == "homeassistant/sensor/baton_kitchen/patio_now_playing/config")
        #expect(
            message.text == "{" + Self.zoneAvailability("patio") + Self.device
                + #","icon":"mdi:music","json_attributes_topic":"baton/kitchen/zones/patio/now-playing","#
                + #""name":"patio now playing","state_topic":"baton/kitchen/zones/patio/now-playing","#
                + #""unique_id":"baton_kitchen_patio_now_playing","#
                + #""value_template":"{{ (value_json.title | default('idle'))[:255] }}"}"#)
    }

    /// All messages: the doorbell, play/pause/next, the sound select and its button, notify, then
    /// volume, state and now playing per zone, in zone order; without sounds, no select.
    @Test func listsEveryEntity() throws {
        let device = [
            "button/baton_kitchen/doorbell", "button/baton_kitchen/music_play", "button/baton_kitchen/music_pause",
            "button/baton_kitchen/music_next", "select/baton_kitchen/sound", "button/baton_kitchen/announce_sound",
            "notify/baton_kitchen/speak",
        ]
        let zones = ["main", "patio"].flatMap {
            [
                "number/baton_kitchen/\($0)_volume", "sensor/baton_kitchen/\($0)_state",
                "sensor/baton_kitchen/\($0)_now_playing",
            ]
        }
        #expect(try Self.discovery().messages().map(\.topic) == (device + zones).map { "homeassistant/\($0)/config" })
        let silent = try HomeAssistantDiscovery(device: "kitchen", name: "K", zones: [])
        #expect(!silent.messages().map(\.topic).contains { $0.contains("/select/") })
        // No `doorbell` sound: no doorbell button (each press would fail).
        let noBell = try HomeAssistantDiscovery(device: "kitchen", name: "K", zones: [], sounds: ["chime"])
        #expect(!noBell.messages().map(\.topic).contains { $0.contains("/doorbell/") })
        #expect(!silent.messages().map(\.topic).contains { $0.contains("/doorbell/") })
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
