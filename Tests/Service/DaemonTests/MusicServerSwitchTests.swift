import BatonConfig
import BatonTesting
import OSThread
import Testing

@testable import BatonDaemon
@testable import ControlParts

/// A reload that points `music.subsonic` at another server (here the test server directly, then
/// through `SubsonicRefusingProxy`: another URL) drops what batond learnt of the old one.
@Suite(.ownThread) struct MusicServerSwitchTests {
    /// The daemon's config with the music server's URL changed to `url`.
    static func pointed(_ t: TestDaemon, at url: String) -> BatonConfiguration {
        var config = t.daemon.config
        config.music?.subsonic.url = url
        return config
    }

    /// The first server has no `savePlayQueue` (Supysonic): noticed, the queue is not mirrored
    /// there. After a reload to a server that has it, music played there is mirrored to it. The
    /// old server's lack was kept for the daemon's life: never mirrored until a restart.
    @Test func theQueueIsMirroredToTheNewServerAfterAReload() throws {
        let real = try TestSubsonic.music()
        let t = try TestDaemon(music: real)
        defer { t.stop() }
        let first = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"search": "Tone 440 FLAC", "zones": ["kitchen"]}"#).object[
                "id"])
        #expect(
            waitUntil(seconds: 15) { t.daemon.parts.music.lacksSavePlayQueue }, "Supysonic's lack is noticed")
        #expect(try t.request("POST", "/api/v1/music/stop", #"{"id": "\#(first)"}"#).status == 200)
        let proxy = try SubsonicRefusingProxy(upstreamURL: real.subsonic.url, refusing: [], keepingPlayQueue: true)
        #expect(t.daemon.apply(Self.pointed(t, at: proxy.url)).applied)
        let second = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"search": "Tone 550 MP3", "zones": ["kitchen"]}"#).object[
                "id"])
        var song: String?
        #expect(
            waitUntil(seconds: 15) {
                song = try? t.status().sources.first { $0.id == second }?.track?.id
                return song != nil
            })
        #expect(
            waitUntil(seconds: 15) { proxy.savedQueues.contains { $0.current == song } },
            "mirrored to the new server: \(proxy.savedQueues)")
    }

    /// Music still playing across a reload to another server goes on with the server it started
    /// on, and its queue (that server's song ids) is not mirrored to the new one: it was, at the
    /// next save, over the queue the user had saved there.
    @Test func musicPlayingAcrossTheSwitchIsNotMirroredToTheNewServer() throws {
        let real = try TestSubsonic.music()
        let t = try TestDaemon(music: real)
        defer { t.stop() }
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"search": "Tone 440 FLAC", "zones": ["kitchen"]}"#).object[
                "id"])
        #expect(waitUntil(seconds: 15) { (try? t.status().sources.first { $0.id == id }?.state) == "playing" })
        let proxy = try SubsonicRefusingProxy(upstreamURL: real.subsonic.url, refusing: [], keepingPlayQueue: true)
        #expect(t.daemon.apply(Self.pointed(t, at: proxy.url)).applied)
        // The monitor saves about once a second: a save and its mirror would have come by now.
        #expect(!waitUntil(seconds: 3) { !proxy.savedQueues.isEmpty }, "mirrored: \(proxy.savedQueues)")
        #expect((try? t.status().sources.first { $0.id == id }?.state) == "playing", "the music went on")
    }

    /// The saved queue records the server its songs are from: after a restart on another server
    /// (here the proxy's URL) `music/resume` is refused, naming both, rather than sending the old
    /// server's song ids to the new one (each failed as "song not found", and the music gave up
    /// after three). On the same server it plays on, and so does a queue saved before Baton kept
    /// its server, on any.
    @Test func aQueueSavedFromAnotherServerIsNotResumed() throws {
        let real = try TestSubsonic.music()
        let dir = TestDirectory.make("server-switch-state")
        let t = try TestDaemon(music: real, stateDir: dir)
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"search": "Tone 440 FLAC", "zones": ["kitchen"]}"#).object[
                "id"])
        #expect(waitUntil(seconds: 15) { (try? t.status().sources.first { $0.id == id }?.state) == "playing" })
        t.stop()
        let proxy = try SubsonicRefusingProxy(upstreamURL: real.subsonic.url, refusing: [])
        var other = real
        other.subsonic.url = proxy.url
        let elsewhere = try TestDaemon(music: other, stateDir: dir)
        #expect(try elsewhere.status().savedQueue != nil)
        let refused = try elsewhere.request("POST", "/api/v1/music/resume", "{}")
        #expect(refused.status == 409, "\(refused.text)")
        #expect(
            refused.text.contains("the saved queue is from \(real.subsonic.url) as baton")
                && refused.text.contains("music/play to start anew"), "\(refused.text)")
        #expect(try elsewhere.status().sources.isEmpty, "nothing sent to the other server")
        elsewhere.stop()
        let again = try TestDaemon(music: real, stateDir: dir)
        #expect(try again.request("POST", "/api/v1/music/resume", "{}").status == 202)
        again.stop()
        // A file written before the queue kept its server plays on the server configured.
        let store = StateStore(directory: dir)
        var older = try #require(try store.load().get())
        #expect(older.queue?.server == SavedQueue.Server(url: real.subsonic.url, user: "baton"))
        older.queue?.server = nil
        #expect((try? store.save(older).get()) != nil)
        #expect(TextFile.read(dir + "/state.json")?.contains("\"server\"") == false)
        let unmarked = try TestDaemon(music: other, stateDir: dir)
        defer { unmarked.stop() }
        #expect(try unmarked.request("POST", "/api/v1/music/resume", "{}").status == 202)
    }

    /// The same server written otherwise (a trailing `/`, the host in capitals, the default port)
    /// is not another: the saved queue resumes, and a reload to it keeps what was learnt of it.
    /// Compared as written, `music/resume` answered 409 "the saved queue is from …", and the
    /// reload said "the server is now …" and forgot Supysonic's lack of `savePlayQueue`.
    @Test func theSameServerWrittenOtherwiseIsNotAnother() throws {
        let real = try TestSubsonic.music()
        let dir = TestDirectory.make("server-same-state")
        let t = try TestDaemon(music: real, stateDir: dir)
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"search": "Tone 440 FLAC", "zones": ["kitchen"]}"#).object[
                "id"])
        #expect(waitUntil(seconds: 15) { (try? t.status().sources.first { $0.id == id }?.state) == "playing" })
        #expect(
            waitUntil(seconds: 15) { t.daemon.parts.music.lacksSavePlayQueue }, "Supysonic's lack is noticed")
        let slashed = "HTTP://" + real.subsonic.url.dropFirst("http://".count) + "/"
        #expect(t.daemon.apply(Self.pointed(t, at: slashed)).applied)
        _ = try t.daemon.parts.music.context(t.daemon.config)
        #expect(t.daemon.parts.music.lacksSavePlayQueue, "what was learnt of the server is kept")
        t.stop()
        var same = real
        same.subsonic.url = slashed
        let again = try TestDaemon(music: same, stateDir: dir)
        defer { again.stop() }
        let resumed = try again.request("POST", "/api/v1/music/resume", "{}")
        #expect(resumed.status == 202, "\(resumed.text)")
    }

    /// A caller holding the configuration from before the reload (a cover asked then, a save queued
    /// then) gets a client of its own, and leaves the new server's as it is: it switched the
    /// connection back to the old server, dropping what was kept for the new one, and the next
    /// caller switched it again.
    @Test func aCallerWithTheOldConfigurationDoesNotSwitchBack() throws {
        let real = try TestSubsonic.music()
        let t = try TestDaemon(music: real)
        defer { t.stop() }
        let before = t.daemon.config
        let proxy = try SubsonicRefusingProxy(upstreamURL: real.subsonic.url, refusing: [])
        #expect(t.daemon.apply(Self.pointed(t, at: proxy.url)).applied)
        let music = t.daemon.parts.music
        let now = try music.context(t.daemon.config).client
        let stale = try music.context(before).client
        #expect(stale.config.url == real.subsonic.url, "the stale caller's own server")
        #expect(try music.context(t.daemon.config).client === now, "the new server's client stands")
    }

    /// A submission the first server could not take (503) is kept for it, not sent to the server
    /// a reload points batond at: its song id is the old server's (another song there, or none).
    /// It was sent to the new one with the first scrobble that went through.
    @Test func submissionsKeptForTheOldServerAreNotSentToTheNewOne() throws {
        let real = try TestSubsonic.music()
        let old = try SubsonicRefusingProxy(upstreamURL: real.subsonic.url, refusing: [])
        old.refusesScrobbles.store(true, ordering: .releasing)
        var music = real
        music.subsonic.url = old.url
        let t = try TestDaemon(music: music)
        defer { t.stop() }
        _ = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"search": "Gapless Part 1", "zones": ["kitchen"]}"#).object[
                "id"])
        #expect(waitUntil(seconds: 15) { old.scrobblesRefused.contains { $0.submission } })
        #expect(waitUntil(seconds: 5) { !t.daemon.parts.music.submissions.waiting.isEmpty }, "kept")
        let new = try SubsonicRefusingProxy(upstreamURL: real.subsonic.url, refusing: [])
        #expect(t.daemon.apply(Self.pointed(t, at: new.url)).applied)
        _ = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"search": "Tone 440 FLAC", "zones": ["kitchen"]}"#).object[
                "id"])
        #expect(waitUntil(seconds: 15) { new.scrobbles.contains { !$0.submission } }, "now playing on the new server")
        #expect(
            !waitUntil(seconds: 2) { new.scrobbles.contains { $0.submission } },
            "the old server's submission is not sent to the new one: \(new.scrobbles)")
        #expect(t.daemon.parts.music.submissions.waiting.isEmpty)
    }

    /// Covers are kept on disk by server: after a reload to another server, its cover `al-1` is
    /// asked of it, not the old server's `al-1` shown from the cache (the wrong art).
    @Test func coversAreKeptByServer() throws {
        let real = try TestSubsonic.music()
        let old = try SubsonicRefusingProxy(
            upstreamURL: real.subsonic.url, refusing: [], coverArt: ("image/png", "old"))
        let new = try SubsonicRefusingProxy(
            upstreamURL: real.subsonic.url, refusing: [], coverArt: ("image/png", "new"))
        var music = real
        music.subsonic.url = old.url
        let t = try TestDaemon(music: music, stateDir: TestDirectory.make("covers-by-server"))
        defer { t.stop() }
        #expect(try t.request("GET", "/api/v1/library/cover/al-1").text == "old")
        #expect(t.daemon.apply(Self.pointed(t, at: new.url)).applied)
        #expect(try t.request("GET", "/api/v1/library/cover/al-1").text == "new")
        #expect(t.daemon.apply(Self.pointed(t, at: old.url)).applied)
        #expect(try t.request("GET", "/api/v1/library/cover/al-1").text == "old")
    }
}
