import Intercom
import Testing

@Suite struct CallMonitorTests {
    /// The first packet starts a call; silence for the timeout ends it; the next packet starts another.
    @Test func endsACallAfterTheSilenceTimeout() {
        var m = CallMonitor(silenceTimeout: 2_000 * ms)
        #expect(m.packet(ssrc: 5, now: 0) == .callStarted(ssrc: 5))
        #expect(m.packet(ssrc: 5, now: 20 * ms) == nil)
        #expect(m.tick(now: 1_000 * ms) == nil)
        #expect(m.tick(now: 2_019 * ms) == nil)
        #expect(m.tick(now: 2_020 * ms) == .callEnded(.silenceTimeout))
        #expect(m.tick(now: 5_000 * ms) == nil)
        #expect(m.packet(ssrc: 6, now: 6_000 * ms) == .callStarted(ssrc: 6))
    }

    /// An explicit end ends the call once; ending again does nothing.
    @Test func endsACallExplicitly() {
        var m = CallMonitor(silenceTimeout: 2_000 * ms)
        #expect(m.end() == nil)
        _ = m.packet(ssrc: 1, now: 0)
        #expect(m.end() == .callEnded(.explicit))
        #expect(m.end() == nil)
        #expect(m.tick(now: 10_000 * ms) == nil)
    }
}
