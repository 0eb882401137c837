import BatonConfig
import BatonTesting
import FoundationEssentials
import Glibc
import OSThread
import Testing

@testable import BatonDaemon
@testable import BatonService
@testable import ControlParts

/// Ducking and per-zone muting, checked on the zones' output files.
@Suite(.serialized, .ownThread) struct DuckAndMuteTests {
    let period = 441, ramp = 441

    func level(_ s: [Float], _ at: Int, _ hz: Double, rate: Int = 44_100) -> Double {
        guard at >= 0, at + 441 <= s.count else { return -1 }
        return Signals.windowedToneLevel(s[at..<(at + 441)], frequency: hz, rate: rate)
    }

    /// With `lower: duck`, a doorbell ducks the music by the configured level within one period plus
    /// the attack; the music stays `ducked` (playing, never interrupted) and returns to full level
    /// within one period plus the release.
    @Test func doorbellDucksMusic() throws {
        var policy = PolicyConfig.default
        policy.classes[1].lower = .duck
        policy.duck = DuckConfig(level: -15, attack: .milliseconds(50), release: .milliseconds(100))
        let t = try TestDaemon(policy: policy)
        let music = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"sound": "music440", "zones": ["kitchen"], "loop": true}"#)
                .object["id"])
        #expect(waitUntil { (try? t.status().sources.first?.positionSeconds ?? 0) ?? 0 > 0.2 })
        let bell = try #require(
            try t.json("POST", "/api/v1/announce", #"{"sound": "bell2s", "zones": ["kitchen"]}"#).object["id"])
        let duck = try #require(t.waitForEvent("duck-began", source: music))
        #expect(duck.level == -15)
        let during = try t.status()
        #expect(during.sources.first { $0.id == music }?.state == "ducked")
        #expect(during.zones[0].ducked.first?.source == music)
        // Both heard, the doorbell first (the stronger, though the music came first): what the zone
        // is said to play (MQTT's zone state, the now-playing sensor) is the doorbell. (Once it is
        // released its last frames come first anyway: only looks while it is a source count.)
        var both: [[String]] = []
        _ = waitUntil(seconds: 5) {
            guard let st = try? t.status() else { return false }
            let bellPlays = st.sources.contains { $0.id == bell }
            if bellPlays && st.zones[0].audible.count == 2 { both.append(st.zones[0].audible) }
            return !bellPlays
        }
        #expect(!both.isEmpty && both.allSatisfy { $0 == [bell, music] }, "\(both.count) looks: \(Set(both))")
        let unduck = try #require(t.waitForEvent("duck-ended", source: music))
        usleep(300_000)
        t.stop()
        #expect(
            !t.daemon.events.recent().contains { $0.type.hasPrefix("interruption") && $0.source == music },
            "a ducked source is never interrupted")

        let out = t.left("kitchen")
        let d = try #require(duck.zoneFrames?["kitchen"])
        let u = try #require(unduck.zoneFrames?["kitchen"])
        let expected = 0.5 * 0.17783  // -15 dB
        #expect(level(out, d - 882, 440) > 0.45)
        let ducked = level(out, d + period + 2_205, 440)  // attack: 50 ms = 2205 frames
        #expect(abs(ducked - expected) < 0.01, "ducked level \(ducked), expected \(expected)")
        #expect(level(out, d + period + 2_205, 1000) > 0.45, "the doorbell plays over it")
        #expect(level(out, u + period + 4_410, 440) > 0.45, "full level after the release (100 ms)")
    }

    /// Music on two zones, a doorbell on one: the music is muted there and keeps playing in the other
    /// zone, with no `interruption-began` (it is still heard somewhere).
    @Test func partialInterruptionMutesOneZone() throws {
        let t = try TestDaemon()
        let music = try #require(
            try t.json(
                "POST", "/api/v1/music/play", #"{"sound": "music440", "zones": ["kitchen", "patio"], "loop": true}"#
            ).object["id"])
        #expect(waitUntil { (try? t.status().sources.first?.positionSeconds ?? 0) ?? 0 > 0.2 })
        _ = try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k", "zones": ["kitchen"]}"#)
        let muted = try #require(t.waitForEvent("muted", source: music))
        #expect(muted.zones == ["kitchen"])
        #expect(try t.status().sources.first { $0.id == music }?.state == "playing")
        let unmuted = try #require(t.waitForEvent("unmuted", source: music))
        usleep(200_000)
        t.stop()
        #expect(!t.daemon.events.recent().contains { $0.type == "interruption-began" })

        let kitchen = t.left("kitchen")
        let patio = Signals.channel(ALSATestRig.readS16(t.files["patio"]!), 0, of: 2)
        let m = try #require(muted.zoneFrames?["kitchen"])
        let u = try #require(unmuted.zoneFrames?["kitchen"])
        #expect(level(kitchen, m + period + ramp, 440) < 0.01, "muted in the kitchen")
        #expect(level(kitchen, u + period + ramp, 440) > 0.45, "back after the doorbell")
        let pm = try #require(muted.zoneFrames?["patio"])
        for at in stride(from: pm, to: pm + 24_000, by: 4_800) {
            #expect(level(patio, at, 440, rate: 48_000) > 0.45, "the patio never stopped (frame \(at))")
        }
    }
}
