/// One thing that happened, as the API's event stream and the status timeline show it.
/// A plain value; any thread.
public struct Event: Codable, Sendable, Equatable {
    /// Increases by one per event since the daemon started.
    public var seq: Int
    /// Wall-clock time, ISO 8601 with milliseconds (UTC).
    public var time: String
    /// Milliseconds since the daemon started (monotonic), for ordering and timelines.
    public var uptimeMs: Int
    /// An ``EventType``'s raw value (docs/API.md has them all).
    public var type: String
    public var source: String?
    public var zones: [String]?
    /// The arbiter's reason or the engine's message.
    public var reason: String?
    /// Only on `interruption-ended`.
    public var shouldResume: Bool?
    /// Duck level in dB (`duck-began`).
    public var level: Double?
    /// For `coalesced`: the request it was merged into.
    public var into: String?
    /// For each zone involved: the zone's frame counter when the event happened. Audio rendered
    /// after the event starts at this frame, so an effect is heard from here on (plus its ramp).
    public var zoneFrames: [String: Int]?
}
