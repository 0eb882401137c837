import Arbiter
import AudioCore
import BatonConfig
import BatonTesting
import FoundationEssentials
import Glibc
import OSThread
import Subsonic
import Synchronization
import Testing

@testable import BatonDaemon
@testable import BatonService
@testable import ControlParts
@testable import Players

/// Seek, ReplayGain, the play queue kept across a restart, and a pause long enough for the server
/// to drop the idle connection — all against the real Subsonic test server, checked in the zone's file.
@Suite(.serialized, .ownThread) struct MusicQueueTests {
    func position(_ t: TestDaemon, _ id: String) -> Double { t.position(of: id) }

    /// Which step of the "Steps" track (300 Hz + 100 Hz per second) sounds in 100 ms from `at`,
    /// or nil when none is clearly there.
    func step(_ out: [Float], at: Int) -> Int? {
        guard at >= 0, at + 4_410 <= out.count else { return nil }
        let window = out[at..<(at + 4_410)]
        let levels = (0..<10).map { Signals.windowedToneLevel(window, frequency: Double(300 + 100 * $0), rate: 44_100) }
        let best = levels.indices.max { levels[$0] < levels[$1] }!
        return levels[best] > 0.1 ? best : nil
    }

    /// The steps heard from `from` on, one per 50 ms, with repeats collapsed.
    func steps(_ out: [Float], from: Int) -> [Int] {
        var seen: [Int] = []
        for at in stride(from: from, to: out.count - 4_410, by: 2_205) {
            if let s = step(out, at: at), seen.last != s { seen.append(s) }
        }
        return seen
    }

    /// The ID of the "Steps" song on the server.
    func steps(_ t: TestDaemon) throws -> String {
        let music = try t.daemon.parts.music.context(t.daemon.config)
        return try #require(
            try music.client.search("Steps", artistCount: 0, albumCount: 0, songCount: 5).songs.first {
                $0.title == "Steps"
            }
        ).id
    }

    /// A seek to 6.5 s jumps from the first step (300 Hz) straight to the seventh (900 Hz), which
    /// then lasts the half second left of it; status reports the new position.
    @Test(arguments: [BatonConfig.SubsonicConfig.StreamFormat.raw, .opus])
    func seekJumpsToThePosition(format: BatonConfig.SubsonicConfig.StreamFormat) throws {
        let t = try TestDaemon(music: try TestSubsonic.music(format: format))
        let song = try steps(t)
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"songs": ["\#(song)"], "zones": ["kitchen"]}"#).object["id"])
        #expect(waitUntil(seconds: 15) { position(t, id) > 0.3 })
        let r = try t.request("POST", "/api/v1/music/seek", #"{"position": 6.5}"#)
        #expect(r.status == 200, "\(r.text)")
        #expect(waitUntil(seconds: 15) { position(t, id) > 6.6 })
        #expect(position(t, id) < 7.5, "the position counts on from where the seek landed")
        #expect(waitUntil(seconds: 5) { position(t, id) > 7.3 })
        let granted = try #require(t.waitForEvent("granted", source: id))
        let bad = try t.request("POST", "/api/v1/music/seek", #"{"position": 60}"#)
        #expect(bad.status == 400 && bad.text.contains("past the end"), "\(bad.text)")
        let huge = try t.request("POST", "/api/v1/music/seek", #"{"position": 1e300}"#)
        #expect(
            huge.status == 400 && huge.text.contains("past the end"),
            "a huge position is refused, not a trap: \(huge.text)")
        t.stop()
        let out = t.left("kitchen")
        let heard = steps(out, from: try #require(granted.zoneFrames?["kitchen"]))
        #expect(heard.first == 0, "starts at 300 Hz: \(heard)")
        let jump = try #require(heard.firstIndex(of: 6), "900 Hz after the seek: \(heard)")
        #expect(heard[1..<jump].allSatisfy { $0 <= 1 }, "nothing between the start and the seek target: \(heard)")
        #expect(heard.dropFirst(jump).prefix(2) == [6, 7], "then 1000 Hz: \(heard)")
        // The 900 Hz step lasts what was left of it: 0.5 s.
        let g = try #require(granted.zoneFrames?["kitchen"])
        let run = stride(from: g, to: out.count - 4_410, by: 441).filter { step(out, at: $0) == 6 }
        let seconds = Double(run.count) * 0.01
        #expect(abs(seconds - 0.5) < 0.12, "900 Hz for \(seconds) s")
    }

    /// ReplayGain (`track`): a song tagged −6.02 dB plays at half the level of the same song untagged.
    @Test func replayGainScalesTheTrack() throws {
        let t = try TestDaemon(music: try TestSubsonic.music())
        let music = try t.daemon.parts.music.context(t.daemon.config)
        var song = try #require(
            try music.client.search("Tone 440", artistCount: 0, albumCount: 0, songCount: 5).songs.first)
        let plain = try t.daemon.music.start([song], zones: ["kitchen"])
        #expect(waitUntil(seconds: 15) { position(t, plain.id) > 0.6 })
        try t.daemon.command(.stop, source: plain.id)
        song.replayGain = ReplayGain(trackGain: -6.0206, albumGain: -20, trackPeak: 0.5)
        let quiet = try t.daemon.music.start([song], zones: ["kitchen"])
        #expect(waitUntil(seconds: 15) { position(t, quiet.id) > 0.6 })
        // From each one's first frame heard (under load a stream may start well after its grant).
        let a = try #require(t.waitForEvent("audible", source: plain.id)?.zoneFrames?["kitchen"])
        let b = try #require(t.waitForEvent("audible", source: quiet.id)?.zoneFrames?["kitchen"])
        t.stop()
        let out = t.left("kitchen")
        let full = Signals.windowedToneLevel(out[(a + 8_820)..<(a + 13_230)], frequency: 440, rate: 44_100)
        let half = Signals.windowedToneLevel(out[(b + 8_820)..<(b + 13_230)], frequency: 440, rate: 44_100)
        #expect(full > 0.05)
        #expect(abs(half / full - 0.5) < 0.01, "level ratio \(half / full)")
    }

    /// The queue, the position heard and the zone volume survive a restart: after it, status shows
    /// the saved queue, and `music/resume` plays on from the saved position (the fifth step, 700 Hz).
    @Test func queueAndVolumeSurviveARestart() throws {
        let dir = TestDirectory.make("state")
        let first = try TestDaemon(music: try TestSubsonic.music(), stateDir: dir)
        let song = try steps(first)
        let id = try #require(
            try first.json("POST", "/api/v1/music/play", #"{"songs": ["\#(song)"], "zones": ["kitchen"]}"#).object["id"]
        )
        #expect(waitUntil(seconds: 15) { position(first, id) > 0.2 })
        #expect(try first.request("POST", "/api/v1/music/seek", #"{"position": 4.2}"#).status == 200)
        #expect(try first.request("POST", "/api/v1/zones/kitchen/volume", #"{"volume": 0.5}"#).status == 200)
        #expect(waitUntil(seconds: 15) { position(first, id) > 4.3 })
        let asked = ContinuousClock.now
        let stoppedAt = position(first, id)
        first.stop()
        // The music plays on from the look until the stop saves it (it stops the network first).
        let gap = (ContinuousClock.now - asked) / .seconds(1)
        #expect(access(dir + "/state.json", R_OK) == 0)

        let second = try TestDaemon(music: try TestSubsonic.music(), stateDir: dir)
        let saved = try #require(try second.status().savedQueue)
        #expect(saved.track.title == "Steps")
        #expect(saved.zones == ["kitchen"])
        #expect(saved.playing)
        #expect(
            saved.positionSeconds >= stoppedAt - 0.001 && saved.positionSeconds - stoppedAt < gap + 0.02,
            "saved \(saved.positionSeconds) s, heard \(stoppedAt) s (\(gap) s before the stop)")
        #expect(try second.status().zones.first { $0.name == "kitchen" }?.volume == 0.5)
        let resumed = try second.json("POST", "/api/v1/music/resume")
        #expect(resumed.status == 202, "\(resumed.object)")
        let again = try #require(resumed.object["id"])
        #expect(waitUntil(seconds: 15) { position(second, again) > saved.positionSeconds + 0.2 })
        #expect(position(second, again) < saved.positionSeconds + 2, "resumed from the saved position, not from 0")
        let granted = try #require(second.waitForEvent("granted", source: again)?.zoneFrames?["kitchen"])
        second.stop()
        let out = second.left("kitchen")
        let start = try #require(Signals.onset(Array(out[granted...]), threshold: 0.01)) + granted
        #expect(step(out, at: start + 441) == 4, "700 Hz first: where it was heard before the restart")
    }

}

/// In `MusicTests` (serialized) with the other test that restarts the daemon-faults server.
extension MusicQueueTests {
    /// A seek, then a stop before anything of the new place was heard (the server is slow to
    /// answer the new stream): the queue is saved at the place sought, not where the stream was
    /// before. A stop that came before the new stream's thread had begun its track (CI at adaeb19,
    /// on a loaded machine) saved the place the monitor had last seen, before the seek: the stream
    /// not begun is saved where it starts now (`MusicPlayer.placeToSave`) — a window this test
    /// cannot force, only hit.
    @Test func aSeekNotHeardYetIsSavedWhereItGoes() throws {
        // Each stream's answer held back 2 s, then given at once.
        let (music, proxy) = try TestSubsonic.slowMusic(chunk: 100_000_000, interval: 2, free: 0)
        defer { _ = proxy.stop() }
        let dir = TestDirectory.make("state-seek")
        let first = try TestDaemon(music: music, stateDir: dir)
        let song = try steps(first)
        let id = try #require(
            try first.json("POST", "/api/v1/music/play", #"{"songs": ["\#(song)"], "zones": ["kitchen"]}"#).object["id"]
        )
        #expect(waitUntil(seconds: 15) { position(first, id) > 0.2 })
        #expect(try first.request("POST", "/api/v1/music/seek", #"{"position": 4.2}"#).status == 200)
        // The new stream started (its slots were free), and waits for the server.
        #expect(waitUntil { first.daemon.state.withLock { $0.playbacks[SourceID(id)]?.awaitingSlots == nil } })
        #expect(
            try first.status().sources.first { $0.id == id }?.state == "starting", "the new stream is not heard yet")
        first.stop()

        let second = try TestDaemon(music: music, stateDir: dir)
        defer { second.stop() }
        let saved = try #require(try second.status().savedQueue)
        #expect(saved.track.title == "Steps")
        #expect(saved.positionSeconds == 4.2, "saved at \(saved.positionSeconds) s")
    }
}

extension MusicTests {
    /// A long pause: the server goes away and comes back while the music is paused (its idle
    /// connection is gone). On resume the stream reopens with Range at the exact byte and the tone
    /// goes on past everything that was buffered, with no stream error.
    @Test func resumeAfterTheServerDroppedThePausedStream() throws {
        let t = try TestDaemon(music: try TestSubsonic.music(envPath: TestSubsonic.faultsEnv))
        let play = try t.json("POST", "/api/v1/music/play", #"{"search": "Long Tone", "zones": ["kitchen"]}"#)
        let id = try #require(play.object["id"], "\(play)")
        #expect(waitUntil(seconds: 15) { position(t, id) > 1.0 })
        #expect(try t.json("POST", "/api/v1/music/pause").status == 200)
        #expect(waitUntil { (try? t.status().zones[0].sources.first { $0.source == id }?.paused) == true })
        // Paused once the fade-out has been heard; from then on the position stays.
        #expect(waitUntil { (try? t.status().sources.first { $0.id == id }?.state) == "paused" })
        let pausedAt = position(t, id)
        let script = TestDaemon.repoRoot + "/scripts/subsonic-server.sh"
        let restart = Subprocess.run(
            "/bin/bash", [script, "restart-server-only"],
            environment: [
                "BATON_SUBSONIC_PORT": TestSubsonic.faultsPort, "BATON_SUBSONIC_ENV": TestSubsonic.faultsEnv,
            ],
            seconds: 60)
        #expect(restart.status == 0, "\(restart.output)")
        #expect(abs(position(t, id) - pausedAt) < 0.001, "paused: the position stays")
        #expect(try t.status().sources.first { $0.id == id }?.state == "paused")
        let resumedAtFrame = try #require(t.daemon.output("kitchen")?.device.snapshot().framesPlayed)
        #expect(try t.json("POST", "/api/v1/music/resume").status == 200)
        #expect(waitUntil(seconds: 20) { position(t, id) > pausedAt + 4 }, "played on well past what was buffered")
        let s = try #require(try t.status().sources.first { $0.id == id })
        #expect(s.streamError == nil)
        #expect(s.state == "playing")
        t.stop()
        let out = t.left("kitchen")
        let back = try #require(Signals.onset(Array(out[resumedAtFrame...]), threshold: 0.01)) + resumedAtFrame
        #expect(out.count >= back + 44_100 * 3 + 4_410, "3 s of music after the resume")
        for at in stride(from: back + 882, to: min(back + 44_100 * 3, out.count - 4_410), by: 4_410) {
            #expect(
                Signals.windowedToneLevel(out[at..<(at + 4_410)], frequency: 330, rate: 44_100) > 0.05,
                "tone at frame \(at)")
        }
    }
}

extension MusicTests {
    /// The server stays away longer than `retry.limit` when the stream needs it (a seek while it is
    /// down): the queue stops with a `stream-error` event and a saved queue (not playing) at the
    /// position asked for; once the server is back, `music/resume` plays on from there.
    @Test func givesUpAfterTheRetryLimitAndResumesLater() throws {
        let t = try TestDaemon(music: try TestSubsonic.music(retry: .seconds(1), envPath: TestSubsonic.faultsEnv))
        defer { t.stop() }
        let music = try t.daemon.parts.music.context(t.daemon.config)
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"search": "Long Tone", "zones": ["kitchen"]}"#).object["id"])
        #expect(waitUntil(seconds: 15) { position(t, id) > 0.5 })
        let script = TestDaemon.repoRoot + "/scripts/subsonic-server.sh"
        // On a thread of its own: the test's cooperative-pool threads may all be busy waiting.
        let restart = Mutex<Int32?>(nil)
        let thread = startThread {
            let r = Subprocess.run(
                "/bin/bash", [script, "restart-server-only", "6"],
                environment: [
                    "BATON_SUBSONIC_PORT": TestSubsonic.faultsPort, "BATON_SUBSONIC_ENV": TestSubsonic.faultsEnv,
                ],
                seconds: 60)
            restart.withLock { $0 = r.status }
        }
        #expect(waitUntil(seconds: 10) { (try? music.client.ping()) == nil }, "the server went away")
        // The monitor is held until the streamer has given up and the source's last frame has been
        // mixed, so that its next look finds the source drained: the give-up must be told even then
        // (it was lost when the drained source was released first: 2 runs in 33).
        let daemon = t.daemon
        #expect(daemon.monitor.stop())
        #expect(try t.request("POST", "/api/v1/music/seek", #"{"position": 10}"#).status == 200)
        let playback = try #require(daemon.state.withLock { $0.playbacks.values.first { $0.id.rawValue == id } })
        #expect(
            waitUntil(seconds: 10) { playback.music?.progress.gaveUp != nil && playback.source.isDrained },
            "gave up, and drained")
        daemon.tick()
        if daemon.monitor.begin() { daemon.monitor.launch(tick: { daemon.tick() }, save: { daemon.saveState() }) }
        let failed = try #require(t.waitForEvent("stream-error", source: id, seconds: 10))
        #expect(failed.reason?.contains("Long Tone 330") == true, "\(failed.reason ?? "")")
        #expect(
            waitUntil(seconds: 10) { (try? t.status().sources.contains { $0.id == id }) == false }, "the source ended")
        let saved = try #require(try t.status().savedQueue)
        #expect(!saved.playing)
        #expect(abs(saved.positionSeconds - 10) < 0.01)
        pthread_join(thread, nil)
        #expect(restart.withLock { $0 } == 0)
        let resumed = try t.json("POST", "/api/v1/music/resume")
        #expect(resumed.status == 202, "\(resumed.object)")
        let again = try #require(resumed.object["id"])
        #expect(waitUntil(seconds: 15) { position(t, again) > 10.5 })
        #expect(position(t, again) < 13, "from where it stopped, not from the start")
    }
}

extension MusicQueueTests {
    /// Server music (the 440 Hz tone) heard in the kitchen, and the 2 s doorbell that interrupted
    /// it: the daemon and the music's id.
    static func toneUnderTheDoorbell() throws -> (TestDaemon, String) {
        let t = try TestDaemon(music: try TestSubsonic.music())
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"search": "Tone 440", "zones": ["kitchen"]}"#).object["id"])
        #expect(waitUntil(seconds: 15) { t.position(of: id) > 0.5 })
        _ = try t.json("POST", "/api/v1/announce", #"{"sound": "bell2s", "zones": ["kitchen"]}"#)
        #expect(t.waitForEvent("interruption-began", source: id) != nil)
        return (t, id)
    }

    /// The user pauses server music during the doorbell: `ended(shouldResume: false)`, the state
    /// says paused, and the zone stays silent after the chime.
    @Test func pauseDuringTheDoorbellKeepsServerMusicPaused() throws {
        let (t, id) = try Self.toneUnderTheDoorbell()
        #expect(try t.json("POST", "/api/v1/music/pause").status == 200)
        let ended = try #require(t.waitForEvent("interruption-ended", source: id))
        #expect(ended.shouldResume == false)
        usleep(300_000)
        #expect(try t.status().sources.first { $0.id == id }?.state == "paused")
        t.stop()
        let out = t.left("kitchen")
        let end = try #require(ended.zoneFrames?["kitchen"])
        for at in stride(from: end + 882, to: out.count - 4_410, by: 4_410) {
            #expect(
                Signals.windowedToneLevel(out[at..<(at + 4_410)], frequency: 440, rate: 44_100) < 0.001,
                "silent at \(at)")
        }
    }

    /// A pause and then a resume given during the doorbell: the music reads paused after the pause,
    /// interrupted after the resume, and when the chime ends it is told to resume (the user's play)
    /// and is heard again, going on from where it was cut.
    @Test func aResumeGivenDuringTheDoorbellIsHeardAfterIt() throws {
        let (t, id) = try Self.toneUnderTheDoorbell()
        let cut = position(t, id)
        #expect(try t.json("POST", "/api/v1/music/pause").status == 200)
        let state = { try? t.status().sources.first { $0.id == id }?.state }
        #expect(waitUntil(seconds: 1) { state() == "paused" }, "\(String(describing: state()))")
        let early = t.daemon.events.recent().contains { $0.type == "interruption-ended" && $0.source == id }
        try #require(
            !early, "the 2 s bell ended before the resume was given (a machine that busy cannot run this test)")
        #expect(try t.json("POST", "/api/v1/music/resume").status == 200)
        #expect(state() == "interrupted", "\(String(describing: state()))")
        let ended = try #require(t.waitForEvent("interruption-ended", source: id))
        #expect(ended.shouldResume == true)
        #expect(waitUntil(seconds: 5) { position(t, id) > cut + 1 })
        #expect(position(t, id) < cut + 2.5, "from where it was cut, not after the chime's length")
        t.stop()
        let out = t.left("kitchen")
        let end = try #require(ended.zoneFrames?["kitchen"])
        #expect(out.count > end + 4_410 * 6)
        #expect(
            Signals.windowedToneLevel(out[(end + 4_410 * 4)..<(end + 4_410 * 6)], frequency: 440, rate: 44_100) > 0.05)
    }

    /// Audio for zones of one format is converted once per request: both zones' players hold one
    /// copy (speech, which the sound library does not keep, was converted again for each zone —
    /// as was a sound too long for its cache).
    @Test func zonesOfOneFormatShareTheConvertedSamples() throws {
        let t = try TestDaemon(zones: [("kitchen", 48_000, nil), ("patio", 48_000, nil), ("garage", 44_100, nil)])
        defer { t.stop() }
        let zones = ["kitchen", "patio", "garage"].compactMap { t.daemon.zones.zone($0) }
        try #require(zones.count == 3 && zones[0].channels == zones[1].channels)
        let pcm = DecodedPCM(samples: [Float](repeating: 0.1, count: 16_000), channels: 1, rate: 16_000)
        let player = try t.daemon.sounds.player(
            Speech.Rendered(pcm: pcm, label: "test", coalesceKey: "test"), in: zones)
        let kitchen = try #require(player.samples["kitchen"])
        let patio = try #require(player.samples["patio"])
        #expect(kitchen.count > zones[0].rate * zones[0].channels / 2, "a second of it")
        #expect(kitchen.withUnsafeBufferPointer(\.baseAddress) == patio.withUnsafeBufferPointer(\.baseAddress))
        #expect(player.samples["garage"]?.count ?? 0 < kitchen.count, "another format: its own, at 44.1 kHz")
    }

    /// A server that does not answer: `music/play` is a clear 502 naming the failure, and the daemon
    /// plays announcements on. Too many song IDs or random songs are a 400 before it is asked.
    @Test func unreachableServerIsAClearErrorAndTheDaemonRunsOn() throws {
        let password = TestDirectory.make("pw") + "/password"
        let f = try #require(fopen(password, "w"))
        fputs("secret-pw\n", f)
        fclose(f)
        let music = MusicConfig(
            subsonic: .init(url: "http://127.0.0.1:9", user: "baton", password: .file(password), format: .opus))
        let t = try TestDaemon(music: music)
        defer { t.stop() }
        let r = try t.request("POST", "/api/v1/music/play", #"{"random": 5}"#)
        #expect(r.status == 502, "\(r.text)")
        #expect(r.text.contains("music server") && r.text.contains("127.0.0.1:9"), "\(r.text)")
        #expect(!r.text.contains("secret-pw"))
        #expect(try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k", "zones": ["kitchen"]}"#).status == 202)
        // More song IDs than a play or a queue addition takes: refused before the server is asked
        // for each (one request each, on the requester's thread: minutes for a 64 KiB body).
        let ids = (0..<501).map { "\"s\($0)\"" }.joined(separator: ",")
        let many = try t.request("POST", "/api/v1/music/play", #"{"songs": ["# + ids + "]}")
        #expect(many.status == 400 && many.text.contains("songs: 501 IDs; at most 500 at once"), "\(many.text)")
        // As many random songs: more, or none, is refused, not clamped (10 000 played 500, silently).
        let random = try t.request("POST", "/api/v1/music/play", #"{"random": 501}"#)
        #expect(
            random.status == 400 && random.text.contains("random: 501 songs; at most 500 at once"), "\(random.text)")
        let none = try t.request("POST", "/api/v1/music/play", #"{"random": 0}"#)
        #expect(none.status == 400 && none.text.contains("random: 0 songs; give at least 1"), "\(none.text)")
    }

    /// A scripted Subsonic server whose `getPlaylist` answers `songs` songs (`s0`, `s1`, …), whose
    /// `getSong` answers song `x`, and whose streams are held in `hold` before their last byte (the
    /// music stays under way, nothing of it heard); and the music section for it.
    static func heldStreamServer(songs: Int, hold: @escaping @Sendable () -> Void) throws -> (
        SlowHTTPServer, MusicConfig
    ) {
        let server = try SlowHTTPServer()
        server.route("/rest/getPlaylist", playlist(songs))
        server.route("/rest/ping", .init(contentType: "application/json", body: subsonicOK("")))
        server.route(
            "/rest/getSong",
            .init(
                contentType: "application/json",
                body: subsonicOK(#", "song": {"id": "x", "title": "X", "duration": 100}"#)))
        server.route(
            "/rest/stream",
            .init(
                contentType: "audio/wav", body: Array(repeating: 0, count: 64),
                beforeLastChunk: hold))
        let dir = TestDirectory.make("held-stream")
        _ = FileIO.writeAtomically(Array("secret\n".utf8), to: "\(dir)/password")
        let music = MusicConfig(
            subsonic: .init(url: server.url(""), user: "baton", password: .file("\(dir)/password"), format: .raw))
        return (server, music)
    }

    /// A Subsonic answer with `json` (`, "key": …`) in it.
    static func subsonicOK(_ json: String) -> [UInt8] {
        Array(#"{"subsonic-response": {"status": "ok", "version": "1.16.1"\#(json)}}"#.utf8)
    }

    /// `getPlaylist`'s answer: a playlist of `count` songs.
    static func playlist(_ count: Int) -> SlowHTTPServer.Route {
        let entries = (0..<count).map { #"{"id": "s\#($0)", "title": "Song \#($0)", "duration": 100}"# }
        let list = #", "playlist": {"id": "p", "name": "Long", "entry": ["# + entries.joined(separator: ",") + "]}"
        return .init(contentType: "application/json", body: subsonicOK(list))
    }

    /// A queue holds at most `MusicControl.mostQueuedSongs` songs: a playlist that long plays, a
    /// song added to it is refused (409, naming the limit), and so is a longer playlist. Nothing
    /// capped it: additions of 500 songs each grew it, and the state file with it, without end.
    @Test func aQueueHoldsAtMostTenThousandSongs() throws {
        let most = MusicControl.mostQueuedSongs
        let release = Semaphore()
        let (server, music) = try Self.heldStreamServer(songs: most) { _ = release.wait(nanoseconds: 30_000_000_000) }
        defer {
            release.post()
            server.stop()
        }
        let t = try TestDaemon(music: music)
        defer { t.stop() }
        let played = try t.request("POST", "/api/v1/music/play", #"{"playlist": "p", "zones": ["kitchen"]}"#)
        #expect(played.status == 202, "\(played.text)")
        let added = try t.request("POST", "/api/v1/music/queue/add", #"{"songs": ["x"]}"#)
        #expect(added.status == 409, "\(added.text.prefix(300))")
        #expect(
            added.text.contains(
                "adding 1 songs would make the queue \(most + 1) songs long; a queue holds at most \(most)"),
            "\(added.text.prefix(300))")
        server.route("/rest/getPlaylist", Self.playlist(most + 1))
        let longer = try t.request("POST", "/api/v1/music/play", #"{"playlist": "p", "zones": ["kitchen"]}"#)
        #expect(longer.status == 409, "\(longer.text)")
        #expect(longer.text.contains("\(most + 1) songs; a queue holds at most \(most)"), "\(longer.text)")
    }

    /// A saved queue longer than a queue holds (a state file written before the limit; here 12,000
    /// songs, at song 11,000) is cut to the 10,000 around its song at start, and `music/resume`
    /// plays it there. Refused whole, every resume was answered 409, though it resumed before.
    @Test func aSavedQueueLongerThanAQueueHoldsIsCutAndResumes() throws {
        let most = MusicControl.mostQueuedSongs
        let release = Semaphore()
        let (server, music) = try Self.heldStreamServer(songs: 1) { _ = release.wait(nanoseconds: 30_000_000_000) }
        defer {
            release.post()
            server.stop()
        }
        let dir = TestDirectory.make("long-saved-queue")
        let queue = SavedQueue(
            songs: (0..<(most + 2_000)).map { Song(id: "s\($0)", title: "Song \($0)", duration: 100) }, index: 11_000,
            position: 5, zones: ["kitchen"], volume: 1, playing: false)
        let file = try JSONEncoder.baton.encode(SavedState(queue: queue))
        try FileIO.writeAtomically(Array(file), to: dir + "/state.json").get()
        let t = try TestDaemon(music: music, stateDir: dir)
        defer { t.stop() }
        try Self.expectCutAndResumed(t, most: most)
    }

    /// The server's play queue (`getPlayQueue`) longer than a queue holds — another client left
    /// 12,000 songs, at song 11,000 — is cut the same way, and `music/resume` plays it.
    @Test func aServerQueueLongerThanAQueueHoldsIsCutAndResumes() throws {
        let most = MusicControl.mostQueuedSongs
        let release = Semaphore()
        let (server, music) = try Self.heldStreamServer(songs: 1) { _ = release.wait(nanoseconds: 30_000_000_000) }
        defer {
            release.post()
            server.stop()
        }
        let entries = (0..<(most + 2_000)).map { #"{"id": "s\#($0)", "title": "Song \#($0)", "duration": 100}"# }
        let playQueue =
            #", "playQueue": {"entry": ["# + entries.joined(separator: ",")
            + #"], "current": "s11000", "position": 5000, "changedBy": "phone"}"#
        server.route("/rest/getPlayQueue", .init(contentType: "application/json", body: Self.subsonicOK(playQueue)))
        let t = try TestDaemon(music: music, stateDir: TestDirectory.make("long-server-queue"))
        defer { t.stop() }
        #expect(waitUntil(seconds: 10) { (try? t.status().savedQueue) != nil }, "the server's queue is restored")
        try Self.expectCutAndResumed(t, most: most)
    }

    /// The saved queue is the `most` songs around song 11,000 of 12,000 (songs 2,000…11,999), and
    /// `music/resume` plays it from that song.
    static func expectCutAndResumed(_ t: TestDaemon, most: Int) throws {
        let saved = try #require(try t.status().savedQueue, "the queue is restored")
        #expect(saved.queueLength == most && saved.trackIndex == 9_000, "\(saved)")
        #expect(saved.track.title == "Song 11000" && saved.positionSeconds == 5, "\(saved)")
        let resumed = try t.request("POST", "/api/v1/music/resume", "{}")
        #expect(resumed.status == 202, "\(resumed.text.prefix(300))")
        let source = try #require(try t.status().sources.first { $0.class == "music" }, "the music plays")
        #expect(source.queueLength == most, "\(source)")
    }

    /// Music granted but not heard yet — its stream still coming (here held by the server) — is
    /// saved as not playing: `playing` says whether the queue was heard when saved. The arbiter's
    /// grant alone made it `playing` from the first save after a play, a resume or a seek.
    @Test func musicNotHeardYetIsNotSavedAsPlaying() throws {
        let release = Semaphore()
        let (server, music) = try Self.heldStreamServer(songs: 3) { _ = release.wait(nanoseconds: 30_000_000_000) }
        defer {
            release.post()
            server.stop()
        }
        let t = try TestDaemon(music: music, stateDir: TestDirectory.make("not-heard-state"))
        defer { t.stop() }
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"playlist": "p", "zones": ["kitchen"]}"#).object["id"])
        #expect(waitUntil(seconds: 5) { server.requests.contains { $0.hasPrefix("/rest/stream") } })
        #expect(waitUntil(seconds: 5) { (try? t.status().savedQueue) != nil }, "saved")
        // The monitor saves about once a second: over 2 s, each save says the same.
        let since = ContinuousClock.now
        while ContinuousClock.now - since < .seconds(2) {
            let status = try t.status()
            #expect(status.sources.first { $0.id == id }?.state == "starting")
            #expect(status.savedQueue?.playing == false, "\(String(describing: status.savedQueue))")
            usleep(100_000)
        }
    }

    /// A Subsonic server whose `getPlayQueue` answers a queue of two songs (the second current, 5 s
    /// in) once `answer` is posted, and the daemon started on it with an empty state-dir.
    struct HeldServerQueue {
        let server: SlowHTTPServer
        let answer = Semaphore()
        let stateDir = TestDirectory.make("server-queue-state")
        let music: MusicConfig
        let t: TestDaemon

        init() throws {
            server = try SlowHTTPServer()
            let answer = self.answer
            let body = #"""
                {"subsonic-response": {"status": "ok", "version": "1.16.1", "playQueue": {
                  "entry": [{"id": "s1", "title": "One", "duration": 100}, {"id": "s2", "title": "Two", "duration": 120}],
                  "current": "s2", "position": 5000, "changedBy": "phone"}}}
                """#
            server.route(
                "/rest/getPlayQueue",
                .init(
                    contentType: "application/json", body: Array(body.utf8),
                    beforeLastChunk: { _ = answer.wait(nanoseconds: 20_000_000_000) }))
            // A server answers its API: a 404 for a song is then the song's absence, not a proxy
            // whose server behind it is down (which is waited out up to `music.retry.limit`).
            server.route(
                "/rest/ping",
                .init(
                    contentType: "application/json",
                    body: Array(#"{"subsonic-response": {"status": "ok", "version": "1.16.1"}}"#.utf8)))
            let dir = TestDirectory.make("server-queue")
            _ = FileIO.writeAtomically(Array("secret\n".utf8), to: "\(dir)/password")
            music = MusicConfig(
                subsonic: .init(url: server.url(""), user: "baton", password: .file("\(dir)/password"), format: .raw))
            t = try TestDaemon(music: music, stateDir: stateDir)
        }

        /// Lets the server answer, stops the daemon and the server.
        func stop() {
            for _ in 0..<4 { answer.post() }
            t.stop()
            server.stop()
        }

        /// The answer to a request made on a thread of its own: its status and when it came.
        final class Answer: Sendable {
            private let value = Mutex<(status: Int, at: Int)?>(nil)
            var answer: (status: Int, at: Int)? { value.withLock { $0 } }
            fileprivate func set(_ status: Int) { value.withLock { $0 = (status, monotonicNanoseconds()) } }
        }

        /// Sends `music/resume` on a thread of its own (it may wait for the server's queue).
        func resumeMeanwhile() -> Answer {
            let answer = Answer()
            let port = t.port
            OSThread.detach(name: "resume") {
                let r = try? RawClient(port: port)
                r?.send(
                    "POST /api/v1/music/resume HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                        + "Content-Type: application/json\r\nContent-Length: 0\r\n\r\n")
                answer.set((try? r?.readResponse())?.status ?? 0)
            }
            return answer
        }

        /// The daemon has asked the server for its queue (within 5 s).
        func asked() -> Bool {
            waitUntil(seconds: 5) { server.requests.contains { $0.hasPrefix("/rest/getPlayQueue") } }
        }

        /// `state.json` in `directory`, as text ("" when there is none).
        static func stateText(_ directory: String) -> String {
            String(decoding: ((try? FileIO.read(directory + "/state.json").get()) ?? nil) ?? [], as: UTF8.self)
        }

        /// The state file in `directory` says the server's queue is to be asked again, and a daemon
        /// started on it (with `music`) has that queue. Stops it and the server.
        func nextStartHasTheQueue(music: MusicConfig, stateDir directory: String) throws {
            let written = Self.stateText(directory)
            #expect(written.contains("askServerQueue"), "\(written)")
            for _ in 0..<4 { answer.post() }  // from now on the server answers
            let again = try TestDaemon(music: music, stateDir: directory)
            defer {
                again.stop()
                server.stop()
            }
            #expect(waitUntil(seconds: 5) { (try? again.status().savedQueue) != nil })
            #expect(try again.status().savedQueue?.track.title == "Two")
        }
    }

    /// The server's queue names as current a song no longer in it (deleted from the library): the
    /// queue is restored at its first song's start, not 5 s into it — the position is the song's
    /// that was current.
    @Test func aServerQueueWhoseCurrentSongIsGoneStartsAtItsStart() throws {
        let server = try SlowHTTPServer()
        defer { server.stop() }
        let body = #"""
            {"subsonic-response": {"status": "ok", "version": "1.16.1", "playQueue": {
              "entry": [{"id": "s1", "title": "One", "duration": 100}, {"id": "s2", "title": "Two", "duration": 120}],
              "current": "s9", "position": 5000, "changedBy": "phone"}}}
            """#
        server.route("/rest/getPlayQueue", .init(contentType: "application/json", body: Array(body.utf8)))
        let dir = TestDirectory.make("server-queue-gone")
        _ = FileIO.writeAtomically(Array("secret\n".utf8), to: "\(dir)/password")
        let music = MusicConfig(
            subsonic: .init(url: server.url(""), user: "baton", password: .file("\(dir)/password"), format: .raw))
        let t = try TestDaemon(music: music, stateDir: TestDirectory.make("server-queue-gone-state"))
        defer { t.stop() }
        #expect(waitUntil(seconds: 5) { (try? t.status().savedQueue) != nil })
        let saved = try #require(try t.status().savedQueue)
        #expect(saved.track.title == "One" && saved.positionSeconds == 0, "\(saved)")
    }

    /// With no state file, the queue the server keeps (`getPlayQueue`) is asked in the background:
    /// batond starts and rings a doorbell while the server holds the answer, and status shows no
    /// saved queue until it comes. It comes after the first save wrote the file without it: it is
    /// written at the next (and so kept for the next start). Before, the start waited for the
    /// server (up to its request timeout: 30 s of no API and no doorbell).
    @Test func theServersQueueIsAskedWithoutHoldingTheStart() throws {
        let held = try HeldServerQueue()
        let t = held.t
        #expect(held.asked())
        #expect(try t.status().savedQueue == nil)
        _ = try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k", "zones": ["kitchen"]}"#)
        #expect(t.waitForEvent("granted", source: "announce-1", seconds: 5) != nil)
        #expect(waitUntil(seconds: 5) { access(held.stateDir + "/state.json", R_OK) == 0 }, "the first save")
        held.answer.post()
        #expect(waitUntil(seconds: 5) { (try? t.status().savedQueue) != nil })
        let saved = try #require(try t.status().savedQueue)
        #expect(saved.track.title == "Two" && saved.trackIndex == 1 && saved.queueLength == 2, "\(saved)")
        held.stop()
        let written = HeldServerQueue.stateText(held.stateDir)
        #expect(written.contains(#""s2""#) && written.contains("Two"), "\(written)")
    }

    /// The queue batond restored (the server's own here; the state file's goes the same way) is not
    /// sent back with `savePlayQueue` while no music of this run has played: it was, at the first
    /// save after the start, over whatever another client had saved since.
    @Test func aRestoredQueueIsNotSentBackToTheServer() throws {
        let held = try HeldServerQueue()
        defer { held.stop() }
        #expect(held.asked())
        held.answer.post()
        #expect(waitUntil(seconds: 5) { (try? held.t.status().savedQueue) != nil })
        // Written at the next save, which is when it was sent back.
        #expect(waitUntil(seconds: 5) { HeldServerQueue.stateText(held.stateDir).contains(#""s2""#) })
        let sent = waitUntil(seconds: 3) { held.server.requests.contains { $0.hasPrefix("/rest/savePlayQueue") } }
        #expect(!sent, "\(held.server.requests.filter { $0.hasPrefix("/rest/savePlayQueue") })")
    }

    /// `api-key-file`: with a server that offers `apiKeyAuthentication`, batond's requests carry the
    /// key and no user or password. The option was read and never used: a server that takes keys
    /// only refused every request. A key file that cannot be read is a clear error.
    @Test func theAPIKeyFileIsUsed() throws {
        let server = try SlowHTTPServer()
        defer { server.stop() }
        let ok = #"{"subsonic-response": {"status": "ok", "version": "1.16.1", "openSubsonic": true"#
        server.route(
            "/rest/getOpenSubsonicExtensions",
            .init(
                contentType: "application/json",
                body: Array(
                    (ok + #", "openSubsonicExtensions": [{"name": "apiKeyAuthentication", "versions": [1]}]}}"#).utf8)))
        server.route(
            "/rest/getRandomSongs",
            .init(
                contentType: "application/json",
                body: Array((ok + #", "randomSongs": {"song": [{"id": "s1", "title": "One"}]}}}"#).utf8)))
        let dir = TestDirectory.make("api-key")
        // Empty: a server that takes keys never sees the password (an empty one was refused).
        _ = FileIO.writeAtomically([], to: "\(dir)/password")
        _ = FileIO.writeAtomically(Array("the-key-123\n".utf8), to: "\(dir)/key")
        var music = MusicConfig(
            subsonic: .init(url: server.url(""), user: "baton", password: .file("\(dir)/password"), format: .raw))
        music.subsonic.apiKeyFile = "\(dir)/key"
        let t = try TestDaemon(music: music)
        defer { t.stop() }
        let random = try t.request("GET", "/api/v1/library/random?size=1")
        #expect(random.status == 200 && random.text.contains("One"), "\(random.status) \(random.text)")
        let asked = try #require(server.requests.last { $0.hasPrefix("/rest/getRandomSongs") })
        #expect(asked.contains("apiKey=the-key-123") && !asked.contains("u=baton"), "\(asked)")

        var missing = music
        missing.subsonic.apiKeyFile = "\(dir)/no-such-key"
        let u = try TestDaemon(music: missing)
        defer { u.stop() }
        let refused = try u.request("GET", "/api/v1/library/random?size=1")
        #expect(refused.status == 503, "\(refused.status) \(refused.text)")
        #expect(refused.text.contains("music.subsonic.api-key-file \(dir)/no-such-key: cannot read"), "\(refused.text)")
    }

    /// A server's answer larger than any the client takes (16 MiB) is refused with what it was, not
    /// read whole and parsed: 64 MiB were, copied and parsed twice.
    @Test func anAnswerTooLargeIsRefused() throws {
        let server = try SlowHTTPServer()
        defer { server.stop() }
        let ok = #"{"subsonic-response": {"status": "ok", "version": "1.16.1""#
        let pad = String(repeating: " ", count: 17 << 20)
        server.route(
            "/rest/getRandomSongs",
            .init(
                contentType: "application/json",
                body: Array((ok + #", "randomSongs": {"song": [{"id": "s1", "title": "One"}]}}"# + pad + "}").utf8)))
        let dir = TestDirectory.make("huge-answer")
        _ = FileIO.writeAtomically(Array("secret\n".utf8), to: "\(dir)/password")
        let t = try TestDaemon(
            music: MusicConfig(
                subsonic: .init(url: server.url(""), user: "baton", password: .file("\(dir)/password"), format: .raw)))
        defer { t.stop() }
        let random = try t.request("GET", "/api/v1/library/random?size=1")
        #expect(
            random.status == 502 && random.text.contains("larger than 16777216 bytes"),
            "\(random.status) \(random.text)")
    }

    /// The password changed on the server and then in batond's password file: used from the next
    /// request, against the real server, without a restart. The client was made once per `music:`
    /// section and kept the old password: every request was refused until batond restarted.
    @Test func aPasswordChangedInItsFileIsUsedWithoutARestart() throws {
        var music = try TestSubsonic.music()
        guard case .file(let real) = music.subsonic.password else { throw TestSetupError(message: "not a file") }
        let right = try #require(FileIO.firstLine(real))
        let file = "\(TestDirectory.make("changed-password"))/password"
        try FileIO.writeAtomically(Array("not-\(right)\n".utf8), to: file).get()
        music.subsonic.password = .file(file)
        let t = try TestDaemon(music: music)
        defer { t.stop() }
        let refused = try t.request("GET", "/api/v1/library/search?q=Tone")
        #expect(refused.status != 200, "\(refused.status) \(refused.text)")
        try FileIO.writeAtomically(Array("\(right)\n".utf8), to: file).get()
        let found = try t.request("GET", "/api/v1/library/search?q=Tone")
        #expect(found.status == 200 && found.text.contains("Tone 440 FLAC"), "\(found.status) \(found.text)")
        // Emptied for a moment (an editor saving in place): the last password read is kept.
        try FileIO.writeAtomically([], to: file).get()
        let meanwhile = try t.request("GET", "/api/v1/library/search?q=Tone")
        #expect(meanwhile.status == 200, "\(meanwhile.status) \(meanwhile.text)")
    }

    /// The server's queue is another client's word, checked as the state file is: a position of
    /// 2^63 ms trapped batond at its first save (`Int64(position * 1000)`), and -1 ms was saved
    /// and then dropped the whole queue at the next start. Either plays from the song's start.
    @Test func aServerQueueAtNoPlaceInATrackPlaysFromTheStart() throws {
        for position in ["9223372036854775807", "-1"] {
            let server = try SlowHTTPServer()
            defer { server.stop() }
            let body = #"""
                {"subsonic-response": {"status": "ok", "version": "1.16.1", "playQueue": {
                  "entry": [{"id": "s1", "title": "One", "duration": 100}], "current": "s1",
                  "position": \#(position)}}}
                """#
            server.route("/rest/getPlayQueue", .init(contentType: "application/json", body: Array(body.utf8)))
            let dir = TestDirectory.make("server-queue-bad")
            _ = FileIO.writeAtomically(Array("secret\n".utf8), to: "\(dir)/password")
            let music = MusicConfig(
                subsonic: .init(url: server.url(""), user: "baton", password: .file("\(dir)/password"), format: .raw))
            let stateDir = dir + "/state"
            let t = try TestDaemon(music: music, stateDir: stateDir)
            #expect(waitUntil(seconds: 5) { (try? t.status().savedQueue) != nil }, "\(position)")
            #expect(try t.status().savedQueue?.positionSeconds == 0, "\(position)")
            #expect(waitUntil(seconds: 5) { HeldServerQueue.stateText(stateDir).contains("One") }, "saved")
            #expect(try t.status().savedQueue?.track.title == "One", "still running after its save")
            t.stop()
            let again = try TestDaemon(music: music, stateDir: stateDir)
            defer { again.stop() }
            #expect(try again.status().savedQueue?.track.title == "One", "\(position): kept for the next start")
        }
    }

    /// batond stopped before the server answered its first start's `getPlayQueue`: the state file
    /// says so, and the next start asks the server again and has its queue. Before, the file said
    /// "no queue" and the server was never asked again.
    @Test func aServerQueueNotHadIsAskedAgainAtTheNextStart() throws {
        let held = try HeldServerQueue()
        #expect(held.asked())
        held.t.stop()  // the request ends with the stop; the server never answered it
        try held.nextStartHasTheQueue(music: held.music, stateDir: held.stateDir)
    }

    /// A password file that cannot be read at a first start: the server's queue could not be asked,
    /// and the file says so; once the password is there, the next start has the queue. Before, an
    /// unreadable password counted as "the server has no queue", never asked again.
    @Test func aServerQueueNotAskedForWantOfThePasswordIsAskedOnceItIsThere() throws {
        let held = try HeldServerQueue()  // a first daemon, stopped at once: its own queue not needed
        for _ in 0..<8 { held.answer.post() }
        held.t.stop()
        let stateDir = TestDirectory.make("no-password-state")
        let password = TestDirectory.make("no-password") + "/password"
        var music = held.music
        music.subsonic.password = .file(password)  // not there yet
        let first = try TestDaemon(music: music, stateDir: stateDir)
        first.daemon.music.awaitServerQueue()  // failed, not still being asked, when it stops
        first.stop()
        _ = FileIO.writeAtomically(Array("secret\n".utf8), to: password)
        try held.nextStartHasTheQueue(music: music, stateDir: stateDir)
    }

    /// A `music/resume` sent while the server's queue is on its way waits for it, then plays it.
    @Test func aResumeWaitsForTheServersQueue() throws {
        let held = try HeldServerQueue()
        defer { held.stop() }
        #expect(held.asked())
        let resumed = held.resumeMeanwhile()
        usleep(300_000)
        let released = monotonicNanoseconds()
        held.answer.post()
        #expect(waitUntil(seconds: 10) { resumed.answer != nil })
        let r = try #require(resumed.answer)
        #expect(r.status == 202 && r.at >= released, "answered \(r.status) before the server's queue came")
        // The queue's current song, the second: this server does not stream it, which says which
        // (the first error is about it: a resume from the first song would fail that one first).
        func errors() -> [String] {
            held.t.daemon.events.recent().filter { $0.type == "stream-error" }.map { $0.reason ?? "" }
        }
        #expect(waitUntil(seconds: 10) { !errors().isEmpty })
        #expect(errors().first?.contains("Two (s2)") == true, "\(errors())")
    }

    /// Music started while a resume waits for the server's queue is what that resume resumes: the
    /// old queue is not started on top of it.
    @Test func aResumeWaitingForTheServersQueueResumesMusicStartedMeanwhile() throws {
        let held = try HeldServerQueue()
        defer { held.stop() }
        #expect(held.asked())
        let resumed = held.resumeMeanwhile()
        usleep(300_000)
        let play = try held.t.json("POST", "/api/v1/music/play", #"{"sound": "music440", "zones": ["kitchen"]}"#)
        #expect(play.status == 202)
        held.answer.post()
        #expect(waitUntil(seconds: 10) { resumed.answer != nil })
        #expect(resumed.answer?.status == 200)
        let music = try held.t.status().sources.filter { $0.class == "music" }
        #expect(music.map(\.id) == [play.object["id"]], "\(music.map(\.id))")
    }

    /// A transcode (`format: opus`, the default) whose connection ends midway: the server sends
    /// the song again from its start (the transcode was abandoned: nothing cached), a new encode
    /// whose bytes do not follow the old ones. The decoder takes it from its first byte and drops
    /// what it already gave: the 330 Hz tone goes on across the join with its phase unbroken (to a
    /// tenth of a frame's phase step), no stream error. Before, the new encode was cut at the old
    /// byte count and spliced on, which ended the track there. Cut after 80 kB (2.5 s in) and
    /// after 1 kB (within the Opus headers: the first decoder is being made when the stream
    /// begins again).
    @Test(arguments: [80_000, 1_000])
    func aTranscodeSentAgainFromItsStartGoesOnWithoutASeam(cutAfter bytes: Int) throws {
        var music = try TestSubsonic.music(format: .opus)
        // About 30 kB/s, at a rate this server has not transcoded this song at yet (its cache is
        // by song and rate: a cached one would answer the retry 206 with the same bytes).
        music.subsonic.maxBitrate = try TestSubsonic.freshTranscodeRate()
        let song = try Self.longTone(music)
        let proxy = try SubsonicRefusingProxy(
            upstreamURL: music.subsonic.url, refusing: [], cutting: [song: bytes])
        let (t, id) = try Self.play(song, through: proxy, music: music)
        let granted = try #require(t.waitForEvent("granted", source: id, seconds: 10)?.zoneFrames?["kitchen"])
        #expect(waitUntil(seconds: 20) { position(t, id) > 6 }, "played on past the join")
        let answers = proxy.streamStatuses
        #expect(
            answers.count == 2 && answers.allSatisfy { $0.contains(" 200 ") },
            "\(answers): not two new encodes (a transcode cached at this rate? restart the test server)")
        let s = try #require(try t.status().sources.first { $0.id == id })
        #expect(s.streamError == nil, "\(s.streamError ?? "")")
        #expect(!t.daemon.events.recent().contains { $0.type == "stream-error" })
        t.stop()
        try Self.expectUnbroken330HzTone(t.left("kitchen"), after: granted)
    }

    /// The server answers a resumed download of the original file (`format: raw`) with a 206 that
    /// begins 1 000 bytes before what was asked (its `Content-Range` says so: a server rounding
    /// ranges down). Those bytes are had, and skipped: the 330 Hz tone goes on across the join
    /// with its phase unbroken. They went to the decoder a second time — 250 frames played twice.
    @Test func aRangeAnsweredFromEarlierIsJoinedWithoutASeam() throws {
        let music = try TestSubsonic.music(format: .raw)
        let song = try Self.longTone(music)
        let proxy = try SubsonicRefusingProxy(
            upstreamURL: music.subsonic.url, refusing: [], cutting: [song: 400_000], rewinding: [song: 1_000])
        let (t, id) = try Self.play(song, through: proxy, music: music)
        let granted = try #require(t.waitForEvent("granted", source: id, seconds: 10)?.zoneFrames?["kitchen"])
        #expect(waitUntil(seconds: 20) { position(t, id) > 6 }, "played on past the join")
        let answers = proxy.streamStatuses
        #expect(answers.count == 2 && answers.last?.contains(" 206 ") == true, "\(answers)")
        #expect(!t.daemon.events.recent().contains { $0.type == "stream-error" })
        t.stop()
        try Self.expectUnbroken330HzTone(t.left("kitchen"), after: granted)
    }

    /// The server answers a resumed download of the original file (`format: raw`) in parts of
    /// 100 kB, each a 206 whose `Content-Range` gives the file's whole length (a server or a proxy
    /// that answers a range in parts). The rest is asked for after each: the song plays on past
    /// the first part, its 330 Hz tone unbroken, without a stream error. The first part was taken
    /// as the song's end: the track ended 2.6 s in, "ended early".
    @Test func aRangeAnsweredInPartsIsAskedForTheRest() throws {
        let music = try TestSubsonic.music(format: .raw)
        let song = try Self.longTone(music)
        let proxy = try SubsonicRefusingProxy(
            upstreamURL: music.subsonic.url, refusing: [], cutting: [song: 400_000],
            answeringInParts: [song: 100_000])
        let (t, id) = try Self.play(song, through: proxy, music: music)
        let granted = try #require(t.waitForEvent("granted", source: id, seconds: 10)?.zoneFrames?["kitchen"])
        #expect(waitUntil(seconds: 20) { position(t, id) > 6 }, "played on past the first part")
        let answers = proxy.streamStatuses
        #expect(answers.count >= 4 && answers.dropFirst().allSatisfy { $0.contains(" 206 ") }, "\(answers)")
        #expect(!t.daemon.events.recent().contains { $0.type == "stream-error" })
        t.stop()
        try Self.expectUnbroken330HzTone(t.left("kitchen"), after: granted)
    }

    /// A transcode the server gave up on midway, its answer ended in order (no error: curl and the
    /// decoder find an end): the track is said to have ended early, against its duration. It read
    /// as played to its end, without a word.
    @Test func aTranscodeThatEndsEarlyIsSaid() throws {
        var music = try TestSubsonic.music(format: .opus)
        music.subsonic.maxBitrate = try TestSubsonic.freshTranscodeRate()
        let song = try Self.longTone(music)
        let proxy = try SubsonicRefusingProxy(
            upstreamURL: music.subsonic.url, refusing: [], endingEarly: [song: 60_000])
        let (t, id) = try Self.play(song, through: proxy, music: music)
        defer { t.stop() }
        let said = try #require(t.waitForEvent("stream-error", source: id, seconds: 20)?.reason)
        #expect(
            said.hasPrefix("Long Tone 330 (\(song)): ended early: ") && said.contains(" of its 72 s came"), "\(said)")
    }

    /// A daemon on `music` through `proxy`, playing `song` in the kitchen: the daemon and the source's id.
    static func play(_ song: String, through proxy: SubsonicRefusingProxy, music: MusicConfig) throws -> (
        TestDaemon, id: String
    ) {
        var music = music
        music.subsonic.url = proxy.url
        let t = try TestDaemon(music: music)
        let play = try t.json("POST", "/api/v1/music/play", #"{"songs": ["\#(song)"], "zones": ["kitchen"]}"#)
        return (t, try #require(play.object["id"], "\(play)"))
    }

    /// The ID of the test server's "Long Tone 330" (72 s of 330 Hz), asked through a daemon on `music`.
    static func longTone(_ music: MusicConfig) throws -> String {
        let lookup = try TestDaemon(music: music)
        defer { lookup.stop() }
        let found = try JSONDecoder().decode(
            LibraryAndQueueTests.Songs.self,
            from: Data(try lookup.request("GET", "/api/v1/library/search?q=Long%20Tone").body)
        ).songs
        return try #require(found.first { $0.title == "Long Tone 330" }?.id)
    }

    /// The 330 Hz tone in `out` from its onset after frame `granted` is continuous for 5 s: its phase
    /// in 100 ms windows (33 whole periods), taken against the absolute frame, constant to a tenth
    /// of a frame's phase step (a seam moves it), its level kept.
    static func expectUnbroken330HzTone(_ out: [Float], after granted: Int) throws {
        let start = try #require(Signals.onset(Array(out[granted...]), threshold: 0.01)) + granted
        func phase(at start: Int) -> (phase: Double, level: Double) {
            var (s, c) = (0.0, 0.0)
            for n in start..<(start + 4_410) {
                let w = 2 * Double.pi * 330 * Double(n) / 44_100
                s += Double(out[n]) * sin(w)
                c += Double(out[n]) * cos(w)
            }
            return (atan2(c, s), 2 * (s * s + c * c).squareRoot() / 4_410)
        }
        let end = start + 44_100 * 5
        #expect(out.count >= end + 4_410, "5 s of music")
        let first = phase(at: start + 8_820)
        var worst = 0.0
        for at in stride(from: start + 8_820, to: min(end, out.count - 4_410), by: 2_205) {
            let p = phase(at: at)
            #expect(p.level > 0.05, "tone level \(p.level) at frame \(at)")
            var d = abs(p.phase - first.phase)
            if d > Double.pi { d = 2 * Double.pi - d }
            worst = max(worst, d)
        }
        let step = 2 * Double.pi * 330 / 44_100  // one frame's phase
        #expect(worst < step / 10, "the phase moved by \(worst / step) frames")
    }
}
