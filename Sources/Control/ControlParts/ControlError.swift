/// Why the control plane refused or could not carry out an operation. Transports decide how to
/// say it: the HTTP API maps each kind to a status code, the MQTT bridge publishes it on `errors`.
public struct ControlError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable, Equatable, CaseIterable {
        /// The request itself is wrong: a missing or malformed field, a value out of range.
        case badRequest
        /// A zone or group that the configuration does not have.
        case unknownZone
        /// A sound that is not in the sounds directory.
        case unknownSound
        /// Something else the request names does not exist (a source, an album, a track, a call).
        case notFound
        /// The request conflicts with what is configured or going on (no music server, the policy
        /// rejected it, already at the last track).
        case conflict
        /// The input was understood but cannot be played (a broken sound file, speech failing).
        case unprocessable
        /// What the request needs is not available now (no zone can play, a missing program).
        case unavailable
        /// A server Baton depends on failed (the Subsonic server, a mixer control).
        case upstreamFailure
        /// Baton's own settings do not allow it (an unusable broker URL, an unreadable secret).
        case misconfigured
        /// The configuration forbids what the request asks for (a URL host not in
        /// `announce.allow-url-hosts`); the message names the key that would allow it.
        case forbidden
    }

    public var kind: Kind
    public var message: String
    public var description: String { message }

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }
}

/// What happened to a play request.
public enum Outcome: Sendable, Equatable {
    case playing
    case queued
    case coalesced(into: String)
    /// A source there already (the running call `call/start` found), granted but not heard now.
    case interrupted, paused
}

/// The answer to a play request: the new source's id, its outcome, and the zones skipped because
/// they were unavailable.
public struct Admission: Sendable, Equatable {
    public var id: String
    public var outcome: Outcome
    public var skipped: [String]

    package init(id: String, outcome: Outcome, skipped: [String]) {
        self.id = id
        self.outcome = outcome
        self.skipped = skipped
    }
}
