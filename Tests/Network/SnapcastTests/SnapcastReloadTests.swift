import BatonConfig
import BatonTesting
import Synchronization
import Testing

@testable import BatonDaemon
@testable import ControlParts

/// Reloads of a Snapcast zone, with a bare TCP listener as snapserver's source and a stand-in for
/// its JSON-RPC.
@Suite(.ownThread) struct SnapcastReloadTests {
    /// A reload that changes only one speaker's latency leaves the zone's stream alone: the zone is
    /// unchanged, its output the same, its connection to the source the first one, and the tone it
    /// plays goes on; the zone's new keeper sets the latency. The whole zone was compared: the
    /// stream was closed and reopened, and what played there ended as vanished.
    @Test func aSpeakersNewLatencyLeavesTheStreamPlaying() throws {
        let tap = try SourceTap()
        defer { tap.stop() }
        let latencies = Mutex<[String]>([])
        let fake = try SnapcastOutageTests.twoSpeakerControl { text in
            if text.contains("Client.SetLatency") { latencies.withLock { $0.append(text) } }
        }
        defer { fake.stop() }
        func snapcast(pi2Latency: Duration?) -> SnapcastConfig {
            SnapcastConfig(
                source: .tcp(host: "127.0.0.1", port: tap.port), control: "http://127.0.0.1:\(fake.port)",
                stream: "upstairs",
                clients: [SnapcastConfig.Client(id: "pi1"), SnapcastConfig.Client(id: "pi2", latency: pi2Latency)],
                buffer: .milliseconds(300))
        }
        let daemon = SnapcastOutageTests.daemon(
            snapcast(pi2Latency: nil), name: "reload-latency", sounds: SnapcastOutageTests.toneAndBell)
        defer { daemon.stop() }
        let device = try #require(daemon.output("upstairs")?.device)
        try #require(waitUntil(seconds: 10) { device.snapshot().available }, "the zone never carried audio")
        let music = try daemon.announcer.playMusic(sound: "tone", zones: ["upstairs"], loop: true).id
        func state() -> String? { daemon.status().sources.first { $0.id == music }?.state }
        try #require(waitUntil(seconds: 5) { tap.level(440) > 0.1 }, "the tone never reached the source")
        try #require(waitUntil(seconds: 5) { state() == "playing" }, "\(state() ?? "gone")")

        var config = daemon.config
        config.zones[0].snapcast = snapcast(pi2Latency: .milliseconds(20))
        let report = daemon.apply(config)
        #expect(report.zonesUnchanged == ["upstairs"] && report.zonesChanged.isEmpty, "\(report)")
        #expect(daemon.output("upstairs")?.device === device)
        #expect(
            waitUntil(seconds: 5) { latencies.withLock { $0.contains { $0.contains(#""latency":20"#) } } },
            "pi2's latency was not set: \(latencies.withLock { $0 })")
        #expect(tap.accepted == 1 && device.snapshot().reopens == 0, "\(tap.accepted) connections")
        #expect(tap.level(440) > 0.1, "the tone is no longer heard")
        #expect(state() == "playing")
    }

    /// A reload that writes the zone's control URL another way (`localhost` for 127.0.0.1: the same
    /// server) leaves the speakers' volumes as a listener set them: the zone's stream is kept and its
    /// new keeper takes the volumes the old one set as set. The volumes were carried only when the
    /// URL's text was the same, so the new keeper set every speaker's volume again.
    @Test func aControlURLWrittenAnotherWayDoesNotUndoAListenersVolume() throws {
        let tap = try SourceTap()
        defer { tap.stop() }
        let calls = Mutex<(volumes: [String], polls: Int)>(([], 0))
        let fake = try SnapcastOutageTests.twoSpeakerControl { text in
            if text.contains("Client.SetVolume") { calls.withLock { $0.volumes.append(text) } }
            if text.contains("Server.GetStatus") { calls.withLock { $0.polls += 1 } }
        }
        defer { fake.stop() }
        func snapcast(host: String) -> SnapcastConfig {
            SnapcastConfig(
                source: .tcp(host: "127.0.0.1", port: tap.port), control: "http://\(host):\(fake.port)",
                stream: "upstairs", clients: [SnapcastConfig.Client(id: "pi1", volume: 0.5)],
                buffer: .milliseconds(300))
        }
        let daemon = SnapcastOutageTests.daemon(snapcast(host: "127.0.0.1"), name: "reload-control")
        defer { daemon.stop() }
        try #require(
            waitUntil(seconds: 10) { calls.withLock { $0.volumes.count } == 1 }, "pi1's volume was never set")
        #expect(calls.withLock { $0.volumes.first?.contains(#""percent":50"#) } == true)
        // That poll over (the keeper holds pi1 as set once it is): the next one began.
        let setAt = calls.withLock { $0.polls }
        try #require(waitUntil(seconds: 5) { calls.withLock { $0.polls } > setAt }, "no poll after the volume's")

        var config = daemon.config
        config.zones[0].snapcast = snapcast(host: "localhost")
        let report = daemon.apply(config)
        #expect(report.zonesUnchanged == ["upstairs"] && report.zonesChanged.isEmpty, "\(report)")
        // The new keeper polls at once, then every 2 s.
        let polls = calls.withLock { $0.polls }
        #expect(waitUntil(seconds: 10) { calls.withLock { $0.polls } >= polls + 2 }, "the new keeper polled")
        #expect(calls.withLock { $0.volumes.count } == 1, "set again: \(calls.withLock { $0.volumes })")
    }
}
