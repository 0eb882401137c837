import FoundationEssentials

/// Builds Home Assistant MQTT discovery messages for one Baton speaker: a doorbell button, music
/// buttons, a sound select with its announce button, a notify entity that speaks, and per zone a
/// volume number, a state sensor and a now-playing sensor, all tied to one HA device and to Baton's
/// availability topic (zone entities also to their zone's state). Publish each ``Message`` retained (QoS 1) on every connect; HA then creates the entities.
///
/// Topics follow Baton's scheme (docs/MQTT.md): commands under `baton/<device>/…`, discovery at
/// `<prefix>/<component>/<node_id>/<object_id>/config` with node id `baton_<device>`.
///
/// Pure: no I/O. A plain value: any thread.
public struct HomeAssistantDiscovery: Sendable, Equatable {
    /// One discovery message: publish `payload` to `topic`, retained.
    public struct Message: Sendable, Equatable {
        public var topic: String
        public var payload: [UInt8]
        /// The payload as text (JSON).
        public var text: String { String(decoding: payload, as: UTF8.self) }
    }

    /// The speaker's name in topics (`kitchen`): letters, digits, `-` and `_`.
    public let device: String
    /// The name HA shows for the device (`Kitchen speaker`).
    public let name: String
    /// The zones' names in topics, each like ``device``.
    public let zones: [String]
    /// HA's discovery prefix (its `discovery_prefix`), `homeassistant` by default.
    public let prefix: String
    /// The first level of Baton's own topics (`baton`).
    public let topicPrefix: String
    /// The announcement sounds, the options of the sound `select` (none: no select).
    public let sounds: [String]
    /// Each zone's highest volume in percent (its `max-volume`: 0.5 for 0.5 %), the top of its
    /// volume slider (``volumeSlider(maxPercent:)``); a zone not named here goes to 100.
    public let maxVolumes: [String: Double]

    /// - Throws: ``MQTTError/invalidConfiguration(field:reason:)`` naming a device or zone name that
    ///   cannot be part of a topic and an HA id.
    public init(
        device: String, name: String, zones: [String], prefix: String = "homeassistant",
        topicPrefix: String = "baton", sounds: [String] = [], maxVolumes: [String: Double] = [:]
    ) throws(MQTTError) {
        try Self.checkID(device, field: "device")
        for (index, zone) in zones.enumerated() { try Self.checkID(zone, field: "zones[\(index)]") }
        if prefix.isEmpty || prefix.contains("+") || prefix.contains("#") {
            throw .invalidConfiguration(field: "homeassistant.prefix", reason: "\"\(prefix)\" is not a topic prefix")
        }
        self.device = device
        self.name = name
        self.zones = zones
        self.prefix = prefix
        self.topicPrefix = topicPrefix
        self.sounds = sounds
        self.maxVolumes = maxVolumes
    }

    private static func checkID(_ id: String, field: String) throws(MQTTError) {
        let allowed = id.utf8.allSatisfy {
            ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D
                || $0 == 0x5F
        }
        guard !id.isEmpty, allowed else {
            throw .invalidConfiguration(
                field: field,
                reason:
                    "\"\(id)\" must be letters, digits, \"-\" or \"_\" (it is used in topics and Home Assistant ids)")
        }
    }

    /// `<topicPrefix>/<device>` (`baton/kitchen`).
    public var baseTopic: String { "\(topicPrefix)/\(device)" }
    /// `baton/<device>/availability`.
    public var availabilityTopic: String { "\(baseTopic)/availability" }
    /// HA's node id for this speaker: `baton_<device>`.
    public var nodeID: String { "baton_\(device)" }

    /// Every discovery message: the doorbell button (when there is a `doorbell` sound: without one
    /// each press failed, said only on `<base>/errors`), the music buttons, the sound select with
    /// its announce button, the notify entity, then per zone its volume (empty for a zone with no
    /// slider: see ``volumeNumber(zone:)``), state and now-playing sensor.
    public func messages() -> [Message] {
        (sounds.contains("doorbell") ? [doorbellButton()] : []) + musicButtons()
            + (sounds.isEmpty ? [] : [soundSelect()]) + [announceButton(), notify()]
            + zones.flatMap(zoneMessages)
    }

    /// The messages of one zone's entities (its volume, state and now-playing sensor): published
    /// empty, they remove a zone that is gone.
    public func zoneMessages(_ zone: String) -> [Message] {
        [volumeNumber(zone: zone), stateSensor(zone: zone), nowPlayingSensor(zone: zone)]
    }

    /// A `button` that publishes `{"sound":"doorbell"}` to `baton/<device>/announce`.
    public func doorbellButton() -> Message {
        message(
            component: "button", objectID: "doorbell",
            Entity(
                name: "Doorbell", uniqueID: "\(nodeID)_doorbell", commandTopic: "\(baseTopic)/announce",
                payloadPress: #"{"sound":"doorbell"}"#, icon: "mdi:doorbell"))
    }

    /// A `number` from 0 up to the zone's `maxVolumes` (a slider past it would only be refused),
    /// as ``volumeSlider(maxPercent:)`` gives it, for `zone`'s volume: commands to
    /// `…/zones/<zone>/volume/set`, state from `…/zones/<zone>/volume`. A zone with no slider
    /// (`max-volume` below 0.1 %) gets the message empty, which removes one published before: Home
    /// Assistant refuses a number whose max is not above its min, and the entity was missing.
    public func volumeNumber(zone: String) -> Message {
        let zoneTopic = "\(baseTopic)/zones/\(zone)"
        guard let slider = Self.volumeSlider(maxPercent: maxVolumes[zone] ?? 100) else {
            return Message(topic: "\(prefix)/number/\(nodeID)/\(zone)_volume/config", payload: [])
        }
        return message(
            component: "number", objectID: "\(zone)_volume",
            Entity(
                name: "\(zone) volume", uniqueID: "\(nodeID)_\(zone)_volume",
                commandTopic: "\(zoneTopic)/volume/set", stateTopic: "\(zoneTopic)/volume",
                min: 0, max: slider.max, step: slider.step, mode: "slider",
                icon: "mdi:volume-high"), zone: zone)
    }

    /// The top and step of the volume slider of a zone whose `max-volume` is `maxPercent` %: from
    /// 1 %, whole percents, the top rounded down (a volume the zone accepts); below 1 %, tenths
    /// (0.55 % → 0.5, step 0.1: a top of 0, rounded down to whole percents, made a slider Home
    /// Assistant refuses); below 0.1 % (or 0), nil: no slider.
    public static func volumeSlider(maxPercent: Double) -> (max: Double, step: Double)? {
        let top = Swift.min(100, Swift.max(0, maxPercent))
        if top >= 1 { return ((top + 1e-9).rounded(.down), 1) }
        let tenths = (top * 10 + 1e-9).rounded(.down)
        return tenths >= 1 ? (tenths / 10, 0.1) : nil
    }

    /// A `sensor` showing `zone`'s state: the `state` field of the JSON on `…/zones/<zone>/state`,
    /// the other fields as attributes.
    public func stateSensor(zone: String) -> Message {
        let stateTopic = "\(baseTopic)/zones/\(zone)/state"
        return message(
            component: "sensor", objectID: "\(zone)_state",
            Entity(
                name: "\(zone) state", uniqueID: "\(nodeID)_\(zone)_state", stateTopic: stateTopic,
                valueTemplate: "{{ value_json.state }}", jsonAttributesTopic: stateTopic,
                icon: "mdi:speaker"), zone: zone)
    }

    /// Play, pause and next `button`s for the newest music source: each publishes `{}` to
    /// `baton/<device>/music/resume`, `…/pause`, `…/next` (play resumes, or plays the saved queue).
    public func musicButtons() -> [Message] {
        [
            ("play", "resume", "Play", "mdi:play"), ("pause", "pause", "Pause", "mdi:pause"),
            ("next", "next", "Next track", "mdi:skip-next"),
        ].map { id, command, name, icon in
            message(
                component: "button", objectID: "music_\(id)",
                Entity(
                    name: name, uniqueID: "\(nodeID)_music_\(id)", commandTopic: "\(baseTopic)/music/\(command)",
                    payloadPress: "{}", icon: icon))
        }
    }

    /// A `select` of the announcement sounds: the choice goes to `baton/<device>/sound/set`, and
    /// the chosen one is read back from `baton/<device>/sound` (retained).
    public func soundSelect() -> Message {
        message(
            component: "select", objectID: "sound",
            Entity(
                name: "Sound", uniqueID: "\(nodeID)_sound", commandTopic: "\(baseTopic)/sound/set",
                stateTopic: "\(baseTopic)/sound", icon: "mdi:bell-ring", options: sounds))
    }

    /// A `button` that announces the sound chosen in the select (`baton/<device>/sound/announce`).
    public func announceButton() -> Message {
        message(
            component: "button", objectID: "announce_sound",
            Entity(
                name: "Announce sound", uniqueID: "\(nodeID)_announce_sound",
                commandTopic: "\(baseTopic)/sound/announce", payloadPress: "{}", icon: "mdi:bullhorn"))
    }

    /// A `notify` entity: `notify.send_message` publishes the message to `baton/<device>/notify`,
    /// and Baton speaks it on every zone.
    public func notify() -> Message {
        message(
            component: "notify", objectID: "speak",
            Entity(
                name: "Speak", uniqueID: "\(nodeID)_speak", commandTopic: "\(baseTopic)/notify",
                icon: "mdi:account-voice"))
    }

    /// A `sensor` with what plays in `zone`: the title (or `idle`; at most 255 characters, HA's
    /// limit for a state) from the JSON on `…/zones/<zone>/now-playing`, which also gives the
    /// attributes (title, artist, album, position, playback: Home Assistant drops one named
    /// `state`).
    public func nowPlayingSensor(zone: String) -> Message {
        let topic = "\(baseTopic)/zones/\(zone)/now-playing"
        return message(
            component: "sensor", objectID: "\(zone)_now_playing",
            Entity(
                name: "\(zone) now playing", uniqueID: "\(nodeID)_\(zone)_now_playing", stateTopic: topic,
                valueTemplate: "{{ (value_json.title | default('idle'))[:255] }}", jsonAttributesTopic: topic,
                icon: "mdi:music"), zone: zone)
    }

    private func message(component: String, objectID: String, _ entity: Entity, zone: String? = nil) -> Message {
        var entity = entity
        if let zone {
            // Unavailable when the speaker is offline or the zone's device cannot be opened.
            entity.availability = [
                Availability(topic: availabilityTopic),
                Availability(
                    topic: "\(baseTopic)/zones/\(zone)/state",
                    valueTemplate: "{{ 'offline' if value_json.state == 'unavailable' else 'online' }}"),
            ]
            entity.availabilityMode = "all"
        } else {
            entity.availabilityTopic = availabilityTopic
        }
        entity.device = Device(identifiers: [nodeID], name: name, model: "Baton", manufacturer: "Baton")
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Encoding these plain strings and numbers cannot fail.
        let payload = (try? encoder.encode(entity)).map { Array($0) } ?? []
        return Message(topic: "\(prefix)/\(component)/\(nodeID)/\(objectID)/config", payload: payload)
    }

    /// The fields of HA's MQTT discovery schema that Baton uses; nil fields are left out.
    private struct Entity: Encodable {
        var name: String
        var uniqueID: String
        var commandTopic: String?
        var stateTopic: String?
        var payloadPress: String?
        var valueTemplate: String?
        var jsonAttributesTopic: String?
        var min: Double?
        var max: Double?
        var step: Double?
        var mode: String?
        var icon: String?
        var options: [String]?
        var availabilityTopic: String?
        var availability: [Availability]?
        var availabilityMode: String?
        var device: Device?

        init(
            name: String, uniqueID: String, commandTopic: String? = nil, stateTopic: String? = nil,
            payloadPress: String? = nil, valueTemplate: String? = nil, jsonAttributesTopic: String? = nil,
            min: Double? = nil, max: Double? = nil, step: Double? = nil, mode: String? = nil, icon: String? = nil,
            options: [String]? = nil
        ) {
            self.name = name
            self.uniqueID = uniqueID
            self.commandTopic = commandTopic
            self.stateTopic = stateTopic
            self.payloadPress = payloadPress
            self.valueTemplate = valueTemplate
            self.jsonAttributesTopic = jsonAttributesTopic
            self.min = min
            self.max = max
            self.step = step
            self.mode = mode
            self.icon = icon
            self.options = options
        }

        enum CodingKeys: String, CodingKey {
            case name, min, max, step, mode, icon, device, options, availability
            case availabilityMode = "availability_mode"
            case uniqueID = "unique_id"
            case commandTopic = "command_topic"
            case stateTopic = "state_topic"
            case payloadPress = "payload_press"
            case valueTemplate = "value_template"
            case jsonAttributesTopic = "json_attributes_topic"
            case availabilityTopic = "availability_topic"
        }
    }

    /// One entry of HA's `availability` list: `online`/`offline` on `topic`, or what
    /// `value_template` makes of its payload.
    private struct Availability: Encodable {
        var topic: String
        var valueTemplate: String?

        enum CodingKeys: String, CodingKey {
            case topic
            case valueTemplate = "value_template"
        }
    }

    private struct Device: Encodable {
        var identifiers: [String]
        var name: String
        var model: String
        var manufacturer: String
    }
}
