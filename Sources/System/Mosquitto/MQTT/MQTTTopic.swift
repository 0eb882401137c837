import CMosquitto

/// MQTT topic rules, checked by libmosquitto's own functions so we refuse exactly what it would.
public enum MQTTTopic {
    /// Checks a topic to publish to: not empty, valid UTF-8, no `+` or `#`.
    /// The corresponding C function is `mosquitto_pub_topic_check`.
    /// Thread: any.
    public static func checkName(_ topic: String) throws(MQTTError) {
        guard !topic.isEmpty else { throw .invalidTopic(topic: topic, reason: "is empty") }
        guard topic.utf8.count <= 65535 else { throw .invalidTopic(topic: topic, reason: "is longer than 65535 bytes") }
        if mosquitto_pub_topic_check(topic) != MOSQ_ERR_SUCCESS.rawValue {
            throw .invalidTopic(topic: topic, reason: "a topic to publish to cannot contain the wildcards + or #")
        }
    }

    /// Checks a subscription filter: not empty; `+` only as a whole level; `#` only as the whole last level.
    /// The corresponding C function is `mosquitto_sub_topic_check`.
    /// Thread: any.
    public static func checkFilter(_ filter: String) throws(MQTTError) {
        guard !filter.isEmpty else { throw .invalidTopic(topic: filter, reason: "is empty") }
        guard filter.utf8.count <= 65535 else {
            throw .invalidTopic(topic: filter, reason: "is longer than 65535 bytes")
        }
        if mosquitto_sub_topic_check(filter) != MOSQ_ERR_SUCCESS.rawValue {
            throw .invalidTopic(
                topic: filter, reason: "+ must be a whole level and # the whole last level (a/+/c, a/#)")
        }
    }
}
