import BatonTesting
import Snapcast
import Testing

/// The planner that keeps a zone's speakers grouped on its stream: a pure function of the server's
/// status, so each case reads as "the server says this → Baton makes these calls".
@Suite(.ownThread) struct SnapcastZoneTests {
    typealias Client = ServerStatus.Client
    typealias Group = ServerStatus.Group

    func client(_ id: String, connected: Bool = true, latency: Int = 0, percent: Int = 100) -> Client {
        Client(
            id: id, connected: connected, config: .init(latency: latency, volume: .init(muted: false, percent: percent))
        )
    }

    let streams = [ServerStatus.Stream(id: "default", status: "idle"), .init(id: "upstairs", status: "playing")]
    let zone = SnapcastZone(stream: "upstairs", speakers: [.init(id: "bedroom-pi"), .init(id: "bath-pi")])

    /// Two speakers each alone in a group on another stream: the larger (first) group takes both
    /// and is switched to the zone's stream.
    @Test func groupsSpeakersOnTheZoneStream() {
        let status = ServerStatus(
            groups: [
                Group(id: "g1", streamID: "default", clients: [client("bedroom-pi")]),
                Group(id: "g2", streamID: "default", clients: [client("bath-pi")]),
            ],
            streams: streams)
        #expect(
            zone.plan(for: status).actions == [
                .setClients(group: "g1", clients: ["bedroom-pi", "bath-pi"]),
                .setStream(group: "g1", stream: "upstairs"),
            ])
    }

    /// A speaker playing alone in a group on the zone's stream, and two speakers of the zone that
    /// are off in a group on another stream: they join the playing one's group, which stays on
    /// its stream. The larger group was chosen, so the speaker playing was moved to the other
    /// stream, then back (two switches, a dropout; left there if the second call failed).
    @Test func keepsThePlayingSpeakersGroup() {
        let three = SnapcastZone(stream: "upstairs", speakers: [.init(id: "a"), .init(id: "b"), .init(id: "c")])
        let status = ServerStatus(
            groups: [
                Group(
                    id: "off", streamID: "default",
                    clients: [client("b", connected: false), client("c", connected: false)]),
                Group(id: "on", streamID: "upstairs", clients: [client("a")]),
            ],
            streams: streams)
        #expect(three.plan(for: status).actions == [.setClients(group: "on", clients: ["a", "b", "c"])])
    }

    /// Nothing to do when the group is right; a stranger in the group is moved out.
    @Test func keepsAGoodGroupAndEvictsStrangers() {
        let good = ServerStatus(
            groups: [Group(id: "g", streamID: "upstairs", clients: [client("bath-pi"), client("bedroom-pi")])],
            streams: streams)
        #expect(zone.plan(for: good) == SnapcastZone.Plan())
        let crowded = ServerStatus(
            groups: [
                Group(
                    id: "g", streamID: "upstairs",
                    clients: [client("bath-pi"), client("bedroom-pi"), client("kitchen-pi")])
            ],
            streams: streams)
        #expect(zone.plan(for: crowded).actions == [.setClients(group: "g", clients: ["bedroom-pi", "bath-pi"])])
    }

    /// On a tie the group already on the zone's stream is kept.
    @Test func prefersTheGroupOnTheStream() {
        let status = ServerStatus(
            groups: [
                Group(id: "a", streamID: "default", clients: [client("bedroom-pi")]),
                Group(id: "b", streamID: "upstairs", clients: [client("bath-pi")]),
            ],
            streams: streams)
        #expect(zone.plan(for: status).actions == [.setClients(group: "b", clients: ["bedroom-pi", "bath-pi"])])
    }

    /// A speaker the server never saw is reported and left out until it connects; an unknown stream
    /// is reported and nothing is changed.
    @Test func reportsWhatItCannotFix() {
        let one = ServerStatus(
            groups: [Group(id: "g", streamID: "upstairs", clients: [client("bedroom-pi")])], streams: streams)
        let plan = zone.plan(for: one)
        #expect(plan.actions.isEmpty)
        #expect(plan.problems == ["speaker \"bath-pi\" has never connected to the server"])
        let noStream = ServerStatus(groups: one.groups, streams: [.init(id: "default", status: "idle")])
        #expect(
            zone.plan(for: noStream).problems == [
                "stream \"upstairs\" is not configured on the server (streams: default)"
            ])
        #expect(zone.plan(for: noStream).actions.isEmpty)
    }

    /// Volume is set once per connection; latency is kept; disconnected speakers are left alone.
    @Test func setsVolumeOnceAndKeepsLatency() {
        let trimmed = SnapcastZone(
            stream: "upstairs",
            speakers: [
                .init(id: "bedroom-pi", volumePercent: 80, latencyMilliseconds: 20),
                .init(id: "bath-pi", volumePercent: 50),
            ])
        let status = ServerStatus(
            groups: [
                Group(
                    id: "g", streamID: "upstairs",
                    clients: [client("bedroom-pi", latency: 0), client("bath-pi", connected: false)])
            ],
            streams: streams)
        #expect(
            trimmed.plan(for: status).actions == [
                .setVolume(client: "bedroom-pi", percent: 80),
                .setLatency(client: "bedroom-pi", milliseconds: 20),
            ])
        #expect(
            trimmed.plan(for: status, volumesSet: ["bedroom-pi"]).actions == [
                .setLatency(client: "bedroom-pi", milliseconds: 20)
            ])
    }

    /// A stream the server reads in another format than Baton writes (a zone at 44.1 kHz, a source
    /// at 48 kHz: heard at the wrong speed and pitch) is a problem, said with the fix; the same
    /// format, or a server that does not say, is none.
    @Test func reportsAStreamReadInAnotherFormat() {
        let speaker = [client("bedroom-pi")]
        let groups = [Group(id: "g1", streamID: "upstairs", clients: speaker)]
        func plan(server: String?, zone: String) -> [String] {
            let status = ServerStatus(
                groups: groups, streams: [.init(id: "upstairs", status: "idle", sampleFormat: server)])
            return SnapcastZone(stream: "upstairs", speakers: [.init(id: "bedroom-pi")], sampleFormat: zone)
                .plan(for: status).problems
        }
        #expect(
            plan(server: "48000:16:2", zone: "44100:16:2") == [
                "stream \"upstairs\" reads sampleformat 48000:16:2 but Baton writes 44100:16:2: set sampleformat=44100:16:2 on its source in snapserver.conf (or the zone's rate and channels to match)"
            ])
        #expect(plan(server: "48000:16:2", zone: "48000:16:2") == [])
        #expect(plan(server: nil, zone: "44100:16:2") == [])
    }
}
