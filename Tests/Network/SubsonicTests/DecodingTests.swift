import BatonTesting
import FoundationEssentials
import Subsonic
import Testing

/// Decoding of shapes the test server (Supysonic) does not produce: OpenSubsonic fields, numeric IDs,
/// single objects in place of lists. Fixtures follow the OpenSubsonic documentation's examples.
@Suite(.ownThread) struct DecodingTests {
    private func decode<T: Decodable>(_ json: String, as type: T.Type = T.self) throws -> T {
        try JSONTestDecoder.decode(json, as: type)
    }

    /// An OpenSubsonic song decodes replayGain, samplingRate and a numeric ID as a string.
    @Test func decodesOpenSubsonicSongFields() throws {
        let song: Song = try decode(
            """
            {"id": 1234, "title": "T", "album": "A", "albumId": "al-1", "track": "3", "duration": 241,
             "suffix": "flac", "contentType": "audio/flac", "bitRate": 880, "samplingRate": 44100,
             "channelCount": 2, "size": 26000000,
             "replayGain": {"trackGain": -6.5, "albumGain": -7.1, "trackPeak": 0.98, "albumPeak": 1.0}}
            """)
        #expect(song.id == "1234")
        #expect(song.track == 3)
        #expect(song.samplingRate == 44100)
        #expect(song.replayGain == ReplayGain(trackGain: -6.5, albumGain: -7.1, trackPeak: 0.98, albumPeak: 1.0))
    }

    /// An empty replayGain object (an untagged file) decodes as no replayGain.
    @Test func treatsEmptyReplayGainAsAbsent() throws {
        let song: Song = try decode(#"{"id": "x", "title": "T", "replayGain": {}}"#)
        #expect(song.replayGain == nil)
    }

    /// A play queue (OpenSubsonic example shape) decodes its entries, current ID and position in ms.
    @Test func decodesAPlayQueue() throws {
        let queue: PlayQueue = try decode(
            """
            {"current": "s2", "position": 93500, "username": "baton", "changed": "2024-01-02T03:04:05Z",
             "changedBy": "baton", "entry": [{"id": "s1", "title": "One"}, {"id": "s2", "title": "Two"}]}
            """)
        #expect(queue.entries.map(\.id) == ["s1", "s2"])
        #expect(queue.current == "s2")
        #expect(queue.position == 93500)
    }

    /// A list given as a single object (old servers' JSON) or as {} decodes as one element or none.
    @Test func decodesSingleObjectAndEmptyLists() throws {
        let one: Album = try decode(#"{"id": "a", "name": "N", "song": {"id": "s", "title": "T"}}"#)
        #expect(one.songs.map(\.id) == ["s"])
        let none: Playlist = try decode(#"{"id": "p", "name": "N", "entry": {}}"#)
        #expect(none.entries.isEmpty)
    }

    /// A list whose element is bad fails naming that element and its field, not the list as "not
    /// an object" (what the single-object fallback said before).
    @Test func aBadElementOfAListIsNamed() throws {
        let json = #"{"id": "a", "name": "N", "song": [{"id": "s", "title": "T"}, {"title": "no id"}]}"#
        do {
            _ = try decode(json, as: Album.self)
            Issue.record("decoded an album with a song that has no id")
        } catch let error as DecodingError {
            guard case .keyNotFound(let key, let context) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(key.stringValue == "id")
            #expect(context.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue } == ["song", "1"])
        }
    }
}

/// JSONDecoder over a string, for fixtures.
enum JSONTestDecoder {
    static func decode<T: Decodable>(_ json: String, as type: T.Type) throws -> T {
        try JSONDecoder().decode(T.self, from: Data(json.utf8))
    }
}

/// ReplayGain factors: the chosen gain, the other as a fallback, the peak as a limit.
@Suite(.ownThread) struct ReplayGainFactorTests {
    @Test func picksTrackOrAlbumAndLimitsByPeak() {
        let rg = ReplayGain(trackGain: -6.0206, albumGain: -9.5424, trackPeak: 0.5, albumPeak: 0.9)
        #expect(abs(rg.factor(album: false) - 0.5) < 1e-4)
        #expect(abs(rg.factor(album: true) - 0.3333) < 1e-4)
        // +12 dB would put a 0.5 peak at 2.0: limited to 1 / 0.5.
        #expect(abs(ReplayGain(trackGain: 12, trackPeak: 0.5).factor(album: false) - 2) < 1e-4)
        // Album mode falls back to the track gain; no gain at all is unity.
        #expect(abs(ReplayGain(trackGain: -6.0206).factor(album: true) - 0.5) < 1e-4)
        #expect(ReplayGain(trackPeak: 0.3).factor(album: false) == 1)
        #expect(abs(rg.factor(album: false, preampDecibels: 6.0206) - 1) < 1e-4)
    }

    /// Values no ReplayGain tag has (a raw R128 number, a server's bug) count as missing, and are
    /// said: +512 dB gave a factor of 4e25 (a clipped square wave at full scale), −1536 dB silence,
    /// 1e300 dB infinity (whose NaNs silenced the zone's whole mix), a peak of 1000 −60 dB.
    @Test func implausibleValuesAreIgnoredAndSaid() {
        #expect(ReplayGain(trackGain: 512).factor(album: false) == 1)
        #expect(ReplayGain(trackGain: -1536, trackPeak: 0.5).factor(album: false) == 1)
        #expect(ReplayGain(trackGain: 1e300).factor(album: false) == 1)
        #expect(abs(ReplayGain(trackGain: 6.0206, trackPeak: 1000).factor(album: false) - 2) < 1e-4)
        // The other gain is the fallback, as for a missing one.
        #expect(abs(ReplayGain(trackGain: -6.0206, albumGain: 300).factor(album: true) - 0.5) < 1e-4)
        #expect(ReplayGain(trackGain: 512, trackPeak: 1000).implausible == "trackGain 512.0 dB, trackPeak 1000.0")
        #expect(ReplayGain(trackGain: -24, albumGain: 24, trackPeak: 8).implausible == nil)
        for g in [512.0, -1536, 1e300, -1e300] {
            let f = ReplayGain(trackGain: g, trackPeak: 1e-300).factor(album: false)
            #expect(f.isFinite && f > 0.06 && f < 16, "\(g) dB: \(f)")
        }
    }
}
