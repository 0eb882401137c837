import BatonConfig
import BatonTesting
import Testing

/// `silence-alarm:`: how long a zone may stay silent while a source is heard.
@Suite(.ownThread) struct ConfigSilenceAlarmTests {
    /// Absent, it is 2 s; a duration in range is taken, and written back in the effective config.
    @Test func readsTheSilenceAlarm() throws {
        #expect(try load(minimalZone).silenceAlarm == .seconds(2))
        let c = try load("silence-alarm: 750ms\n" + minimalZone)
        #expect(c.silenceAlarm == .milliseconds(750))
    }

    /// Out of range or not a duration, it is one exact error at the value.
    @Test(arguments: ["50ms", "2h", "loud"]) func rejectsABadSilenceAlarm(value: String) {
        let lines = issueLines("silence-alarm: \(value)\n" + minimalZone) ?? []
        #expect(lines.count == 1 && lines[0].hasPrefix("test.yaml:1:16: silence-alarm: "), "\(lines)")
    }
}
