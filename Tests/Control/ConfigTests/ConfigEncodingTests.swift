import BatonConfig
import BatonTesting
import FoundationEssentials
import Testing

@Suite(.ownThread) struct ConfigEncodingTests {
    /// The effective configuration encodes with the YAML key names and the file's text forms.
    @Test func encodesWithYAMLKeyNames() throws {
        let configuration = try load(
            """
            zones:
              kitchen: {pcm: baton_kitchen, rate: 44100, clock: system}
            sounds: /srv/sounds
            policy:
              classes:
                music: {priority: 10, kind: permanent, resume-within: 5m}
                announcement: {priority: 50, kind: transient}
                call: {priority: 90, kind: transient, same: reject}
            """)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let json = String(decoding: try encoder.encode(configuration), as: UTF8.self)
        #expect(
            json == """
                {"announce":{"allow-url-hosts":[],"first-byte-timeout":"10s","max-bytes":"16MiB","max-duration":"5m"},\
                "api":{"listen":"127.0.0.1:8470","max-body":"64KiB"},"device":"baton",\
                "policy":{"classes":{"announcement":{"during-higher":"queue","kind":"transient","lower":"interrupt",\
                "priority":50,"same":"queue"},"call":{"during-higher":"queue","kind":"transient","lower":"interrupt",\
                "priority":90,"same":"reject"},"music":{"during-higher":"queue","kind":"permanent","lower":"interrupt",\
                "priority":10,"resume-within":"5m","same":"queue"}},\
                "duck":{"attack":"50ms","level":"-15dB","release":"300ms"}},\
                "resampler":{"announcements":"soxr-hq","music":"soxr-hq"},"silence-alarm":"2s",\
                "sounds":"/srv/sounds",\
                "speech":{"command":"espeak-ng","max-length":500,"speed":160,"voice":"en"},\
                "zones":{"kitchen":{"buffer":"40ms","channels":2,"clock":"system","format":"S16_LE","max-volume":"100%",\
                "pcm":"baton_kitchen","period":"10ms","rate":44100,"resampler":"auto"}}}
                """)
    }

    /// `api.connections-per-client` is read (default 16) and shown when it is not the default.
    @Test func connectionsPerClientIsReadAndShown() throws {
        let zones = "zones:\n  kitchen: {pcm: baton_kitchen, rate: 44100, clock: system}\n"
        let plain = try BatonConfiguration.parse(text: zones, file: "a.yaml", baseDirectory: "")
        #expect(plain.api.connectionsPerClient == 16)
        let raised = try BatonConfiguration.parse(
            text: "api:\n  connections-per-client: 40\n" + zones, file: "b.yaml", baseDirectory: "")
        #expect(raised.api.connectionsPerClient == 40)
        let json = String(decoding: try JSONEncoder().encode(raised.api), as: UTF8.self)
        #expect(json.contains(#""connections-per-client":40"#), "\(json)")
    }

    /// The JSON of every shipped configuration parses back, as YAML, to an equal configuration (up to
    /// the order of zones and classes, which JSON objects do not keep).
    @Test(arguments: [
        "config/baton.yaml", "config/examples/pi-hifiberry.yaml", "config/examples/shared-amp.yaml",
        "config/examples/external-players.yaml",
    ])
    func roundTripsThroughJSON(file: String) throws {
        let configuration = try BatonConfiguration.load(path: repositoryRoot + "/" + file)
        let json = String(decoding: try JSONEncoder().encode(configuration), as: UTF8.self)
        let reread = try BatonConfiguration.parse(text: json, file: "effective.json", baseDirectory: "")
        #expect(sortedByName(reread) == sortedByName(configuration))
    }
}

/// The configuration with zones and classes in name order.
private func sortedByName(_ configuration: BatonConfiguration) -> BatonConfiguration {
    var sorted = configuration
    sorted.zones.sort { $0.name < $1.name }
    sorted.policy.classes.sort { $0.name < $1.name }
    sorted.groups.sort { $0.name < $1.name }
    sorted.externalSources?.sources.sort { $0.name < $1.name }
    return sorted
}
