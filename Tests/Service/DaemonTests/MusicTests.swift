import BatonConfig
import BatonTesting
import FoundationEssentials
import Glibc
import OSThread
import Subsonic
import Testing

@testable import BatonDaemon
@testable import BatonService
@testable import ControlParts

/// Music streamed from the real Subsonic test server (Supysonic on 127.0.0.1) through the pipeline:
/// libcurl → decoder → resampler → slot ring → output thread → ALSA file PCM.
@Suite(.serialized, .ownThread) struct MusicTests {
    func level(_ s: [Float], _ at: Int, _ hz: Double, frames: Int = 4_410) -> Double {
        guard at >= 0, at + frames <= s.count else { return -1 }
        return Signals.windowedToneLevel(s[at..<(at + frames)], frequency: hz, rate: 44_100)
    }

    /// Starts "Gapless Part 1" (5 s) on the kitchen; its source id.
    func playGaplessPart1(_ t: TestDaemon) throws -> String {
        try #require(
            try t.json("POST", "/api/v1/music/play", #"{"search": "Gapless Part 1", "zones": ["kitchen"]}"#).object[
                "id"])
    }

    func position(_ t: TestDaemon, _ id: String) -> Double { t.position(of: id) }

    /// A FLAC track streamed raw and an Opus transcode both play their tone in the zone's file, and
    /// status names the track.
    @Test(arguments: [BatonConfig.SubsonicConfig.StreamFormat.raw, .opus])
    func playsATrackFromTheServer(format: BatonConfig.SubsonicConfig.StreamFormat) throws {
        let t = try TestDaemon(music: try TestSubsonic.music(format: format))
        let r = try t.json("POST", "/api/v1/music/play", #"{"search": "Tone 440", "zones": ["kitchen"]}"#)
        #expect(r.status == 202, "\(r.object)")
        let id = try #require(r.object["id"])
        #expect(waitUntil(seconds: 15) { position(t, id) > 1.0 })
        let source = try #require(try t.status().sources.first { $0.id == id })
        #expect(source.track?.title.hasPrefix("Tone 440") == true)
        #expect(source.state == "playing")
        let granted = try #require(t.waitForEvent("granted", source: id))
        t.stop()
        let out = t.left("kitchen")
        let start = try #require(granted.zoneFrames?["kitchen"])
        let at = try #require(Signals.onset(Array(out[start...]), threshold: 0.01)) + start + 4_410
        #expect(level(out, at, 440) > 0.05, "440 Hz in the kitchen (\(format))")
        #expect(level(out, at, 550) < 0.01)
    }

    /// The seed scenario with server music: the doorbell interrupts the track (state interrupted,
    /// position frozen), and it resumes where it was cut with `ended(shouldResume: true)`.
    @Test func doorbellInterruptsServerMusic() throws {
        let (t, id) = try MusicQueueTests.toneUnderTheDoorbell()
        let began = try #require(t.waitForEvent("interruption-began", source: id))
        #expect(waitUntil { (try? t.status().zones[0].sources.first { $0.source == id }?.paused) == true })
        // Interrupted once the fade-out has been heard; from then on the position is frozen.
        #expect(waitUntil { (try? t.status().sources.first { $0.id == id }?.state) == "interrupted" })
        let frozen = position(t, id)
        usleep(150_000)
        #expect(abs(position(t, id) - frozen) < 0.0001, "the position does not move while interrupted")
        let ended = try #require(t.waitForEvent("interruption-ended", source: id))
        #expect(ended.shouldResume == true)
        #expect(waitUntil { position(t, id) > frozen + 0.2 })
        #expect(
            try t.status().sources.first { $0.id == id }?.track?.title.hasPrefix("Tone 440") == true,
            "the same track goes on")
        t.stop()
        let out = t.left("kitchen")
        let cut = try #require(began.zoneFrames?["kitchen"])
        let back = try #require(ended.zoneFrames?["kitchen"])
        #expect(level(out, cut - 4_410, 440) > 0.05, "music before")
        #expect(level(out, cut + 882, 440, frames: 4_410) < 0.01, "silent during the doorbell")
        #expect(level(out, back + 882, 440) > 0.05, "music after")
    }

    /// `next` moves to the following track of the queue: its tone replaces the first one.
    @Test func nextPlaysTheFollowingTrack() throws {
        let t = try TestDaemon(music: try TestSubsonic.music())
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"search": "Tone", "zones": ["kitchen"]}"#).object["id"])
        #expect(waitUntil(seconds: 15) { position(t, id) > 0.5 })
        let first = try #require(try t.status().sources.first { $0.id == id }?.track?.title)
        #expect(try t.request("POST", "/api/v1/music/next").status == 200)
        #expect(
            waitUntil(seconds: 15) {
                (try? t.status().sources.first { $0.id == id }?.track?.title) != first && position(t, id) > 0.3
            })
        let second = try #require(try t.status().sources.first { $0.id == id })
        #expect(second.trackIndex == 1)
        #expect(second.queueLength ?? 0 >= 2)
        t.stop()
    }

    /// Without a music section, asking for server music is a clear 409; an unknown album is a 404.
    @Test func serverMusicErrorsAreClear() throws {
        let t = try TestDaemon()
        let none = try t.request("POST", "/api/v1/music/play", #"{"album": "x"}"#)
        #expect(none.status == 409)
        #expect(none.text.contains("no music server is configured"))
        t.stop()
        let m = try TestDaemon(music: try TestSubsonic.music())
        defer { m.stop() }
        let missing = try m.request("POST", "/api/v1/music/play", #"{"album": "00000000-0000-0000-0000-000000000000"}"#)
        #expect(missing.status == 404, "\(missing.text)")
        let two = try m.request("POST", "/api/v1/music/play", #"{"album": "a", "search": "b"}"#)
        #expect(two.status == 400)
    }
}

extension MusicTests {
    /// An album cut from one continuous tone plays with no gap at the track joint: no silence, no
    /// jump larger than the tone's own slope, full level in every 10 ms around the joint.
    @Test func gaplessAlbumHasNoJoint() throws {
        let t = try TestDaemon(music: try TestSubsonic.music())
        let music = try t.daemon.parts.music.context(t.daemon.config)
        let album = try #require(
            try music.client.search("Gapless", artistCount: 0, albumCount: 5, songCount: 0).albums.first {
                $0.name == "Gapless"
            })
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"album": "\#(album.id)", "zones": ["kitchen"]}"#).object["id"])
        // The look that hears the music begin (`audible`) announces its track too: under the
        // daemon's lock (which each look holds) the two are seen together or not at all. (The
        // `track` event once waited for the next look, up to a second later.)
        var seen: [String] = []
        _ = waitUntil(seconds: 15) {
            seen = t.daemon.state.withLock { _ in t.daemon.events.recent().filter { $0.source == id }.map(\.type) }
            return seen.contains("audible")
        }
        #expect(seen.contains("audible") && seen.contains("track"), "\(seen)")
        #expect(waitUntil(seconds: 15) { position(t, id) > 0.2 })
        #expect(try t.status().sources.first { $0.id == id }?.track?.title == "Gapless Part 1")
        #expect(
            waitUntil(seconds: 20) {
                (try? t.status().sources.first { $0.id == id }?.trackIndex) == 1 && position(t, id) > 0.3
            })
        #expect(try t.status().sources.first { $0.id == id }?.track?.title == "Gapless Part 2")
        // The monitor publishes `track` at its look at the change; the status computes the track live,
        // so beside a hundred busy test threads the event may come a little after the status.
        let tracks = { t.daemon.events.recent().filter { $0.type == "track" && $0.source == id } }
        _ = waitUntil(seconds: 2) { tracks().count >= 2 }
        #expect(
            tracks().compactMap(\.reason) == [
                "now playing: Gapless Part 1 (1/3)", "now playing: Gapless Part 2 (2/3)",
            ], "a track event per audible track change")
        let granted = try #require(t.waitForEvent("granted", source: id))
        t.stop()
        let out = t.left("kitchen")
        let g = try #require(granted.zoneFrames?["kitchen"])
        let start = try #require(Signals.onset(Array(out[g...]), threshold: 0.0001)) + g
        let joint = start + 220_537  // the first cut, in samples of the 44.1 kHz source = zone frames
        let slope = Float(2 * Double.pi * 500 / 44_100) * 0.13 + 2 / 32_768
        var zeros = 0
        var worst: Float = 0
        for i in (joint - 4_410)..<(joint + 4_410) {
            worst = max(worst, abs(out[i] - out[i - 1]))
            zeros = out[i] == 0 ? zeros + 1 : 0
            #expect(zeros < 3, "silence at frame \(i) (joint at \(joint))")
            if zeros >= 3 { break }
        }
        #expect(worst <= slope, "largest step \(worst) near the joint, the tone's own \(slope)")
        for at in stride(from: joint - 2_205, to: joint + 2_205, by: 441) {
            #expect(level(out, at, 500, frames: 441) > 0.08, "tone at frame \(at)")
        }
    }

    /// The server killed mid-track and restarted: the stream resumes at the exact byte with Range,
    /// the music goes on without an error, and the tone in the file never breaks.
    @Test func serverKilledMidTrackResumes() throws {
        let t = try TestDaemon(music: try TestSubsonic.music(envPath: TestSubsonic.faultsEnv))
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"search": "Long Tone", "zones": ["kitchen"]}"#).object["id"])
        #expect(waitUntil(seconds: 15) { position(t, id) > 1.0 })
        let killedAt = try #require(t.daemon.output("kitchen")?.device.snapshot().framesPlayed)
        let script = TestDaemon.repoRoot + "/scripts/subsonic-server.sh"
        let restart = Subprocess.run(
            "/bin/bash", [script, "restart-server-only"],
            environment: [
                "BATON_SUBSONIC_PORT": TestSubsonic.faultsPort, "BATON_SUBSONIC_ENV": TestSubsonic.faultsEnv,
            ],
            seconds: 60)
        #expect(restart.status == 0, "\(restart.output)")
        let before = position(t, id)
        #expect(waitUntil(seconds: 20) { position(t, id) > before + 3 }, "played on well past what was buffered")
        let s = try #require(try t.status().sources.first { $0.id == id })
        #expect(s.streamError == nil)
        #expect(s.state == "playing")
        t.stop()
        let out = t.left("kitchen")
        for at in stride(from: killedAt, to: killedAt + 44_100 * 3, by: 4_410) {
            #expect(level(out, at, 330) > 0.05, "tone at frame \(at)")
        }
    }
}

extension MusicTests {
    /// The server is told "now playing" when a track starts being heard and gets the submission once
    /// half of it was heard (a 5 s track: after 2.5 s of audible time), each accepted by the server.
    @Test func scrobblesByWhatIsHeard() throws {
        let t = try TestDaemon(music: try TestSubsonic.music())
        defer { t.stop() }
        let id = try playGaplessPart1(t)
        let nowPlaying = try #require(t.waitForEvent("scrobbled", source: id, seconds: 15))
        #expect(nowPlaying.reason == "now playing: Gapless Part 1")
        var submitted: Event?
        #expect(
            waitUntil(seconds: 15) {
                submitted = t.daemon.events.recent().first {
                    $0.type == "scrobbled" && $0.reason?.hasPrefix("submitted") == true
                }
                return submitted != nil
            })
        let heard = position(t, id)
        #expect(submitted?.reason == "submitted: Gapless Part 1")
        #expect(heard >= 2.5, "submitted only after half the track was heard (position \(heard) s)")
    }

    /// A submission carries when its track began to be heard — the time Last.fm and ListenBrainz
    /// take for a scrobble — not when half of it had been: Gapless Part 1 (5 s) is submitted 2.5 s
    /// in, with the time its "now playing" was sent at its start (it was the submission's moment).
    @Test func aSubmissionCarriesWhenItsTrackBegan() throws {
        let real = try TestSubsonic.music()
        let proxy = try SubsonicRefusingProxy(upstreamURL: real.subsonic.url, refusing: [])
        var music = real
        music.subsonic.url = proxy.url
        let t = try TestDaemon(music: music)
        defer { t.stop() }
        _ = try playGaplessPart1(t)
        #expect(waitUntil(seconds: 15) { proxy.scrobbles.contains { $0.submission } })
        let submitted = try #require(proxy.scrobbles.first { $0.submission })
        let nowPlaying = try #require(proxy.scrobbles.first { !$0.submission })
        #expect(
            abs(submitted.time - nowPlaying.time) < 1_200,
            "submitted with \(submitted.time), now playing at \(nowPlaying.time)")
    }

    /// A submission the server could not take (it answered 503) is kept and sent once the server
    /// takes a scrobble again — here the next queue's "now playing" — with the time its track
    /// began. It used to be lost from the listening history.
    @Test func aSubmissionTheServerCouldNotTakeIsSentAgain() throws {
        let real = try TestSubsonic.music()
        let proxy = try SubsonicRefusingProxy(upstreamURL: real.subsonic.url, refusing: [])
        proxy.refusesScrobbles.store(true, ordering: .releasing)
        var music = real
        music.subsonic.url = proxy.url
        let t = try TestDaemon(music: music)
        defer { t.stop() }
        let began = Int64(Date.now.timeIntervalSince1970 * 1000)
        _ = try playGaplessPart1(t)
        #expect(waitUntil(seconds: 15) { proxy.scrobblesRefused.contains { $0.submission } })
        #expect(proxy.scrobbles.isEmpty)
        proxy.refusesScrobbles.store(false, ordering: .releasing)
        _ = try t.json("POST", "/api/v1/music/play", #"{"search": "Tone 440", "zones": ["kitchen"]}"#)
        #expect(waitUntil(seconds: 15) { proxy.scrobbles.contains { $0.submission } })
        let refused = try #require(proxy.scrobblesRefused.first { $0.submission })
        #expect(proxy.scrobbles.map(\.submission) == [false, true], "Tone 440's now playing, then the one kept")
        #expect(proxy.scrobbles.last == refused, "sent again as it was made")
        #expect(abs(refused.time - began) < 1_500, "its track began at \(began), submitted with \(refused.time)")
    }

    /// A track sought past its half is not submitted for having reached it: what counts is time
    /// heard. Steps (10 s) sought to 6 s and played to its end is 4 s heard, under its 5 s half:
    /// "now playing", then no submission (there used to be one right after the seek).
    @Test func aTrackSoughtPastItsHalfIsNotSubmitted() throws {
        let t = try TestDaemon(music: try TestSubsonic.music())
        defer { t.stop() }
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"search": "Steps", "zones": ["kitchen"]}"#).object["id"])
        #expect(waitUntil(seconds: 15) { position(t, id) > 0.1 })
        #expect(try t.request("POST", "/api/v1/music/seek", #"{"position": 6}"#).status == 200)
        let played = try #require(t.waitForEvent("played", source: id, seconds: 15), "Steps plays to its end")
        let scrobbles = t.daemon.events.recent().filter { $0.type == "scrobbled" && $0.source == id }
        #expect(scrobbles.contains { $0.reason == "now playing: Steps" }, "\(scrobbles.map(\.reason))")
        #expect(!scrobbles.contains { $0.reason?.hasPrefix("submitted") == true }, "\(scrobbles.map(\.reason))")
        #expect(played.seq > 0)
    }

    /// While a track plays and nothing is due, music does not ask the monitor to look again before
    /// the next thing that is: 2.5 s into a 5 s track its scrobble threshold, while the next track's
    /// start is not known yet (the streamer is still writing this one). It used to ask every 250 ms.
    @Test func musicAsksForATickOnlyWhenSomethingIsDue() throws {
        let t = try TestDaemon(music: try TestSubsonic.music())
        defer { t.stop() }
        let id = try playGaplessPart1(t)
        #expect(waitUntil(seconds: 15) { position(t, id) > 0.5 })
        let (tick, heard) = t.daemon.state.withLock { s -> (Int?, Double?) in
            let source = s.playbacks.first { "\($0.key)" == id }?.value.source
            return (source?.nextTick, source?.position)
        }
        let seconds = Double(try #require(tick)) / 1e9
        let at = try #require(heard)
        #expect(at < 1.5, "still early in the track: \(at) s")
        #expect(abs(seconds - (2.5 - at)) < 0.1, "next tick in \(seconds) s at \(at) s into the track")
    }
}
