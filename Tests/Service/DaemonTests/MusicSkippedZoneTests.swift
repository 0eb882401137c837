import BatonTesting
import Testing

@testable import BatonDaemon
@testable import BatonService
@testable import ControlParts

/// Server music on a zone whose PCM cannot be opened: the answer names the zone skipped, as a
/// local sound's does. `music/play` and `music/resume` of the saved queue built their answers
/// by hand, without `skipped`: the zone was left out without a word.
extension MusicQueueTests {
    /// `music/play` from the server on every zone, the garage's PCM missing: it plays on the
    /// kitchen and its answer says `"skipped": "garage"`.
    @Test func serverMusicSaysWhichZonesItSkipped() throws {
        let t = try TestDaemon(
            zones: [("kitchen", 44_100, nil), ("garage", 48_000, ALSATestRig.missingPCM)],
            music: try TestSubsonic.music())
        defer { t.stop() }
        let song = try steps(t)
        let r = try t.json("POST", "/api/v1/music/play", #"{"songs": ["\#(song)"]}"#)
        #expect(r.status == 202, "\(r.object)")
        #expect(r.object["status"] == "playing", "\(r.object)")
        #expect(r.object["skipped"] == "garage", "\(r.object)")
        let id = try #require(r.object["id"])
        #expect(waitUntil(seconds: 15) { position(t, id) > 0.2 }, "it plays on the kitchen")
    }

    /// A queue saved while it played on the kitchen and the garage, resumed after a restart with
    /// the garage's PCM gone: `music/resume` plays it on the kitchen and says the garage was
    /// skipped.
    @Test func resumedQueueSaysWhichZonesItSkipped() throws {
        let dir = TestDirectory.make("state")
        let first = try TestDaemon(
            zones: [("kitchen", 44_100, nil), ("garage", 48_000, nil)], music: try TestSubsonic.music(),
            stateDir: dir)
        let song = try steps(first)
        let played = try first.json(
            "POST", "/api/v1/music/play", #"{"songs": ["\#(song)"], "zones": ["kitchen", "garage"]}"#)
        let id = try #require(played.object["id"], "\(played.object)")
        #expect(waitUntil(seconds: 15) { position(first, id) > 0.2 })
        first.stop()

        let second = try TestDaemon(
            zones: [("kitchen", 44_100, nil), ("garage", 48_000, ALSATestRig.missingPCM)],
            music: try TestSubsonic.music(), stateDir: dir)
        defer { second.stop() }
        #expect(try second.status().savedQueue?.zones == ["kitchen", "garage"])
        let resumed = try second.json("POST", "/api/v1/music/resume")
        #expect(resumed.status == 202, "\(resumed.object)")
        #expect(resumed.object["command"] == "play", "\(resumed.object)")
        #expect(resumed.object["skipped"] == "garage", "\(resumed.object)")
        let again = try #require(resumed.object["id"])
        #expect(waitUntil(seconds: 15) { position(second, again) > 0.2 }, "it plays on the kitchen")
    }
}
