import YAML

extension ConfigReader {
    /// `groups:`: each a name (not a zone's, not `all`) and a non-empty list of distinct zones.
    mutating func groups(in top: Fields, zoneNames: [String]) -> [GroupConfig] {
        let path = ConfigPath.root.appending("groups")
        guard let pair = top.values["groups"], let entries = namedEntries(of: pair.value, at: path) else { return [] }
        let groupNames = entries.map(\.key)
        var groups: [GroupConfig] = []
        for entry in entries {
            let groupPath = path.appending(entry.key)
            if !ZoneConfig.isValidName(entry.key) {
                report(
                    entry.keyMark, groupPath,
                    "group name \(ConfigSyntax.quoted(entry.key)) must match [a-z0-9_-]+ (it appears in URLs and MQTT topics)"
                )
            } else if entry.key == GroupConfig.all {
                report(entry.keyMark, groupPath, "\"all\" is reserved: it always means every zone")
            } else if zoneNames.contains(entry.key) {
                report(entry.keyMark, groupPath, "group name \(ConfigSyntax.quoted(entry.key)) is already a zone name")
            }
            if entry.value.isNull {
                report(entry.value.mark, groupPath, "a group needs at least one zone")
                continue
            }
            guard let nodes = items(of: entry, at: groupPath) else { continue }
            if nodes.isEmpty { report(entry.value.mark, groupPath, "a group needs at least one zone") }
            var members: [String] = []
            for node in nodes {
                guard let name = convert(node, at: groupPath, .string) else { continue }
                if members.contains(name) {
                    report(node.mark, groupPath, "zone \(ConfigSyntax.quoted(name)) is listed twice")
                } else if zoneNames.contains(name) {
                    members.append(name)
                } else if name == GroupConfig.all || groupNames.contains(name) {
                    report(node.mark, groupPath, "\(ConfigSyntax.quoted(name)) is not a zone: a group lists zones only")
                } else {
                    report(node.mark, groupPath, Self.unknownName(name, "zone", among: zoneNames))
                }
            }
            groups.append(GroupConfig(name: entry.key, zones: members))
        }
        return groups
    }

    /// `unknown zone "patoi"; did you mean "patio"?`, or with the valid names when none is close —
    /// the first `namesListed` of them, and how many more: every name was listed in every such
    /// message, and a file of 20,000 zone names and as many unknown ones (half a megabyte) made
    /// gigabytes of messages at a reload.
    static func unknownName(_ name: String, _ what: String, among names: [String]) -> String {
        if let suggestion = EditDistance.suggestion(for: name, among: names) {
            return "unknown \(what) \(ConfigSyntax.quoted(name)); did you mean \(ConfigSyntax.quoted(suggestion))?"
        }
        var listed = names.prefix(namesListed).map { ConfigSyntax.shortened($0) }.joined(separator: ", ")
        if names.count > namesListed { listed += ", … and \(names.count - namesListed) more" }
        return "unknown \(what) \(ConfigSyntax.quoted(name)) (expected one of: \(listed))"
    }

    /// The most valid names an unknown name's message lists.
    static let namesListed = 10
}
