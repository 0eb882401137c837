import BatonConfig
import BatonTesting
import FoundationEssentials
import OSThread
import Subsonic
import Testing

@testable import BatonDaemon
@testable import Players

/// OpenSubsonic `reportPlayback`: what the server is told the player does, against the real
/// Subsonic test server behind `SubsonicRefusingProxy`, which offers the extension and records
/// the reports in the order it answers them.
@Suite(.ownThread) struct PlaybackReportTests {
    /// The server hears starting, playing, paused, playing, stopped as they happened, even when it is
    /// slow to answer the pause: the report of the resume waits for it. Each report went out on a thread of
    /// its own; the resume's reached the server first and the pause's after it, and the server
    /// showed the music paused while it played. (And the music was said to be paused before its first
    /// sample was heard: it is starting.)
    @Test func reportsReachTheServerInTheOrderTheyHappened() throws {
        let (real, song) = try Self.toneSong()
        let proxy = try SubsonicRefusingProxy(
            upstreamURL: real.subsonic.url, refusing: [], offeringPlaybackReport: true, holding: ["paused"])
        let (t, _) = try MusicQueueTests.play(song.id, through: proxy, music: real)
        defer { t.stop() }
        #expect(waitUntil(seconds: 15) { proxy.playbackReports.last?.state == "playing" })
        let before = proxy.playbackReportsArrived  // `starting` too, if a look came before the first sample was heard
        #expect(try t.request("POST", "/api/v1/music/pause").status == 200)
        #expect(waitUntil(seconds: 5) { proxy.playbackReportsHeld == 1 }, "the pause's report, held by the server")
        #expect(try t.request("POST", "/api/v1/music/resume").status == 200)
        #expect(
            !waitUntil(seconds: 1.5) { proxy.playbackReportsArrived > before + 1 },
            "the resume's report was sent while the server had not answered the pause's")
        proxy.releaseReports()
        #expect(waitUntil(seconds: 5) { proxy.playbackReports.count == before + 2 })
        #expect(try t.request("POST", "/api/v1/music/stop").status == 200)
        #expect(waitUntil(seconds: 5) { proxy.playbackReports.count == before + 3 })
        let reports = proxy.playbackReports
        #expect(
            Array(reports.map(\.state).drop { $0 == "starting" }) == ["playing", "paused", "playing", "stopped"],
            "\(reports)")
        let positions = reports.map(\.positionMilliseconds)
        #expect(positions == positions.sorted() && positions.last! > 0, "\(reports)")
    }

    /// A report the server did not take (a 503: it was restarting) is sent again a second later:
    /// the pause's was lost for good, and the server showed the song playing on for as long as
    /// Baton was paused.
    @Test func aReportTheServerDidNotTakeIsSentAgain() throws {
        let (real, song) = try Self.toneSong()
        let proxy = try SubsonicRefusingProxy(
            upstreamURL: real.subsonic.url, refusing: [], offeringPlaybackReport: true, failingOnce: ["paused"])
        let (t, _) = try MusicQueueTests.play(song.id, through: proxy, music: real)
        defer { t.stop() }
        #expect(waitUntil(seconds: 15) { proxy.playbackReports.last?.state == "playing" })
        #expect(try t.request("POST", "/api/v1/music/pause").status == 200)
        #expect(waitUntil(seconds: 5) { proxy.playbackReportsFailed == ["paused"] })
        #expect(
            waitUntil(seconds: 5) { proxy.playbackReports.last?.state == "paused" }, "\(proxy.playbackReports)")
    }

    /// A report the server refuses (a Subsonic error, not a passing trouble) is not sent again:
    /// every look sent it again, a request a second for as long as the music stayed paused.
    @Test func aReportTheServerRefusesIsNotSentAgainAndAgain() throws {
        let (real, song) = try Self.toneSong()
        let proxy = try SubsonicRefusingProxy(
            upstreamURL: real.subsonic.url, refusing: [], offeringPlaybackReport: true, refusingReports: ["paused"])
        let (t, _) = try MusicQueueTests.play(song.id, through: proxy, music: real)
        defer { t.stop() }
        #expect(waitUntil(seconds: 15) { proxy.playbackReports.last?.state == "playing" })
        #expect(try t.request("POST", "/api/v1/music/pause").status == 200)
        #expect(waitUntil(seconds: 5) { proxy.playbackReportsRefused == ["paused"] })
        // The monitor looks at least once a second: three looks and more.
        #expect(!waitUntil(seconds: 3) { proxy.playbackReportsRefused.count > 1 }, "\(proxy.playbackReportsRefused)")
    }

    /// A stop while nothing of the queue is heard — a skip or seek waiting for its slots (after
    /// `endStream` and `setStart`, before `start`) — tells the server `stopped`, of the track and
    /// place the queue stops at. Nothing was sent: the server showed the last report, `playing`,
    /// for good.
    @Test func aStopWhileTheNextStartWaitsIsReported() throws {
        let recorder = try SlowHTTPServer()
        defer { recorder.stop() }
        let ok = #"{"subsonic-response": {"status": "ok", "version": "1.16.1", "openSubsonic": true"#
        recorder.route(
            "/rest/getOpenSubsonicExtensions",
            .init(
                contentType: "application/json",
                body: Array((ok + #", "openSubsonicExtensions": [{"name": "playbackReport", "versions": [1]}]}}"#).utf8)
            ))
        recorder.route("/rest/reportPlayback", .init(contentType: "application/json", body: Array((ok + "}}").utf8)))
        let client = SubsonicClient(config: SubsonicSettings(url: recorder.url(""), user: "baton", password: "pw"))
        let songs = (0..<3).map { Song(id: "s\($0)", title: "Song \($0)") }
        let player = MusicPlayer(
            songs: songs,
            server: MusicPlayer.Server(
                client: client, retryLimit: .seconds(1), gains: [1, 1, 1], submissions: Submissions()),
            report: { _ in })
        #expect(player.endStream())
        player.setStart(at: 2, offset: 42.5)
        #expect(player.nowPlaying() == nil)
        #expect(player.stop())
        let reports = { recorder.requests.filter { $0.hasPrefix("/rest/reportPlayback?") } }
        #expect(waitUntil(seconds: 5) { !reports().isEmpty }, "no report of the stop")
        let query = reports().first.map { $0.split(separator: "?", maxSplits: 1)[1].split(separator: "&") } ?? []
        for parameter in ["mediaId=s2", "state=stopped", "positionMs=42500"] {
            #expect(query.contains(Substring(parameter)), "\(parameter) in \(query)")
        }
    }

    /// The real test server's music, and its "Tone 440 FLAC".
    static func toneSong() throws -> (MusicConfig, LibraryAndQueueTests.Songs.Song) {
        let real = try TestSubsonic.music()
        let lookup = try TestDaemon(music: real)
        defer { lookup.stop() }
        let found = try JSONDecoder().decode(
            LibraryAndQueueTests.Songs.self, from: Data(try lookup.request("GET", "/api/v1/library/search?q=Tone").body)
        ).songs
        return (real, try #require(found.first { $0.title == "Tone 440 FLAC" }))
    }

    /// Music of this run is mirrored with `savePlayQueue` (other clients pick the queue up): as it
    /// plays, and where it was stopped — and not again while nothing about it changes.
    @Test func musicOfThisRunIsMirroredToTheServer() throws {
        let (real, song) = try Self.toneSong()
        let proxy = try SubsonicRefusingProxy(upstreamURL: real.subsonic.url, refusing: [], keepingPlayQueue: true)
        let (t, _) = try MusicQueueTests.play(song.id, through: proxy, music: real)
        defer { t.stop() }
        #expect(waitUntil(seconds: 15) { proxy.savedQueues.first?.current == song.id }, "\(proxy.savedQueues)")
        #expect(waitUntil(seconds: 5) { (try? t.status().sources.first?.positionSeconds ?? 0) ?? 0 > 0.5 })
        #expect(try t.request("POST", "/api/v1/music/stop").status == 200)
        #expect(waitUntil(seconds: 5) { proxy.savedQueues.count >= 2 }, "where it was stopped")
        let saved = proxy.savedQueues
        #expect(saved.last!.current == song.id && saved.last!.positionMilliseconds >= 500, "\(saved)")
        #expect(!waitUntil(seconds: 2) { proxy.savedQueues.count > saved.count }, "\(proxy.savedQueues)")
    }

    /// batond stopped while music plays: the server's copy of the queue is where it was heard, for
    /// the client that picks it up. The position alone is mirrored only every 30 s while playing, and
    /// the server kept the one from the music's start (0 s, 3 s in).
    @Test func theStopMirrorsThePositionHeard() throws {
        let (real, song) = try Self.toneSong()
        let proxy = try SubsonicRefusingProxy(upstreamURL: real.subsonic.url, refusing: [], keepingPlayQueue: true)
        let (t, id) = try MusicQueueTests.play(song.id, through: proxy, music: real)
        #expect(waitUntil(seconds: 15) { proxy.savedQueues.first?.current == song.id }, "\(proxy.savedQueues)")
        var heard = 0.0
        #expect(
            waitUntil(seconds: 10) {
                heard = (try? t.status().sources.first { $0.id == id }?.positionSeconds ?? 0) ?? 0
                return heard > 3
            })
        t.stop()
        let last = try #require(proxy.savedQueues.last)
        #expect(last.current == song.id && last.positionMilliseconds >= Int(heard * 1000), "\(proxy.savedQueues)")
    }
}
