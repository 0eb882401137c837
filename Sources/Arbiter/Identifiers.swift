/// The identity of one audio source known to the arbiter: a music player, one announcement, one call.
///
/// The daemon chooses the string; the arbiter only compares it. A new announcement should get a new id
/// (for example `announcement-42`); a long-lived player keeps its id across requests.
public struct SourceID: Hashable, Comparable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
    /// The daemon's name for the source.
    public var rawValue: String

    /// Creates a source id from the daemon's name for it.
    public init(_ rawValue: String) { self.rawValue = rawValue }

    /// Creates a source id from a literal, as tests and examples write it.
    public init(stringLiteral value: String) { self.rawValue = value }

    /// In the order the daemon made them: its ids end in one counter (`music-9` before
    /// `music-10`, which as text come the other way round: the newest music was then an older one).
    /// Ids without a counter come first, as text; those with the same counter, as text (a strict
    /// weak order whatever the mix).
    public static func < (lhs: SourceID, rhs: SourceID) -> Bool {
        let (l, r) = (lhs.counter, rhs.counter)
        if (l == nil) != (r == nil) { return l == nil }
        if let l, let r, l != r { return l < r }
        return lhs.rawValue < rhs.rawValue
    }

    /// The number after the id's last `-`, if it ends in one.
    private var counter: Int? {
        guard let dash = rawValue.lastIndex(of: "-") else { return nil }
        return Int(rawValue[rawValue.index(after: dash)...])
    }

    public var description: String { rawValue }
}

/// One output of the speaker (an ALSA device or some of its channels), arbitrated on its own.
public struct ZoneID: Hashable, Comparable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
    /// The zone's name from the configuration.
    public var rawValue: String

    /// Creates a zone id from its configured name.
    public init(_ rawValue: String) { self.rawValue = rawValue }

    /// Creates a zone id from a literal, as tests and examples write it.
    public init(stringLiteral value: String) { self.rawValue = value }

    public static func < (lhs: ZoneID, rhs: ZoneID) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String { rawValue }
}

/// The class a source belongs to (`music`, `announcement`, `call`, or one declared in the configuration).
///
/// The class decides the source's priority and how it treats other sources; see ``ClassPolicy``.
public struct SourceClass: Hashable, Comparable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
    /// The class name as written in the configuration.
    public var rawValue: String

    /// Creates a class from its configured name.
    public init(_ rawValue: String) { self.rawValue = rawValue }

    /// Creates a class from a literal, as tests and examples write it.
    public init(stringLiteral value: String) { self.rawValue = value }

    public static func < (lhs: SourceClass, rhs: SourceClass) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String { rawValue }

    /// Music and other long-running, user-started playback.
    public static let music: SourceClass = "music"
    /// Doorbell chimes, spoken text, alarms.
    public static let announcement: SourceClass = "announcement"
    /// Door intercom audio.
    public static let call: SourceClass = "call"
}
