import BatonTesting
import Engine
import OSThread
import Testing

/// Rendering ahead and taking back (`ZoneMixer.rewind`): a change that arrives while periods are
/// rendered ahead is heard, after the rewind, from the first period taken back — bit for bit what a
/// mixer that rendered one period at a time would have given had the change come then; what the
/// rings held is read again, not lost, and goes back to the producers only once played.
@Suite(.ownThread) struct ZoneMixerRewindTests {
    static let period = 100
    static let channels = 2

    /// A change made between two periods, as the control thread makes it.
    enum Change: String, CaseIterable, CustomTestStringConvertible {
        case volume, gain, pause, announcement, release
        var testDescription: String { rawValue }
    }

    /// A mixer with music (slot 0) playing and a chime ready to be claimed.
    struct Zone {
        let mixer: ZoneMixer
        let music: SourceSlot
        var chime: SourceSlot?

        init(rewindPeriods: Int) throws {
            mixer = ZoneMixer(
                channels: ZoneMixerRewindTests.channels, periodFrames: ZoneMixerRewindTests.period, slotCount: 3,
                ringSamples: 1 << 14, rampFrames: 150, rewindPeriods: rewindPeriods)
            music = try #require(mixer.claimSlot(gain: 0.8))
            let tone = Signals.sine(
                frequency: 440, rate: 48_000, frames: 4_000, channels: ZoneMixerRewindTests.channels)
            tone.withUnsafeBufferPointer { _ = music.ring.write($0.baseAddress!, count: $0.count) }
        }

        mutating func apply(_ change: Change) throws {
            switch change {
            case .volume: mixer.setVolume(0.3)
            case .gain: music.setGain(0.2)
            case .pause: music.pause()
            case .release: mixer.release(music)
            case .announcement:
                let slot = try #require(mixer.claimSlot(gain: 1))
                let sound = Signals.sine(
                    frequency: 1_000, rate: 48_000, frames: 1_000, channels: ZoneMixerRewindTests.channels,
                    amplitude: 0.25)
                sound.withUnsafeBufferPointer { _ = slot.ring.write($0.baseAddress!, count: $0.count) }
                slot.finish()
                chime = slot
            }
        }

        /// Renders `periods` periods and returns their samples.
        func render(_ periods: Int) -> [Float] {
            var out: [Float] = []
            for _ in 0..<periods {
                mixer.render()
                out += UnsafeBufferPointer(start: mixer.mix, count: mixer.periodFrames * mixer.channels)
            }
            return out
        }
    }

    /// Where a change would be heard, by the clock since the output last published: after a
    /// weekend with the zone idle (its output stopped, publishing nothing), the frame rendered next,
    /// not a trap (the frames the clock moved, `ns × rate`, overflowed after 53 hours at 48 kHz).
    @Test func theChangeFrameAfterAWeekendIsTheFrameRenderedNext() throws {
        let zone = try Zone(rewindPeriods: 16)
        _ = zone.render(8)
        let now = monotonicNanoseconds()
        for hours in [1, 54, 27 * 24] {
            zone.mixer.publishChangeFrame(
                played: 300, keepFrames: 100, rate: 96_000, now: now - hours * 3_600_000_000_000)
            #expect(zone.mixer.nextFrame == 8 * Self.period, "\(hours) h")
        }
    }

    /// Eight periods rendered ahead, the change arrives when three have been played, five are taken
    /// back and rendered again: the twelve periods are those of a mixer that got the change after
    /// its third period, sample for sample, and the sources' positions and rings agree too.
    @Test(arguments: Change.allCases) func aRewoundChangeIsHeardFromThePeriodTakenBack(change: Change) throws {
        var ahead = try Zone(rewindPeriods: 16)
        var first = ahead.render(8)
        ahead.mixer.settle(playedThrough: 3 * Self.period)
        #expect(ahead.mixer.rewindablePeriods == 5, "the three played periods are final")
        try ahead.apply(change)
        #expect(ahead.mixer.rewind(periods: 5) == 5)
        #expect(ahead.mixer.nextFrame == 3 * Self.period)
        first.removeLast(5 * Self.period * Self.channels)
        let heard = first + ahead.render(9)

        var step = try Zone(rewindPeriods: 0)
        var expected = step.render(3)
        try step.apply(change)
        expected += step.render(9)

        #expect(heard.count == expected.count)
        let firstDifference = zip(heard, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset
        #expect(firstDifference == nil, "\(change): first differing sample \(firstDifference ?? -1)")
        #expect(ahead.music.framesConsumed == step.music.framesConsumed)
        #expect(ahead.music.isPaused == step.music.isPaused)
        #expect(ahead.chime?.framesConsumed == step.chime?.framesConsumed)
        #expect(ahead.chime?.firstFrameAt == step.chime?.firstFrameAt)
        #expect(ahead.mixer.appliedVolume == step.mixer.appliedVolume)
        if change != .release {
            // What was rendered but not played is still the ring's; once played, it is room again.
            #expect(ahead.music.ring.readable == step.music.ring.readable)
            #expect(ahead.music.ring.writable < step.music.ring.writable)
            ahead.mixer.settle(playedThrough: 12 * Self.period)
            #expect(ahead.music.ring.writable == step.music.ring.writable)
        }
    }

    /// A period in which something others may have seen happened — here a chime's first frame and
    /// its last — is never taken back: the rewind stops after it, and the chime plays once.
    @Test func aPeriodWithAnEventIsNotTakenBack() throws {
        var zone = try Zone(rewindPeriods: 16)
        _ = zone.render(2)
        try zone.apply(.announcement)  // 1 000 frames: periods 2…11
        _ = zone.render(6)
        #expect(zone.chime?.firstFrameAt == 2 * Self.period)
        #expect(zone.mixer.rewindablePeriods == 5, "back to the end of the chime's first period, no further")
        #expect(zone.mixer.rewind(periods: 8) == 5)
        #expect(zone.chime?.framesConsumed == Self.period)
        _ = zone.render(12)
        #expect(zone.chime?.isDrained == true)
        #expect(zone.chime?.lastFrameAt == 12 * Self.period)
        #expect(zone.mixer.rewindablePeriods == 2, "the period that found it drained (12) is final")
        #expect(zone.chime?.framesConsumed == 1_000)
    }

    /// Periods beyond what the mixer keeps become final as new ones are rendered: their samples go
    /// back to the producer, and the rewind reaches no further than the marks kept.
    @Test func onlyTheKeptPeriodsCanBeTakenBack() throws {
        let zone = try Zone(rewindPeriods: 4)
        let before = zone.music.ring.writable
        _ = zone.render(10)
        #expect(zone.mixer.rewindablePeriods == 4)
        #expect(zone.music.ring.writable == before + 6 * Self.period * Self.channels)
        #expect(zone.mixer.rewind(periods: 10) == 4)
        #expect(zone.music.framesConsumed == 6 * Self.period)
        #expect(zone.music.ring.writable == before + 6 * Self.period * Self.channels)
    }

    /// Rendering ahead, settling and rewinding make no heap allocation. (`nextFrame` is the control
    /// plane's read, not the rendering thread's: read outside the count. In a debug build its first
    /// call instantiates the generic sequence read's tuple metadata, once per process — the test
    /// failed when it ran first.)
    @Test func renderingAheadDoesNotAllocate() throws {
        let zone = try Zone(rewindPeriods: 12)
        let tone = Signals.sine(frequency: 440, rate: 48_000, frames: 4_800, channels: Self.channels)
        let feeder = FeedLoop(slots: [zone.music], block: tone)
        var total: UInt64 = 0
        for cycle in 0..<300 {
            feeder.topUp()
            if cycle % 30 == 0 { zone.mixer.setVolume(cycle % 60 == 0 ? 0.5 : 1) }
            total += countAllocations { for _ in 0..<4 { zone.mixer.render() } }
            let played = zone.mixer.nextFrame - 6 * Self.period
            total += countAllocations {
                zone.mixer.settle(playedThrough: played)
                zone.mixer.rewind(periods: 2)
            }
        }
        #expect(total == 0)
    }
}
