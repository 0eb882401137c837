/// Every kind of event the daemon publishes (an event's `type`, and the `event:` line of the SSE
/// stream): the one list the publishers, the web app's listeners (`WebApp`) and docs/API.md's table
/// are checked against. A browser's `EventSource` hands a named event only to a listener for that
/// name, so a type missing from the page's list is never seen there.
public enum EventType: String, CaseIterable, Sendable {
    // The arbiter's effects.
    case granted, queued, rejected, coalesced, expired, finished, muted, unmuted
    case lostForGood = "lost-for-good"
    case interruptionBegan = "interruption-began"
    case interruptionEnded = "interruption-ended"
    case duckBegan = "duck-began"
    case duckEnded = "duck-ended"
    // What the audio says.
    case audible, buffering, played
    case silentWhilePlaying = "silent-while-playing"
    case soundReturned = "sound-returned"
    // Zones.
    case volume
    case zoneAvailable = "zone-available"
    case zoneUnavailable = "zone-unavailable"
    case holdEnded = "hold-ended"
    case volumeControl = "volume-control"
    case renderAheadOff = "render-ahead-off"
    // Server music.
    case track, scrobbled
    case streamError = "stream-error"
    // The daemon, its state and config.
    case stateError = "state-error"
    case reloaded
    case reloadRejected = "reload-rejected"
    // Triggers, calls and external players.
    case call
    case intercomError = "intercom-error"
    case mqttConnected = "mqtt-connected"
    case mqttError = "mqtt-error"
    case gpioError = "gpio-error"
    case external
    case externalError = "external-error"
    case controlError = "control-error"
}
