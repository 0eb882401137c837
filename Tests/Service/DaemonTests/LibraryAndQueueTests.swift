import Arbiter
import BatonTesting
import FoundationEssentials
import OSThread
import Testing

@testable import BatonDaemon
@testable import BatonService
@testable import ControlParts

/// The web app's library endpoints and queue edits, against the real Subsonic test server.
@Suite(.ownThread) struct LibraryAndQueueTests {
    struct Songs: Decodable {
        struct Song: Decodable {
            var id: String
            var title: String
            var albumId: String?
            var coverArt: String?
        }
        var songs: [Song]
    }

    struct Queue: Decodable {
        var id: String
        var current: Int?
        var songs: [Songs.Song]
        var restarted: Bool
    }

    func decode<T: Decodable>(_ type: T.Type, _ r: RawClient.Response) throws -> T {
        try JSONDecoder().decode(T.self, from: Data(r.body))
    }

    func error(_ r: RawClient.Response) -> String {
        (try? JSONDecoder().decode([String: String].self, from: Data(r.body)))?["error"] ?? r.text
    }

    /// Search, artists → albums → tracks, playlists, random: each answers what the server holds;
    /// bad parameters and unknown ids are clear JSON errors.
    @Test func browsesTheLibrary() throws {
        let t = try TestDaemon(music: try TestSubsonic.music())
        defer { t.stop() }
        let found = try t.request("GET", "/api/v1/library/search?q=Tone")
        #expect(found.status == 200, "\(found.text)")
        let songs = try decode(Songs.self, found).songs
        #expect(
            Set(songs.map(\.title)).isSuperset(of: [
                "Tone 440 FLAC", "Tone 550 MP3", "Tone 660 Opus", "Tone 770 WAV 22050", "Tone 880 WAV 48000",
            ]))
        let albumID = try #require(songs.first { $0.title == "Tone 440 FLAC" }?.albumId)

        struct Album: Decodable {
            struct A: Decodable {
                var name: String
                var artistId: String?
                var songs: [Songs.Song]
            }
            var album: A
        }
        let album = try decode(Album.self, try t.request("GET", "/api/v1/library/albums/\(albumID)")).album
        #expect(album.name == "Tones")
        #expect(
            album.songs.map(\.title) == [
                "Tone 440 FLAC", "Tone 550 MP3", "Tone 660 Opus", "Tone 770 WAV 22050", "Tone 880 WAV 48000",
            ])

        struct Artists: Decodable {
            struct A: Decodable {
                var id: String
                var name: String
            }
            var artists: [A]
        }
        let artists = try decode(Artists.self, try t.request("GET", "/api/v1/library/artists")).artists
        #expect(!artists.isEmpty)
        if let artistID = album.artistId {
            struct Artist: Decodable {
                struct A: Decodable {
                    struct Al: Decodable { var name: String }
                    var albums: [Al]
                }
                var artist: A
            }
            let artist = try decode(Artist.self, try t.request("GET", "/api/v1/library/artists/\(artistID)")).artist
            #expect(artist.albums.contains { $0.name == "Tones" })
        }
        #expect(try t.request("GET", "/api/v1/library/playlists").status == 200)
        let random = try decode(Songs.self, try t.request("GET", "/api/v1/library/random?size=3"))
        #expect(random.songs.count == 3)

        let noQuery = try t.request("GET", "/api/v1/library/search")
        #expect(noQuery.status == 400)
        #expect(error(noQuery).contains("query parameter q"))
        let badSize = try t.request("GET", "/api/v1/library/random?size=0")
        #expect(badSize.status == 400)
        #expect(error(badSize) == "query parameter size: expected an integer 1...500")
        let unknown = try t.request("GET", "/api/v1/library/albums/00000000-0000-0000-0000-000000000000")
        #expect(unknown.status == 404, "\(unknown.text)")
        #expect(error(unknown).hasPrefix("music server: "))
        let nope = try t.request("GET", "/api/v1/library/genres")
        #expect(nope.status == 404)
        #expect(error(nope).contains("the library has artists"))
        let cover = try t.request("GET", "/api/v1/library/cover/nothing-here")
        #expect(cover.status == 404 || cover.status == 502, "\(cover.status) \(cover.text)")
        #expect(error(cover).hasPrefix("music server: "), "\(cover.text)")
    }

    /// A cover the server hands out as SVG (which may hold script) is not served from batond's own
    /// origin, where its script would run as batond's page: refused in words. A raster cover is
    /// passed on, with a policy that nothing in it runs.
    @Test func aCoverIsPassedOnOnlyAsAnImage() throws {
        let real = try TestSubsonic.music()
        for (type, status) in [("image/svg+xml", 502), ("text/html", 502), ("image/png", 200), ("image/jpg", 200)] {
            let proxy = try SubsonicRefusingProxy(
                upstreamURL: real.subsonic.url, refusing: [],
                coverArt: (type, #"<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>"#))
            var music = real
            music.subsonic.url = proxy.url
            let t = try TestDaemon(music: music)
            defer { t.stop() }
            let cover = try t.request("GET", "/api/v1/library/cover/al-1")
            #expect(cover.status == status, "\(type): \(cover.status) \(cover.text)")
            if status == 200 {
                #expect(cover.headers["content-type"] == (type == "image/jpg" ? "image/jpeg" : type))
                #expect(cover.headers["content-security-policy"] == "default-src 'none'; sandbox")
            } else {
                #expect(error(cover).hasPrefix("music server: "), "\(cover.text)")
                #expect(!cover.text.contains("<script>"), "\(cover.text)")
            }
        }
    }

    /// Without a music section the library is a 409 naming the missing section.
    @Test func libraryNeedsAServer() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        let r = try t.request("GET", "/api/v1/library/artists")
        #expect(r.status == 409)
        #expect(error(r).contains("no music server is configured"))
        let q = try t.request("GET", "/api/v1/music/queue")
        #expect(q.status == 404)
        #expect(error(q) == "no music from the server is playing")
    }

    /// Songs added once the last track is all written (here: paused 0.4 s before its end, the rest
    /// in the rings) are played after it: the stream restarts where it is heard, and goes on into
    /// them. They used to be listed and never played, and the queue, played to its end, was dropped.
    @Test func songsAddedAfterTheLastTrackWasWrittenArePlayed() throws {
        let t = try TestDaemon(music: try TestSubsonic.music())
        defer { t.stop() }
        let steps = try #require(
            try decode(Songs.self, try t.request("GET", "/api/v1/library/search?q=Steps")).songs.first)
        let tone = try #require(
            try decode(Songs.self, try t.request("GET", "/api/v1/library/search?q=Tone")).songs.first {
                $0.title == "Tone 440 FLAC"
            })
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"songs": ["\#(steps.id)"], "zones": ["kitchen"]}"#)
                .object["id"])
        func position() -> Double { (try? t.status().sources.first { $0.id == id }?.positionSeconds ?? 0) ?? 0 }
        func title() -> String? { try? t.status().sources.first { $0.id == id }?.track?.title }
        #expect(waitUntil(seconds: 15) { position() > 0.2 })
        #expect(try t.request("POST", "/api/v1/music/seek", #"{"position": 9.4}"#).status == 200)
        #expect(waitUntil(seconds: 15) { position() > 9.6 })
        #expect(try t.request("POST", "/api/v1/music/pause").status == 200)
        // The streamer writes the rest (under 0.4 s: the rings hold 0.5) and finds nothing after it.
        #expect(
            waitUntil(seconds: 5) {
                t.daemon.state.withLock { $0.playbacks[SourceID(id)]?.music?.queue.endedAfter } != nil
            })
        let added = try decode(
            Queue.self, try t.request("POST", "/api/v1/music/queue/add", #"{"songs": ["\#(tone.id)"]}"#))
        #expect(added.songs.map(\.title) == ["Steps", "Tone 440 FLAC"])
        #expect(added.restarted, "the stream had ended: it restarts where it is heard")
        #expect(try t.request("POST", "/api/v1/music/resume").status == 200)
        #expect(waitUntil(seconds: 15) { title() == "Tone 440 FLAC" }, "the added song plays: \(title() ?? "-")")
        #expect(waitUntil(seconds: 5) { position() > 0.3 })
    }

    /// Edits beyond the track heard now (add, play next, move, remove) leave it playing without a
    /// restart, at its position; `next` then goes to the edited next track; removing the track heard
    /// now restarts at the one that took its place; clear keeps only the current one; jump plays a
    /// chosen track. Bad indexes are 400 naming the index.
    @Test func editsTheQueueWithoutRestartingWhatPlays() throws {
        let t = try TestDaemon(music: try TestSubsonic.music())
        defer { t.stop() }
        let tones = try decode(Songs.self, try t.request("GET", "/api/v1/library/search?q=Tone")).songs
        let albumID = try #require(tones.first { $0.title == "Tone 440 FLAC" }?.albumId)
        let steps = try #require(
            try decode(Songs.self, try t.request("GET", "/api/v1/library/search?q=Steps")).songs.first)
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"album": "\#(albumID)", "zones": ["kitchen"]}"#).object["id"])
        func position() -> Double { (try? t.status().sources.first { $0.id == id }?.positionSeconds ?? 0) ?? 0 }
        func title() -> String? { try? t.status().sources.first { $0.id == id }?.track?.title }
        #expect(waitUntil(seconds: 15) { position() > 0.5 })
        let grants = t.daemon.events.recent().filter { $0.type == "granted" }.count

        let added = try decode(
            Queue.self, try t.request("POST", "/api/v1/music/queue/add", #"{"songs": ["\#(steps.id)"]}"#))
        #expect(!added.restarted)
        #expect(
            added.songs.map(\.title) == [
                "Tone 440 FLAC", "Tone 550 MP3", "Tone 660 Opus", "Tone 770 WAV 22050", "Tone 880 WAV 48000", "Steps",
            ])
        let before = position()
        let next = try decode(
            Queue.self, try t.request("POST", "/api/v1/music/queue/add", #"{"songs": ["\#(steps.id)"], "next": true}"#))
        #expect(!next.restarted)
        #expect(next.songs.map(\.title).prefix(2) == ["Tone 440 FLAC", "Steps"])
        let moved = try decode(
            Queue.self, try t.request("POST", "/api/v1/music/queue/move", #"{"from": 5, "to": 1}"#))
        #expect(!moved.restarted)
        #expect(moved.songs.map(\.title).prefix(3) == ["Tone 440 FLAC", "Tone 880 WAV 48000", "Steps"])
        let removed = try decode(Queue.self, try t.request("POST", "/api/v1/music/queue/remove", #"{"index": 2}"#))
        #expect(!removed.restarted)
        #expect(removed.current == 0)
        #expect(title() == "Tone 440 FLAC")
        #expect(position() >= before, "the track heard went on (\(position()) s after \(before) s)")
        #expect(t.daemon.events.recent().filter { $0.type == "granted" }.count == grants)

        #expect(try t.request("POST", "/api/v1/music/next").status == 200)
        #expect(
            waitUntil(seconds: 15) { title() == "Tone 880 WAV 48000" }, "next plays the moved track: \(title() ?? "-")")

        let current = try decode(Queue.self, try t.request("GET", "/api/v1/music/queue"))
        #expect(current.current == 1)
        let cut = try decode(Queue.self, try t.request("POST", "/api/v1/music/queue/remove", #"{"index": 1}"#))
        #expect(cut.restarted)
        #expect(cut.songs.map(\.title).prefix(2) == ["Tone 440 FLAC", "Tone 550 MP3"])
        #expect(
            waitUntil(seconds: 15) { title() == "Tone 550 MP3" },
            "the track that took its place plays: \(title() ?? "-")")

        let jumped = try decode(Queue.self, try t.request("POST", "/api/v1/music/queue/jump", #"{"index": 3}"#))
        #expect(jumped.restarted && jumped.current == 3)
        #expect(waitUntil(seconds: 15) { title() == jumped.songs[3].title })
        #expect(waitUntil(seconds: 15) { position() > 0.3 })
        let cleared = try decode(Queue.self, try t.request("POST", "/api/v1/music/queue/clear"))
        #expect(cleared.songs.map(\.title) == [jumped.songs[3].title])
        #expect(!cleared.restarted)

        let bad = try t.request("POST", "/api/v1/music/queue/remove", #"{"index": 9}"#)
        #expect(bad.status == 400)
        #expect(error(bad) == "index 9 is not in the queue (0...0)")
        let missing = try t.request("POST", "/api/v1/music/queue/move", #"{"from": 0}"#)
        #expect(missing.status == 400)
        #expect(error(missing) == "missing field \"to\"")
        let typo = try t.request("POST", "/api/v1/music/queue/add", #"{"song": ["x"]}"#)
        #expect(typo.status == 400)
        #expect(error(typo) == "unknown field \"song\" (expected: id, next, songs)")
        let only = try t.request("POST", "/api/v1/music/queue/remove", #"{"index": 0}"#)
        #expect(only.status == 400)
        #expect(error(only).contains("only this track"))
    }

    /// An edit names the song the client saw at the place it names (and the source whose queue it
    /// saw): when the queue changed since — another phone removed a track — it is refused (409,
    /// saying what is there now) and nothing changes; the web app then shows the queue as it is.
    /// It removed whatever track had moved into that place.
    @Test func anEditOnAQueueThatChangedIsRefused() throws {
        let t = try TestDaemon(music: try TestSubsonic.music())
        defer { t.stop() }
        let tones = try decode(Songs.self, try t.request("GET", "/api/v1/library/search?q=Tone")).songs
        let albumID = try #require(tones.first { $0.title == "Tone 440 FLAC" }?.albumId)
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"album": "\#(albumID)", "zones": ["kitchen"]}"#).object["id"])
        let seen = try decode(Queue.self, try t.request("GET", "/api/v1/music/queue"))
        // Another client removes track 2; this one, on the list it saw, asks to remove track 3.
        let other = try t.request(
            "POST", "/api/v1/music/queue/remove", #"{"index": 2, "song": "\#(seen.songs[2].id)"}"#)
        #expect(other.status == 200, "\(other.text)")
        let stale = try t.request(
            "POST", "/api/v1/music/queue/remove", #"{"index": 3, "song": "\#(seen.songs[3].id)", "id": "\#(id)"}"#)
        #expect(stale.status == 409)
        #expect(
            error(stale)
                == "the queue changed: the track at index 3 is \"\(seen.songs[4].title)\" now, not song \(seen.songs[3].id) (get the queue again)"
        )
        let now = try decode(Queue.self, try t.request("GET", "/api/v1/music/queue"))
        #expect(now.songs.map(\.id) == seen.songs.map(\.id).filter { $0 != seen.songs[2].id }, "nothing more removed")
        let past = try t.request(
            "POST", "/api/v1/music/queue/remove", #"{"index": 4, "song": "\#(seen.songs[4].id)"}"#)
        #expect(past.status == 409)
        #expect(error(past) == "the queue changed: it has 4 tracks now, none at index 4 (get the queue again)")
        let move = try t.request(
            "POST", "/api/v1/music/queue/move", #"{"from": 2, "to": 1, "song": "\#(seen.songs[2].id)"}"#)
        #expect(move.status == 409, "\(move.text)")
        let gone = try t.request(
            "POST", "/api/v1/music/queue/remove", #"{"index": 3, "song": "\#(now.songs[3].id)", "id": "music-99"}"#)
        #expect(gone.status == 404, "another source's queue: \(gone.text)")
        let right = try decode(
            Queue.self,
            try t.request(
                "POST", "/api/v1/music/queue/remove", #"{"index": 3, "song": "\#(now.songs[3].id)", "id": "\#(id)"}"#))
        #expect(right.songs.map(\.id) == now.songs.map(\.id).filter { $0 != now.songs[3].id })
    }
}
