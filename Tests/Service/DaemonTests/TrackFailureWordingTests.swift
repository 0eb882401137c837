import BatonTesting
import Subsonic
import Testing

@testable import Players

/// How a track that failed is said in its `stream-error`.
@Suite(.ownThread) struct TrackFailureWordingTests {
    /// A track that fails after some of it was heard says where it stopped ("at 3:02", from where
    /// decoding got to); one of which nothing was heard "could not play". A decode error midway
    /// read "could not play X (id): …", as if the track never started.
    @Test func aTrackThatFailsMidwaySaysWhereItStopped() {
        let song = Song(id: "s7", title: "Long Tone", duration: 400)
        let why = "Ogg Opus: Long Tone: corrupt or truncated Ogg Opus data (-137)"
        #expect(
            MusicStreamer.failure(song, why: why, delivered: 8_026_000, reached: 182.4)
                == "stopped Long Tone (s7) at 3:02: \(why)")
        #expect(
            MusicStreamer.failure(song, why: why, delivered: 0, reached: 0) == "could not play Long Tone (s7): \(why)")
        #expect(MusicStreamer.clock(3723.9) == "1:02:03")
        #expect(MusicStreamer.clock(9) == "0:09")
    }
}
