import BatonConfig

/// What a reload did.
public struct ReloadReport: Codable, Sendable, Equatable {
    /// True when the new configuration was applied.
    public var applied: Bool
    /// The problems that kept an invalid configuration from being applied (one per line).
    public var errors: [String]
    public var zonesAdded: [String] = []
    public var zonesRemoved: [String] = []
    /// Zones whose settings changed (their device was reopened; what played there stopped).
    public var zonesChanged: [String] = []
    /// Zones left untouched: their audio never stopped.
    public var zonesUnchanged: [String] = []
    /// External sources removed or whose settings changed: a program playing through one was
    /// stopped (it is told why); its next open is refused or gets the new settings.
    public var externalSourcesChanged: [String] = []
    public var policyChanged = false
    public var soundsChanged = false
    /// The top-level sections of the file whose settings differ from the ones running (`groups`,
    /// `speech`, `music`…), in file-format order: those applied and those in `needsRestart`. A
    /// change with no field of its own (a group, the music server) is said here, not left out.
    public var sectionsChanged: [String] = []
    /// The sections of `sectionsChanged` with a change this reload applied, in the same order. A
    /// section whose only change waits for a restart (`api`; `external-sources` whose `socket`
    /// alone changed; `intercom` added or removed: `needsRestart`) is not here: the web app said "settings applied:
    /// external-sources" beside "needs a restart: external-sources.socket".
    public var sectionsApplied: [String] = []
    /// Settings that only take effect after a restart (e.g. `api.listen`).
    public var needsRestart: [String] = []
    /// What the loader said of the new file (`BatonConfiguration.warnings`: a value taken otherwise
    /// than written, at its line; a class batond asks for that it leaves out, whose requests are
    /// refused): applied all the same.
    public var warnings: [String] = []

    package init(applied: Bool, errors: [String]) {
        self.applied = applied
        self.errors = errors
    }

    /// A reload that was refused, with why.
    package static func refused(_ errors: [String]) -> ReloadReport { ReloadReport(applied: false, errors: errors) }

    /// What applying `new` over `old` does, when the devices of `stopping` zones are stopped.
    package init(from old: BatonConfiguration, to new: BatonConfiguration, zones: [String], stopping: Set<String>) {
        let names = new.zones.map(\.name)
        let known = Set(zones)
        self.init(applied: true, errors: [])
        zonesAdded = names.filter { !known.contains($0) }
        zonesRemoved = zones.filter { !names.contains($0) }
        zonesChanged = names.filter { known.contains($0) && stopping.contains($0) }
        zonesUnchanged = names.filter { known.contains($0) && !stopping.contains($0) }
        let newExternal = new.externalSources?.sources ?? []
        externalSourcesChanged = (old.externalSources?.sources ?? []).filter { !newExternal.contains($0) }.map(\.name)
        policyChanged = old.policy != new.policy
        soundsChanged = old.sounds != new.sounds || old.resampler != new.resampler
        // What the daemon sets up once, at start: a change to it is not applied by a reload.
        let once: [(String, Bool)] = [
            ("api", old.api != new.api),
            ("mqtt", old.mqtt != new.mqtt),
            ("device", old.device != new.device && (old.mqtt != nil || new.mqtt != nil)),
            ("gpio", old.gpio != new.gpio),
            // Its zones follow a reload (calls take them from the configuration as it is now).
            ("intercom", Self.receiverSettings(old.intercom) != Self.receiverSettings(new.intercom)),
            ("external-sources.socket", old.externalSources?.socket != new.externalSources?.socket),
            ("state-dir", old.stateDir != new.stateDir),
            ("alsa-config", old.alsaConfig != new.alsaConfig),
            // Made and put in BATON_OUTPUT_DIR at start: file PCMs reopened by a reload still
            // wrote into the old one, the new one never made, and the reload said nothing.
            ("output-dir", old.outputDir != new.outputDir),
        ]
        needsRestart = once.filter(\.1).map(\.0)
        let sections: [(String, Bool)] = [
            ("api", old.api != new.api),
            ("zones", old.zones != new.zones),
            ("groups", old.groups != new.groups),
            ("board", old.board != new.board),
            ("boards-dir", old.boardsDir != new.boardsDir),
            ("sounds", old.sounds != new.sounds),
            ("resampler", old.resampler != new.resampler),
            ("policy", old.policy != new.policy),
            ("music", old.music != new.music),
            ("speech", old.speech != new.speech),
            ("announce", old.announce != new.announce),
            ("device", old.device != new.device),
            ("mqtt", old.mqtt != new.mqtt),
            ("gpio", old.gpio != new.gpio),
            ("intercom", old.intercom != new.intercom),
            ("external-sources", old.externalSources != new.externalSources),
            ("silence-alarm", old.silenceAlarm != new.silenceAlarm),
            ("state-dir", old.stateDir != new.stateDir),
            ("alsa-config", old.alsaConfig != new.alsaConfig),
            ("output-dir", old.outputDir != new.outputDir),
        ]
        sectionsChanged = sections.filter(\.1).map(\.0)
        // What of a changed section a reload applies (`Daemon.running` keeps the rest as it runs).
        // The intercom's zones only while a receiver runs and the section stays: one added or
        // removed keeps running as it was (none, or the one started with) until a restart, and
        // both were said applied. The external sources' sources, not their socket: a section
        // added with only a socket set none up and was said applied (`externalSocketSetUp` says
        // the socket a reload does set up).
        let intercomZones = old.intercom.flatMap { o in new.intercom.map { n in o.zones != n.zones } } ?? false
        let applied: [String: Bool] = [
            "api": false, "mqtt": false, "gpio": false, "state-dir": false, "alsa-config": false, "output-dir": false,
            "device": old.mqtt == nil && new.mqtt == nil,
            "intercom": intercomZones,
            "external-sources": (old.externalSources?.sources ?? []) != (new.externalSources?.sources ?? []),
        ]
        sectionsApplied = sectionsChanged.filter { applied[$0] ?? true }
        warnings = new.warnings
    }

    /// The external sources' socket was set up by this reload (there was none): it is no longer
    /// waiting for a restart, and its section is applied.
    package mutating func externalSocketSetUp() {
        needsRestart.removeAll { $0 == "external-sources.socket" }
        if sectionsChanged.contains("external-sources"), !sectionsApplied.contains("external-sources") {
            sectionsApplied = sectionsChanged.filter { $0 == "external-sources" || sectionsApplied.contains($0) }
        }
    }

    /// `intercom:` without its zones: what the receiver was set up with.
    private static func receiverSettings(_ intercom: IntercomConfig?) -> IntercomConfig? {
        intercom.map { i in
            var settings = i
            settings.zones = []
            return settings
        }
    }
}
