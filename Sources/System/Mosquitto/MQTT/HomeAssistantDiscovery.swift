import FoundationEssentials

/// Builds Home Assistant MQTT discovery messages for one Baton speaker: a doorbell button, and per
/// zone a volume number and a state sensor, all tied to one HA device and to Baton's availability
/// topic. Publish each ``Message`` retained (QoS 1) on every connect; HA then creates the entities.
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

    /// - Throws: ``MQTTError/invalidConfiguration(field:reason:)`` naming a device or zone name that
    ///   cannot be part of a topic and an HA id.
    public init(
        device: String, name: String, zones: [String], prefix: String = "homeassistant",
        topicPrefix: String = "baton"
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

    /// Every discovery message: the doorbell button, then per zone its volume and state.
    public func messages() -> [Message] {
        [doorbellButton()] + zones.flatMap { [volumeNumber(zone: $0), stateSensor(zone: $0)] }
    }

    /// A `button` that publishes `{"sound":"doorbell"}` to `baton/<device>/announce`.
    public func doorbellButton() -> Message {
        message(
            component: "button", objectID: "doorbell",
            Entity(
                name: "Doorbell", uniqueID: "\(nodeID)_doorbell", commandTopic: "\(baseTopic)/announce",
                payloadPress: #"{"sound":"doorbell"}"#, icon: "mdi:doorbell"))
    }

    /// A `number` 0–100 for `zone`'s volume: commands to `…/zones/<zone>/volume/set`, state from
    /// `…/zones/<zone>/volume`.
    public func volumeNumber(zone: String) -> Message {
        let zoneTopic = "\(baseTopic)/zones/\(zone)"
        return message(
            component: "number", objectID: "\(zone)_volume",
            Entity(
                name: "\(zone) volume", uniqueID: "\(nodeID)_\(zone)_volume",
                commandTopic: "\(zoneTopic)/volume/set", stateTopic: "\(zoneTopic)/volume",
                min: 0, max: 100, step: 1, mode: "slider", icon: "mdi:volume-high"))
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
                icon: "mdi:speaker"))
    }

    private func message(component: String, objectID: String, _ entity: Entity) -> Message {
        var entity = entity
        entity.availabilityTopic = availabilityTopic
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
        var min: Int?
        var max: Int?
        var step: Int?
        var mode: String?
        var icon: String?
        var availabilityTopic: String?
        var device: Device?

        init(
            name: String, uniqueID: String, commandTopic: String? = nil, stateTopic: String? = nil,
            payloadPress: String? = nil, valueTemplate: String? = nil, jsonAttributesTopic: String? = nil,
            min: Int? = nil, max: Int? = nil, step: Int? = nil, mode: String? = nil, icon: String? = nil
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
        }

        enum CodingKeys: String, CodingKey {
            case name, min, max, step, mode, icon, device
            case uniqueID = "unique_id"
            case commandTopic = "command_topic"
            case stateTopic = "state_topic"
            case payloadPress = "payload_press"
            case valueTemplate = "value_template"
            case jsonAttributesTopic = "json_attributes_topic"
            case availabilityTopic = "availability_topic"
        }
    }

    private struct Device: Encodable {
        var identifiers: [String]
        var name: String
        var model: String
        var manufacturer: String
    }
}
