import BatonTesting
import Subsonic
import Testing

@testable import Players

/// When a track is submitted to the server as played: half of it or 4 minutes heard.
@Suite(.ownThread) struct ScrobbleThresholdTests {
    /// A duration the server does not know, or says is 0 or less (a file it could not probe), is no
    /// threshold: such a track is never submitted (with 0 it was submitted at its first look).
    @Test func aTrackWithoutALengthIsNeverSubmitted() {
        func threshold(_ duration: Int?) -> Double? {
            MusicPlayer.scrobbleThreshold(Song(id: "s", title: "S", duration: duration))
        }
        #expect(threshold(300) == 150)
        #expect(threshold(600) == 240)
        #expect(threshold(nil) == nil)
        #expect(threshold(0) == nil)
        #expect(threshold(-5) == nil)
    }
}
