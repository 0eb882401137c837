import Arbiter
import BatonTesting
import FoundationEssentials
import Testing

@testable import BatonDaemon
@testable import ControlParts

/// Where a queue's tracks start and where a queue ends when it is edited or stopped near its end,
/// against the real Subsonic test server.
@Suite(.serialized, .ownThread) struct MusicQueuePlaceTests {
    /// The ids of the test server's songs titled `titles`, asked through `t`.
    static func ids(_ t: TestDaemon, _ query: String, _ titles: [String]) throws -> [String] {
        let found = try JSONDecoder().decode(
            LibraryAndQueueTests.Songs.self,
            from: Data(try t.request("GET", "/api/v1/library/search?q=\(query)").body)
        ).songs
        return try titles.map { title in try #require(found.first { $0.title == title }?.id, "\(title)") }
    }

    /// The title and position of source `id`'s track heard now.
    static func heard(_ t: TestDaemon, _ id: String) -> (title: String?, seconds: Double) {
        let source = try? t.status().sources.first { $0.id == id }
        return (source?.track?.title, source?.positionSeconds ?? 0)
    }

    /// A track sought to 8 s, played on into the next, then moved after that one (an edit that
    /// plays on): heard again, it starts from its start. The streamer started every pass at the
    /// first track's entry at the seek's place: it was heard again from 8 s, its start lost.
    @Test func aTrackMovedToPlayAgainStartsFromItsStart() throws {
        let t = try TestDaemon(music: try TestSubsonic.music())
        defer { t.stop() }
        let steps = try Self.ids(t, "Steps", ["Steps"])[0]
        let part = try Self.ids(t, "Gapless", ["Gapless Part 1"])[0]
        let id = try #require(
            try t.json(
                "POST", "/api/v1/music/play", #"{"songs": ["\#(steps)", "\#(part)"], "zones": ["kitchen"]}"#
            ).object["id"])
        #expect(waitUntil(seconds: 15) { Self.heard(t, id).seconds > 0.2 })
        #expect(try t.request("POST", "/api/v1/music/seek", #"{"position": 8}"#).status == 200)
        #expect(waitUntil(seconds: 15) { Self.heard(t, id).title == "Gapless Part 1" }, "the second track plays")
        let moved = try JSONDecoder().decode(
            LibraryAndQueueTests.Queue.self,
            from: Data(
                try t.request("POST", "/api/v1/music/queue/move", #"{"from": 0, "to": 1, "song": "\#(steps)"}"#).body
            ))
        #expect(!moved.restarted && moved.songs.map(\.title) == ["Gapless Part 1", "Steps"], "\(moved)")
        #expect(waitUntil(seconds: 15) { Self.heard(t, id).title == "Steps" }, "the moved track plays again")
        let again = Self.heard(t, id)
        #expect(again.title == "Steps" && again.seconds < 3, "heard again from its start: \(again)")
    }

    /// Paused, then sought to 0.3 s before the end of the queue's last track: the streamer writes
    /// that much, and is done. A stop then keeps the queue there, for `music/resume`: the queue was
    /// taken as played to its end once its last frame was written (half a second and more before it
    /// is heard), and the saved queue was dropped, its last track not heard to its end.
    @Test func aStopBeforeTheLastFrameIsHeardKeepsTheQueue() throws {
        let t = try TestDaemon(music: try TestSubsonic.music())
        defer { t.stop() }
        let tone = try Self.ids(t, "Tone", ["Tone 440 FLAC"])[0]
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"songs": ["\#(tone)"], "zones": ["kitchen"]}"#).object["id"])
        #expect(waitUntil(seconds: 15) { Self.heard(t, id).seconds > 0.2 })
        #expect(try t.request("POST", "/api/v1/music/pause").status == 200)
        #expect(try t.request("POST", "/api/v1/music/seek", #"{"position": 19.7}"#).status == 200)
        #expect(
            waitUntil(seconds: 10) {
                t.daemon.state.withLock { s in
                    guard let music = s.playbacks[SourceID(id)]?.music else { return false }
                    return music.pendingStart == nil && music.queue.endedAfter != nil
                }
            }, "the seek's streamer wrote the last 0.3 s and ended")
        #expect(try t.request("POST", "/api/v1/music/stop").status == 200)
        #expect(waitUntil { (try? t.status().sources.contains { $0.id == id }) == false }, "the source ended")
        let saved = try #require(try t.status().savedQueue, "the queue is kept")
        #expect(saved.track.title == "Tone 440 FLAC" && abs(saved.positionSeconds - 19.7) < 0.05, "\(saved)")
    }

    /// The last track, heard now, removed: the queue has played out — the source ends (`played`),
    /// and its saved queue is dropped, as at a queue's end. The track before it was played again
    /// from its start.
    @Test func removingTheLastTrackHeardNowEndsTheQueue() throws {
        let t = try TestDaemon(music: try TestSubsonic.music())
        defer { t.stop() }
        let tone = try Self.ids(t, "Tone", ["Tone 440 FLAC"])[0]
        let part = try Self.ids(t, "Gapless", ["Gapless Part 1"])[0]
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"songs": ["\#(tone)", "\#(part)"], "zones": ["kitchen"]}"#)
                .object["id"])
        #expect(waitUntil(seconds: 15) { Self.heard(t, id).seconds > 0.2 })
        #expect(try t.request("POST", "/api/v1/music/seek", #"{"position": 19}"#).status == 200)
        #expect(waitUntil(seconds: 15) { Self.heard(t, id).title == "Gapless Part 1" }, "the last track plays")
        let removed = try JSONDecoder().decode(
            LibraryAndQueueTests.Queue.self,
            from: Data(
                try t.request("POST", "/api/v1/music/queue/remove", #"{"index": 1, "song": "\#(part)"}"#).body))
        #expect(removed.restarted && removed.current == nil, "\(removed)")
        #expect(removed.songs.map(\.title) == ["Tone 440 FLAC"], "\(removed)")
        let played = try #require(t.waitForEvent("played", source: id, seconds: 5), "the source ends")
        #expect(played.reason?.hasPrefix("stopped") != true, "\(played.reason ?? "")")
        #expect(waitUntil { (try? t.status().sources.contains { $0.id == id }) == false }, "the source ended")
        #expect(try t.status().savedQueue == nil, "a queue played to its end is not kept")
        let tracks = t.daemon.events.recent().filter { $0.source == id && $0.type == "track" }
        #expect(
            tracks.filter { $0.reason?.contains("Tone 440 FLAC") == true }.count == 1,
            "Tone 440 FLAC is not heard again: \(tracks.map { $0.reason ?? "" })")
    }
}
