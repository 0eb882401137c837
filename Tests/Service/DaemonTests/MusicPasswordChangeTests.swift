import BatonConfig
import BatonTesting
import FoundationEssentials
import Testing

@testable import BatonDaemon

/// The music server's password changed while music plays (the server's, and `password-file`
/// rewritten to it, then a reload), against the real Subsonic test server behind
/// `SubsonicRefusingProxy`, which takes only the password it is told to.
@Suite(.ownThread) struct MusicPasswordChangeTests {
    /// The queue playing goes on with the new password: its next stream request and scrobble use
    /// the client made with it. The player kept the client it was made with: the track fetched
    /// after the change was refused "Subsonic error 40", and so was every one after it (the queue
    /// stopped after three), its scrobbles were dropped.
    @Test func theQueuePlayingTakesTheNewPassword() throws {
        let real = try TestSubsonic.music()
        guard case .file(let realFile) = real.subsonic.password,
            let realPassword = TextFile.read(realFile)?.split(separator: "\n").first.map(String.init)
        else { throw TestSetupError(message: "the test server's password file cannot be read") }
        let proxy = try SubsonicRefusingProxy(upstreamURL: real.subsonic.url, refusing: [])
        proxy.requirePassword("old secret", forwardingAs: realPassword)
        let file = TestDirectory.make("password-change") + "/password"
        TextFile.write(file, "old secret\n")
        var music = real
        music.subsonic.url = proxy.url
        music.subsonic.password = .file(file)
        let t = try TestDaemon(music: music)
        defer { t.stop() }
        let found = try JSONDecoder().decode(
            LibraryAndQueueTests.Songs.self, from: Data(try t.request("GET", "/api/v1/library/search?q=Tone").body)
        ).songs
        let ids = try ["Tone 440 FLAC", "Tone 550 MP3"].map { title in
            try #require(found.first { $0.title == title }?.id, "\(title)")
        }
        let id = try MusicSkipTests.play(t, ids[...], "kitchen")
        let source = { try? t.status().sources.first { $0.id == id } }
        #expect(waitUntil(seconds: 15) { (source()?.positionSeconds ?? 0) > 0.2 })
        #expect(waitUntil(seconds: 5) { !proxy.scrobbles.isEmpty }, "the first track's now-playing")
        let scrobbled = proxy.scrobbles.count

        TextFile.write(file, "new secret\n")
        proxy.requirePassword("new secret", forwardingAs: realPassword)
        #expect(t.daemon.apply(t.daemon.config).applied)
        // Fetched again from near its end (the seek's request), then the next track.
        #expect(try t.request("POST", "/api/v1/music/seek", #"{"position": 19}"#).status == 200)
        #expect(
            waitUntil(seconds: 15) {
                guard let now = source() else { return false }
                return now.track?.title == "Tone 550 MP3" && (now.positionSeconds ?? 0) > 0.5
            }, "the next track plays: \(String(describing: source()))")
        #expect(waitUntil(seconds: 5) { proxy.scrobbles.count > scrobbled }, "its now-playing reaches the server")
        let events = try t.events().map(\.type)
        #expect(!events.contains("stream-error"), "\(events)")
    }
}
