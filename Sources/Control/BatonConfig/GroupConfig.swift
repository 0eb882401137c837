/// A named set of zones (`groups.<name>: [zone, …]` in the file), usable wherever zones are named.
///
/// Group names follow the zone name rule, differ from every zone name and from `all`, which always
/// means every zone. A group lists zones only (not other groups), at least one, each once.
public struct GroupConfig: Sendable, Equatable {
    /// The group's name: `[a-z0-9_-]+`.
    public var name: String
    /// Its zones, as listed in the file.
    public var zones: [String]

    /// Creates a group.
    public init(name: String, zones: [String]) {
        self.name = name
        self.zones = zones
    }

    /// The name that means every zone; no zone or group may use it.
    public static let all = "all"
}

/// A name given to ``BatonConfiguration/expand(_:)`` that is neither a zone, a group nor `all`.
public struct UnknownZoneError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The unknown name.
    public var name: String
    /// The zones, in file order.
    public var zones: [String]
    /// The groups, in file order.
    public var groups: [String]

    /// Creates the error.
    public init(name: String, zones: [String], groups: [String]) {
        self.name = name
        self.zones = zones
        self.groups = groups
    }

    /// `unknown zone or group "patoi"; did you mean "patio"? (zones: kitchen, patio; groups: outside; all: every zone)`.
    public var description: String {
        var text = "unknown zone or group \(ConfigSyntax.quoted(name))"
        if let suggestion = EditDistance.suggestion(for: name, among: zones + groups + [GroupConfig.all]) {
            text += "; did you mean \(ConfigSyntax.quoted(suggestion))?"
        }
        let groupList = groups.isEmpty ? "none" : groups.joined(separator: ", ")
        return text + " (zones: \(zones.joined(separator: ", ")); groups: \(groupList); all: every zone)"
    }
}

extension BatonConfiguration {
    /// The group named `name`, if there is one.
    public func group(named name: String) -> GroupConfig? {
        groups.first { $0.name == name }
    }

    /// The zones meant by `names`, each a zone, a group or `all`: in file order, each once.
    ///
    /// `[]` gives `[]`. For a loaded configuration `music.zones` always expands without error.
    /// - Throws: ``UnknownZoneError`` for the first name that is none of these.
    public func expand(_ names: [String]) throws(UnknownZoneError) -> [String] {
        var wanted = Set<String>()
        for name in names {
            if name == GroupConfig.all {
                wanted.formUnion(zones.map(\.name))
            } else if zone(named: name) != nil {
                wanted.insert(name)
            } else if let group = group(named: name) {
                wanted.formUnion(group.zones)
            } else {
                throw UnknownZoneError(name: name, zones: zones.map(\.name), groups: groups.map(\.name))
            }
        }
        return zones.map(\.name).filter { wanted.contains($0) }
    }
}
