import BatonTesting
import Intercom
import Testing

@Suite(.ownThread) struct CallMonitorTests {
    /// Three packets of one stream in a row start a call; silence for the timeout ends it; the next
    /// stream starts another once it has sent three.
    @Test func endsACallAfterTheSilenceTimeout() {
        var m = CallMonitor(silenceTimeout: 2_000 * ms)
        #expect(m.packet(ssrc: 5, now: 0) == nil)
        #expect(m.packet(ssrc: 5, now: 20 * ms) == nil)
        #expect(m.packet(ssrc: 5, now: 40 * ms) == .callStarted(ssrc: 5))
        #expect(m.packet(ssrc: 5, now: 60 * ms) == nil)
        #expect(m.tick(now: 1_000 * ms) == nil)
        #expect(m.tick(now: 2_059 * ms) == nil)
        #expect(m.tick(now: 2_060 * ms) == .callEnded(.silenceTimeout))
        #expect(m.tick(now: 5_000 * ms) == nil)
        #expect(m.packet(ssrc: 6, now: 6_000 * ms) == nil)
        #expect(m.packet(ssrc: 6, now: 6_020 * ms) == nil)
        #expect(m.packet(ssrc: 6, now: 6_040 * ms) == .callStarted(ssrc: 6))
    }

    /// A stray packet never starts a call: packets of alternating streams, or one every timeout, do not.
    @Test func strayPacketsStartNoCall() {
        var m = CallMonitor(silenceTimeout: 2_000 * ms)
        for i in 0..<20 { #expect(m.packet(ssrc: UInt32(i % 2), now: i * 20 * ms) == nil) }
        #expect(m.packet(ssrc: 7, now: 10_000 * ms) == nil)
        #expect(m.packet(ssrc: 7, now: 12_000 * ms) == nil, "a timeout apart: not one stream")
        #expect(m.packet(ssrc: 7, now: 14_000 * ms) == nil)
        #expect(!m.inCall)
    }

    /// An explicit end ends the call once; ending again does nothing.
    @Test func endsACallExplicitly() {
        var m = CallMonitor(silenceTimeout: 2_000 * ms)
        #expect(m.end() == nil)
        for i in 0..<3 { _ = m.packet(ssrc: 1, now: i * 20 * ms) }
        #expect(m.end() == .callEnded(.explicit))
        #expect(m.end() == nil)
        #expect(m.tick(now: 10_000 * ms) == nil)
    }
}
