import BatonTesting
import Glibc
import OSThread
import Testing

@testable import BatonDaemon

/// Music that stops — the user's stop, batond's own stop — fades to silence on the card: what the
/// virtual sound card played (its record, docs/TESTING.md) never jumps by more than the tone's own
/// step and one step of the zone's 10 ms ramp, and ends in silence, not mid-waveform at full level.
@Suite(.ownThread) struct ClickFreeStopTests {
    /// The left channel of what `card` played (S16, stereo).
    static func playedLeft(_ card: TestCard) -> [Int16] {
        let bytes = card.recordedBytes()
        return stride(from: 0, to: bytes.count - 3, by: 4).map {
            Int16(bitPattern: UInt16(bytes[$0]) | UInt16(bytes[$0 + 1]) << 8)
        }
    }

    /// The largest sample-to-sample step `music440` (a 440 Hz tone at half scale) may take on a
    /// 48 kHz card while a 10 ms ramp moves its gain: its own steepest step, one ramp step, and
    /// room for the resampler's and S16's rounding.
    static let largestStep = 32_767 * (0.5 * 2 * Double.pi * 440 / 48_000 + 0.5 / 480) + 64

    /// The largest step in `samples` and where.
    static func largestJump(_ samples: ArraySlice<Int16>) -> (Int, Int) {
        var worst = (0, samples.startIndex)
        for i in samples.indices.dropFirst() {
            let step = abs(Int(samples[i]) - Int(samples[i - 1]))
            if step > worst.0 { worst = (step, i) }
        }
        return worst
    }

    /// `music/stop` while music plays at full level: the source fades out over the zone's ramp and
    /// the card plays silence after it. Cut off at once, its last period ended mid-waveform and the
    /// next held nothing — a click at every stop (and seek, and skip: the same release).
    @Test func aStoppedSourceFadesOut() throws {
        let card = ALSATestRig.makeCard(rate: 48_000, periodFrames: 480, bufferFrames: 1_920)
        let t = try TestDaemon(zones: [("card", 48_000, card.name)], deviceClocked: ["card"])
        defer { t.stop() }
        #expect(waitUntil { (try? t.status().zones.first?.state) == "available" })
        let music = try t.json("POST", "/api/v1/music/play", #"{"sound": "music440", "loop": true}"#)
        try #require(music.status == 202, "\(music.object)")
        try #require(waitUntil { card.recordedFrames > 24_000 }, "the music plays")
        let stoppedAt = card.recordedFrames
        #expect(try t.request("POST", "/api/v1/music/stop").status == 200)
        try #require(waitUntil { card.recordedFrames > stoppedAt + 9_600 }, "the card plays on")
        let left = Self.playedLeft(card)
        let (jump, at) = Self.largestJump(left[stoppedAt...])
        #expect(Double(jump) <= Self.largestStep, "a step of \(jump) at frame \(at) (bound \(Self.largestStep))")
        #expect(left.suffix(4_800).allSatisfy { $0 == 0 }, "silent after the stop")
    }

    /// batond's stop (SIGTERM: `fadeOut`, then `stop`) while music plays at full level: the card's
    /// record ends with the fade to silence. The fade was waited for only until it was rendered,
    /// and the stop dropped the card's buffer (30 ms at 10/40 ms) with the fade in it: the record
    /// ended mid-waveform at full level, a click at every restart and upgrade.
    @Test func batondsStopEndsWithTheFadeHeard() throws {
        let card = ALSATestRig.makeCard(rate: 48_000, periodFrames: 480, bufferFrames: 1_920)
        let t = try TestDaemon(zones: [("card", 48_000, card.name)], deviceClocked: ["card"])
        #expect(waitUntil { (try? t.status().zones.first?.state) == "available" })
        let music = try t.json("POST", "/api/v1/music/play", #"{"sound": "music440", "loop": true}"#)
        try #require(music.status == 202, "\(music.object)")
        try #require(waitUntil { card.recordedFrames > 24_000 }, "the music plays")
        let before = card.recordedFrames
        t.daemon.fadeOut()
        t.stop()
        let left = Self.playedLeft(card)
        try #require(left.count > before)
        let (jump, at) = Self.largestJump(left[before...])
        #expect(Double(jump) <= Self.largestStep, "a step of \(jump) at frame \(at) (bound \(Self.largestStep))")
        #expect(left.last == 0, "the record ends in silence, not at \(left.last ?? 0)")
        // With no step above the bound between them, the tone at full level and the silence: the
        // fade was played.
        let lastSound = try #require(left.lastIndex { $0 != 0 })
        let peak = left[max(0, lastSound - 4_800)...].map { abs(Int($0)) }.max() ?? 0
        #expect(peak > 10_000, "the tone was at full level just before the fade: \(peak)")
    }
}
