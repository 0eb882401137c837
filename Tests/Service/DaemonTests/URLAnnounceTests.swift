import BatonConfig
import BatonTesting
import Glibc
import OSThread
import Synchronization
import Testing

@testable import BatonDaemon
@testable import BatonService
@testable import ControlParts
@testable import Engine

/// Announcements from a URL (Home Assistant's TTS), served by a slow HTTP server on 127.0.0.1 and
/// checked in the zone's output file.
@Suite(.serialized, .ownThread) struct URLAnnounceTests {
    static let allowLoopback = AnnounceConfig(allowURLHosts: ["127.0.0.1"])

    /// A 1 kHz MP3 (4 s, stereo, 44.1 kHz, 96 kbit/s by default) made by ffmpeg, loud (about 0.5).
    static func toneMP3(seconds: Int = 4, bitrate: String = "96k") throws -> [UInt8] {
        let dir = TestDirectory.make("url-announce")
        let made = Subprocess.run(
            "/usr/bin/ffmpeg",
            [
                "-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-f", "lavfi",
                "-i", "sine=frequency=1000:sample_rate=44100:duration=\(seconds)", "-af", "volume=4",
                "-ac", "2", "-b:a", bitrate, "\(dir)/tone.mp3",
            ])
        guard made.status == 0, case .success(let bytes?) = FileIO.read("\(dir)/tone.mp3") else {
            throw TestSetupError(message: "ffmpeg could not make the MP3: \(made.output)")
        }
        return bytes
    }

    /// The MP3 is sent over 3 s: its first tone sample is in the kitchen's output file before the
    /// server sent the last byte (playback starts while the file downloads), and the whole tone is
    /// heard; the source is labelled with the URL's last levels and plays once (`played`). While it
    /// downloads, it asks the monitor to look every 50 ms, not every 5 (as it did: 200 wake-ups a
    /// second for as long as a URL played).
    @Test func playsWhileItDownloads() throws {
        let server = try SlowHTTPServer()
        defer { server.stop() }
        let t = try TestDaemon(announce: Self.allowLoopback)
        let kitchen = try #require(t.files["kitchen"])
        let snapshot = Mutex<(samples: [Float], at: Double, nextTick: Int?)>(([], 0, nil))
        let daemon = t.daemon
        server.route(
            "/api/tts_proxy/hello.mp3",
            .init(
                contentType: "audio/mpeg", body: try Self.toneMP3(), seconds: 3, chunks: 30,
                beforeLastChunk: {
                    let now = SlowHTTPServer.now()
                    let left = Signals.channel(ALSATestRig.readS16(kitchen), 0, of: 2)
                    let tick = daemon.state.withLock { $0.playbacks.values.first?.source.nextTick }
                    snapshot.withLock { $0 = (left, now, tick) }
                }))
        let requested = SlowHTTPServer.now()
        let r = try t.json(
            "POST", "/api/v1/announce",
            #"{"url": "\#(server.url("/api/tts_proxy/hello.mp3"))", "zones": ["kitchen"]}"#)
        #expect(r.status == 202 && r.object["status"] == "playing", "\(r.object)")
        let id = try #require(r.object["id"])
        #expect(try t.status().sources.first { $0.id == id }?.sound == "url: tts_proxy/hello.mp3")
        let granted = try #require(t.waitForEvent("granted", source: id)?.zoneFrames?["kitchen"])
        #expect(t.waitForEvent("played", source: id, seconds: 15) != nil)
        let lastByte = try #require(server.lastByteAt("/api/tts_proxy/hello.mp3"))
        t.stop()
        let (before, snappedAt, tickWhileDownloading) = snapshot.withLock { $0 }
        #expect(snappedAt <= lastByte)
        #expect(tickWhileDownloading == 50_000_000, "\(tickWhileDownloading.map(String.init) ?? "nil") ns")
        // The first sample of the tone, as written before the last byte went out.
        let onset = before.count > granted ? Signals.onset(Array(before[granted...]), threshold: 0.05) : nil
        let first = try #require(onset, "no tone in the output before the last byte was sent").advanced(by: granted)
        let heardBeforeLastByte = Double(before.count - first) / 44_100
        let sinceRequest = snappedAt - requested
        print(
            "URL announce: first tone sample at output frame \(first); \(heardBeforeLastByte) s of it written "
                + "before the last byte was sent (\(sinceRequest) s after the request, \(lastByte - requested) s to the last byte)"
        )
        #expect(heardBeforeLastByte > 1.5, "only \(heardBeforeLastByte) s of tone before the last byte")
        let out = t.left("kitchen")
        #expect(Signals.windowedToneLevel(out[(first + 4_410)..<(first + 8_820)], frequency: 1000, rate: 44_100) > 0.3)
        // The whole 4 s: still the tone 3.5 s in.
        let late = first + 3 * 44_100 + 22_050
        #expect(out.count > late + 4_410)
        if out.count > late + 4_410 {
            #expect(Signals.windowedToneLevel(out[late..<(late + 4_410)], frequency: 1000, rate: 44_100) > 0.3)
        }
    }

    /// Each format HA's TTS engines hand out is decoded by its Content-Type, or by its bytes when
    /// the type says nothing: a 1 s 1 kHz tone heard in the kitchen (48 kHz Opus resampled).
    @Test(arguments: [
        ("ogg", "libopus", "audio/ogg"), ("wav", "pcm_s16le", "audio/wav"), ("flac", "flac", "audio/flac"),
        ("mp3", "libmp3lame", "application/octet-stream"), ("ogg", "libopus", nil),
    ])
    func decodesEachFormat(ext: String, codec: String, contentType: String?) throws {
        let dir = TestDirectory.make("url-format")
        let made = Subprocess.run(
            "/usr/bin/ffmpeg",
            [
                "-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-f", "lavfi",
                "-i", "sine=frequency=1000:sample_rate=48000:duration=1", "-af", "volume=4", "-ac", "1",
                "-c:a", codec, "\(dir)/tone.\(ext)",
            ])
        guard made.status == 0, case .success(let body?) = FileIO.read("\(dir)/tone.\(ext)") else {
            throw TestSetupError(message: "ffmpeg: \(made.output)")
        }
        let server = try SlowHTTPServer()
        defer { server.stop() }
        server.route("/tone", .init(contentType: contentType, body: body, seconds: 0.5, chunks: 5))
        let t = try TestDaemon(zones: [("kitchen", 44_100, nil)], announce: Self.allowLoopback)
        let r = try t.json("POST", "/api/v1/announce", #"{"url": "\#(server.url("/tone"))"}"#)
        #expect(r.status == 202, "\(ext) \(contentType ?? "none"): \(r.object)")
        let id = try #require(r.object["id"])
        let granted = try #require(t.waitForEvent("granted", source: id)?.zoneFrames?["kitchen"])
        #expect(t.waitForEvent("played", source: id) != nil)
        t.stop()
        let out = t.left("kitchen")
        let first = try #require(Signals.onset(Array(out[granted...]), threshold: 0.05)) + granted
        #expect(Signals.windowedToneLevel(out[(first + 4_410)..<(first + 8_820)], frequency: 1000, rate: 44_100) > 0.3)
    }

    /// A FLAC announcement with 64 damaged bytes in its middle plays to its end (libFLAC puts silence
    /// in the corrupt frame's place), and says so: a `stream-error` naming the URL, how many frames
    /// were skipped and where the first was, then `played`. It used to play on without a word.
    @Test func damagedAudioIsSaidAndPlayedOn() throws {
        let dir = TestDirectory.make("url-damaged")
        let made = Subprocess.run(
            "/usr/bin/ffmpeg",
            [
                "-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-f", "lavfi",
                "-i", "sine=frequency=1000:sample_rate=48000:duration=2", "-ac", "1", "\(dir)/tone.flac",
            ])
        guard made.status == 0, case .success(var body?) = FileIO.read("\(dir)/tone.flac") else {
            throw TestSetupError(message: "ffmpeg: \(made.output)")
        }
        for i in (body.count / 2)..<(body.count / 2 + 64) { body[i] ^= 0x5A }
        let server = try SlowHTTPServer()
        defer { server.stop() }
        server.route("/damaged.flac", .init(contentType: "audio/flac", body: body, seconds: 0.2, chunks: 4))
        let t = try TestDaemon(zones: [("kitchen", 48_000, nil)], announce: Self.allowLoopback)
        defer { t.stop() }
        let url = server.url("/damaged.flac")
        let id = try #require(try t.json("POST", "/api/v1/announce", #"{"url": "\#(url)"}"#).object["id"])
        let error = try #require(t.waitForEvent("stream-error", source: id), "no stream-error for the damage")
        let reason = error.reason ?? ""
        #expect(reason.hasPrefix("\(url): damaged audio: "), "\(reason)")
        #expect(reason.contains("corrupt frame") && reason.hasSuffix("s in; it played on"), "\(reason)")
        let played = try #require(t.waitForEvent("played", source: id))
        #expect(played.reason == "sound url: damaged.flac played to its end", "\(played.reason ?? "")")
        #expect(error.seq < played.seq)
    }

    /// A WAV with a header and no audio is said (`stream-error`: it holds no audio) before its
    /// source ends: it "played to its end" in silence, and nothing said why nothing was heard.
    @Test func aURLWithNoAudioIsSaid() throws {
        let header = WAVWriter.bytes([], rate: 48_000, channels: 2)
        let server = try SlowHTTPServer()
        defer { server.stop() }
        server.route("/silent.wav", .init(contentType: "audio/wav", body: header, seconds: 0, chunks: 1))
        let t = try TestDaemon(zones: [("kitchen", 48_000, nil)], announce: Self.allowLoopback)
        defer { t.stop() }
        let url = server.url("/silent.wav")
        let id = try #require(try t.json("POST", "/api/v1/announce", #"{"url": "\#(url)"}"#).object["id"])
        let error = try #require(t.waitForEvent("stream-error", source: id), "no stream-error for the empty audio")
        #expect(error.reason == "\(url): it holds no audio (0 frames)", "\(error.reason ?? "")")
    }

    /// Every bad URL is a clear error naming its cause, and the daemon plays on: a host not in
    /// `announce.allow-url-hosts` (403 naming the key), a 404, a file larger than `max-bytes` by its
    /// Content-Length (at once, however late its body), bytes that are no audio, a server that is not
    /// there, a bad URL.
    @Test func refusesBadURLsClearly() throws {
        let server = try SlowHTTPServer()
        defer { server.stop() }
        let closed = try FreePort.next()
        let t = try TestDaemon(announce: AnnounceConfig(allowURLHosts: ["127.0.0.1"], maxBytes: 64 << 10))
        defer { t.stop() }
        server.route("/big.mp3", .init(contentType: "audio/mpeg", body: [UInt8](repeating: 0, count: 100_000)))
        server.route(
            "/garbage.bin", .init(contentType: "application/octet-stream", body: Array("hello, not audio".utf8)))
        server.route("/page.mp3", .init(contentType: "text/html", body: Array("<html>hi</html>".utf8)))
        let cases: [(url: String, status: Int, text: String)] = [
            (
                "http://ha.local:8123/api/tts_proxy/x.mp3", 403,
                #"host "ha.local" is not in announce.allow-url-hosts"#
            ),
            (server.url("/missing.mp3"), 404, "HTTP 404"),
            (server.url("/big.mp3"), 422, "at most 65536 (announce.max-bytes)"),
            (server.url("/garbage.bin"), 422, "first bytes"),
            (server.url("/page.mp3"), 422, #"Content-Type "text/html""#),
            ("http://127.0.0.1:\(closed)/x.mp3", 502, "url: "),
            ("ftp://127.0.0.1/x.mp3", 400, "expected http:// or https://"),
        ]
        for c in cases {
            let r = try t.json("POST", "/api/v1/announce", #"{"url": "\#(c.url)"}"#)
            #expect(r.status == c.status, "\(c.url): \(r.object)")
            #expect(r.object["error"]?.contains(c.text) == true, "\(c.url): \(r.object)")
        }
        // Too large by its head, the body 5 s behind it: refused by the head alone, before any of the
        // body was sent (it was answered 502 "no audio within first-byte-timeout" once the client
        // handed the head over only with the body's first bytes).
        server.route(
            "/big-late.mp3",
            .init(contentType: "audio/mpeg", body: [UInt8](repeating: 0, count: 100_000), firstByteDelay: 5))
        let late = try t.json("POST", "/api/v1/announce", #"{"url": "\#(server.url("/big-late.mp3"))"}"#)
        #expect(server.lastByteAt("/big-late.mp3") == nil, "answered only after the body was sent")
        #expect(late.status == 422, "\(late.object)")
        #expect(late.object["error"]?.contains("at most 65536 (announce.max-bytes)") == true, "\(late.object)")
        // Still playing: a sound is heard, and nothing was left behind.
        #expect(try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k", "zones": ["kitchen"]}"#).status == 202)
        #expect(t.waitForEvent("played", seconds: 10) != nil)
        #expect(try t.status().sources.isEmpty)
    }

    /// A server whose `/slow.wav` (4 s of 1 kHz at 44.1 kHz stereo) comes ten times slower than it
    /// plays: a chunk every 0.1 s for 40 s, never stalled. (A WAV: its header is in the first chunk.)
    static func trickle() throws -> SlowHTTPServer {
        let server = try SlowHTTPServer()
        let dir = TestDirectory.make("url-trickle")
        WAVWriter.write(
            Signals.sine(frequency: 1000, rate: 44_100, frames: 4 * 44_100, channels: 2, amplitude: 0.5),
            rate: 44_100, channels: 2, to: "\(dir)/tone.wav")
        guard case .success(let wav?) = FileIO.read("\(dir)/tone.wav") else {
            server.stop()
            throw TestSetupError(message: "no WAV")
        }
        server.route("/slow.wav", .init(contentType: "audio/wav", body: wav, seconds: 40, chunks: 400))
        return server
    }

    /// A URL announcement interrupted by a call, its audio not all written yet (20 s, more than its
    /// rings hold): while its slot is paused and still it asks the monitor for no look at all (the
    /// call's end wakes the monitor); it asked every 50 ms for as long as the call went on. After
    /// the call it plays on.
    @Test func anAnnouncementHeldByACallAsksForNoLooks() throws {
        let server = try SlowHTTPServer()
        defer { server.stop() }
        let dir = TestDirectory.make("url-held")
        WAVWriter.write(
            Signals.sine(frequency: 1000, rate: 44_100, frames: 20 * 44_100, channels: 2, amplitude: 0.5),
            rate: 44_100, channels: 2, to: "\(dir)/tone.wav")
        guard case .success(let wav?) = FileIO.read("\(dir)/tone.wav") else { throw TestSetupError(message: "no WAV") }
        server.route("/long.wav", .init(contentType: "audio/wav", body: wav, seconds: 1, chunks: 10))
        let t = try TestDaemon(
            zones: [("kitchen", 44_100, nil)],
            intercom: IntercomConfig(
                listen: ListenAddress(host: "127.0.0.1", port: 0), zones: ["kitchen"], silenceTimeout: .seconds(60)),
            announce: Self.allowLoopback)
        defer { t.stop() }
        let id = try #require(
            try t.json("POST", "/api/v1/announce", #"{"url": "\#(server.url("/long.wav"))"}"#).object["id"])
        let source = { try? t.status().sources.first { $0.id == id } }
        #expect(waitUntil { (source()?.positionSeconds ?? 0) > 0.3 })
        let tick = { t.daemon.state.withLock { s in s.playbacks.first { "\($0.key)" == id }?.value.source.nextTick } }
        #expect(tick() == 50_000_000, "while it plays and decodes")
        #expect(try t.json("POST", "/api/v1/call/start").status == 202)
        #expect(waitUntil { source()?.state == "interrupted" }, "\(String(describing: source()))")
        let mixer = try #require(t.daemon.output("kitchen")?.mixer)
        let held = { mixer.slots.contains { $0.isPauseRequested && $0.isPaused } }
        #expect(waitUntil(seconds: 5, every: 0.02) { held() }, "its slot is paused and still")
        #expect(tick() == nil, "held still: \(tick().map(String.init) ?? "nil") ns")
        #expect(try t.json("POST", "/api/v1/call/end").status == 200)
        #expect(waitUntil { source()?.state == "playing" }, "\(String(describing: source()))")
        let at = source()?.positionSeconds ?? 0
        #expect(waitUntil { (source()?.positionSeconds ?? 0) > at + 0.3 }, "it plays on after the call")
    }

    /// A server that sends the file ten times slower than it plays — never stalled, a chunk every
    /// 0.1 s — is cut once the zone has waited `first-byte-timeout` (1 s) for it, and says so: it
    /// held the zone, buffering, for the whole 40 s of the trickle (at a byte a second, for hours),
    /// the music it interrupted with it. (A WAV: its header is in the first chunk.)
    @Test func aServerSlowerThanThePlayIsCut() throws {
        let server = try Self.trickle()
        defer { server.stop() }
        let t = try TestDaemon(
            zones: [("kitchen", 44_100, nil)],
            announce: AnnounceConfig(allowURLHosts: ["127.0.0.1"], firstByteTimeout: .seconds(1)))
        defer { t.stop() }
        let requested = SlowHTTPServer.now()
        let r = try t.json("POST", "/api/v1/announce", #"{"url": "\#(server.url("/slow.wav"))"}"#)
        #expect(r.status == 202, "\(r.object)")
        let id = try #require(r.object["id"])
        let played = try #require(t.waitForEvent("played", source: id, seconds: 10), "still held after 10 s")
        #expect(SlowHTTPServer.now() - requested > 1, "not before the zone waited a second")
        #expect(
            played.reason?.hasPrefix("stopped: ") == true && played.reason?.contains("slower than it plays") == true
                && played.reason?.contains("announce.first-byte-timeout") == true, "\(played.reason ?? "")")
        #expect(t.waitForEvent("finished", source: id, seconds: 5) != nil)
        #expect(try t.status().sources.isEmpty, "the zone is let go of")
    }

    /// The same URL twice within the coalesce window plays once (`coalesced` into the first); the
    /// event says why without the URL's token (the key was the raw URL, published as it was);
    /// another token is another URL.
    @Test func coalescesTheSameURL() throws {
        let server = try SlowHTTPServer()
        defer { server.stop() }
        let t = try TestDaemon(announce: Self.allowLoopback)
        defer { t.stop() }
        server.route("/a.mp3", .init(contentType: "audio/mpeg", body: try Self.toneMP3(seconds: 1)))
        let body = #"{"url": "\#(server.url("/a.mp3?token=hunter2"))", "zones": ["kitchen"]}"#
        let first = try t.json("POST", "/api/v1/announce", body)
        let second = try t.json("POST", "/api/v1/announce", body)
        #expect(first.object["status"] == "playing", "\(first.object)")
        #expect(second.object["status"] == "coalesced" && second.object["into"] == first.object["id"])
        let coalesced = try #require(t.waitForEvent("coalesced", source: second.object["id"]))
        let reason = coalesced.reason ?? ""
        #expect(reason.contains("same key url: a.mp3 #") && !reason.contains("hunter2"), "\(reason)")
        let other = try t.json(
            "POST", "/api/v1/announce", #"{"url": "\#(server.url("/a.mp3?token=other"))", "zones": ["kitchen"]}"#)
        #expect(other.object["status"] != "coalesced", "\(other.object)")
        #expect(t.waitForEvent("played", source: first.object["id"], seconds: 10) != nil)
    }

    /// An announcement that failed after it was granted (its server too slow: cut after
    /// `first-byte-timeout`) leaves nothing to coalesce into: the same URL asked again within the
    /// window — a retry — plays. It was coalesced into the one that failed, and nothing was heard.
    @Test func aRetryOfAFailedAnnouncementPlays() throws {
        let server = try Self.trickle()
        defer { server.stop() }
        let t = try TestDaemon(
            zones: [("kitchen", 44_100, nil)],
            announce: AnnounceConfig(allowURLHosts: ["127.0.0.1"], firstByteTimeout: .milliseconds(500)))
        defer { t.stop() }
        let requested = SlowHTTPServer.now()
        let body = #"{"url": "\#(server.url("/slow.wav"))"}"#
        let id = try #require(try t.json("POST", "/api/v1/announce", body).object["id"])
        let played = try #require(t.waitForEvent("played", source: id, seconds: 10))
        #expect(played.reason?.hasPrefix("stopped: ") == true, "\(played.reason ?? "")")
        let retry = try t.json("POST", "/api/v1/announce", body)
        #expect(SlowHTTPServer.now() - requested < 3, "within the 3 s coalesce window")
        #expect(retry.status == 202 && retry.object["status"] == "playing", "\(retry.object)")
        #expect(retry.object["id"] != id)
    }

    /// The caps while playing: a 4 s file is cut at `announce.max-duration` (1.75 s: it used to be
    /// cut at the whole second below), and a body with
    /// no Content-Length that grows past `max-bytes` (64 KiB of 320 kbit/s: 1.6 s) ends where the
    /// bytes stopped; a server that
    /// never answers fails the request after `first-byte-timeout` (502); bytes that claim to be
    /// MP3 but are noise are refused (422). An announcement cut short says so in `played` ("stopped:
    /// …", not "played to its end").
    @Test func capsDurationBytesAndWaiting() throws {
        let server = try SlowHTTPServer()
        defer { server.stop() }
        let silent = try Listener()  // accepts nothing: the connection waits in the backlog
        defer { close(silent.fd) }
        let mp3 = try Self.toneMP3()
        server.route("/long.mp3", .init(contentType: "audio/mpeg", body: mp3))
        let dense = try Self.toneMP3(bitrate: "320k")
        #expect(dense.count > 64 << 10)
        server.route("/unsized.mp3", .init(contentType: "audio/mpeg", body: dense, sendLength: false))
        var x: UInt32 = 7  // a fixed LCG: the same noise every run
        let noise = (0..<60_000).map { _ in
            x = x &* 1_664_525 &+ 1_013_904_223
            return UInt8(truncatingIfNeeded: x >> 24)
        }
        server.route("/noise.mp3", .init(contentType: "audio/mpeg", body: noise))
        let t = try TestDaemon(
            zones: [("kitchen", 44_100, nil)],
            announce: AnnounceConfig(
                allowURLHosts: ["127.0.0.1"], maxBytes: 64 << 10, maxDuration: .milliseconds(1750),
                firstByteTimeout: .milliseconds(500)))
        defer { t.stop() }
        for (path, expected) in [("/long.mp3", 1.75), ("/unsized.mp3", Double(64 << 10) * 8 / 320_000)] {
            let r = try t.json("POST", "/api/v1/announce", #"{"url": "\#(server.url(path))"}"#)
            #expect(r.status == 202, "\(path): \(r.object)")
            let id = try #require(r.object["id"])
            let granted = try #require(t.waitForEvent("granted", source: id)?.zoneFrames?["kitchen"])
            let playedEvent = try #require(t.waitForEvent("played", source: id, seconds: 10))
            let played = try #require(playedEvent.zoneFrames?["kitchen"])
            let limit = path == "/long.mp3" ? "announce.max-duration" : "announce.max-bytes"
            #expect(
                playedEvent.reason?.hasPrefix("stopped: ") == true && playedEvent.reason?.contains(limit) == true,
                "\(playedEvent.reason ?? "")")
            let seconds = Double(played - granted) / 44_100
            #expect(abs(seconds - expected) < 0.25, "\(path) played \(seconds) s, expected about \(expected) s")
            let cut = t.waitForEvent("stream-error", source: id)?.reason ?? ""
            #expect(cut.contains(path == "/long.mp3" ? "announce.max-duration" : "announce.max-bytes"), "\(cut)")
        }
        let started = SlowHTTPServer.now()
        let waited = try t.json("POST", "/api/v1/announce", #"{"url": "http://127.0.0.1:\#(silent.port)/x.mp3"}"#)
        #expect(waited.status == 502 && waited.object["error"]?.contains("announce.first-byte-timeout") == true)
        #expect(SlowHTTPServer.now() - started < 3)
        let noisy = try t.json("POST", "/api/v1/announce", #"{"url": "\#(server.url("/noise.mp3"))"}"#)
        #expect(noisy.status == 422, "\(noisy.object)")
        #expect(try t.status().sources.isEmpty)
    }

    /// Stopping a URL announcement while it downloads ends it at once (`finished`), the download
    /// is dropped, and the zone plays the next announcement.
    @Test func stopsWhileDownloading() throws {
        let server = try SlowHTTPServer()
        defer { server.stop() }
        server.route("/slow.mp3", .init(contentType: "audio/mpeg", body: try Self.toneMP3(), seconds: 3, chunks: 30))
        let t = try TestDaemon(zones: [("kitchen", 44_100, nil)], announce: Self.allowLoopback)
        defer { t.stop() }
        let id = try #require(
            try t.json("POST", "/api/v1/announce", #"{"url": "\#(server.url("/slow.mp3"))"}"#).object["id"])
        #expect(waitUntil { (try? t.status().sources.first?.positionSeconds ?? 0) ?? 0 > 0.3 })
        #expect(try t.json("POST", "/api/v1/music/stop", #"{"id": "\#(id)"}"#).status == 200)
        #expect(t.waitForEvent("finished", source: id) != nil)
        let bell = try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k"}"#)
        #expect(bell.object["status"] == "playing", "\(bell.object)")
        #expect(t.waitForEvent("played", source: bell.object["id"]) != nil)
    }

    /// An announcement stopped while its server has gone quiet (half the file sent, then nothing)
    /// gives up its slot at once: its transfer waited out the stall timeout (5 s and more), the
    /// slot claimed all along — a few such filled a zone's eight slots.
    @Test func aStoppedAnnouncementWhoseServerWentQuietLetsGoAtOnce() throws {
        let gate = Semaphore()
        defer { gate.post() }
        let server = try SlowHTTPServer()
        defer { server.stop() }
        server.route(
            "/quiet.mp3",
            .init(contentType: "audio/mpeg", body: try Self.toneMP3(), chunks: 2, beforeLastChunk: { gate.wait() }))
        let t = try TestDaemon(zones: [("kitchen", 44_100, nil)], announce: Self.allowLoopback)
        defer { t.stop() }
        let id = try #require(
            try t.json("POST", "/api/v1/announce", #"{"url": "\#(server.url("/quiet.mp3"))"}"#).object["id"])
        #expect(waitUntil { (try? t.status().sources.first?.positionSeconds ?? 0) ?? 0 > 0.2 })
        #expect(try t.json("POST", "/api/v1/music/stop", #"{"id": "\#(id)"}"#).status == 200)
        let mixer = try #require(t.daemon.output("kitchen")?.mixer)
        let claimed = { mixer.slots.count { $0.phase.load(ordering: .acquiring) != SourceSlot.Phase.free.rawValue } }
        #expect(waitUntil(seconds: 2.5, every: 0.02) { claimed() == 0 }, "its slot is free (\(claimed()) claimed)")
    }

    /// A server that has sent all the audio (a WAV's whole data chunk) and then holds its
    /// connection open with bytes still to come: the announcement ends when its last frame has
    /// played, not when the transfer's stall timeout (10 s here) gives up. The slots waited for the
    /// network thread, so the zone played silence under "playing", the music it interrupted with it.
    @Test func anAnnouncementWhoseServerHoldsTheRestEndsWithItsAudio() throws {
        let gate = Semaphore()
        defer { gate.post() }
        let server = try SlowHTTPServer()
        defer { server.stop() }
        let dir = TestDirectory.make("url-held")
        WAVWriter.write(
            Signals.sine(frequency: 1000, rate: 44_100, frames: 44_100, channels: 2, amplitude: 0.5),
            rate: 44_100, channels: 2, to: "\(dir)/tone.wav")
        let wav = ALSATestRig.readBytes("\(dir)/tone.wav")
        // The WAV in the first chunk, as many bytes after it (past its data chunk) held back.
        server.route(
            "/held.wav",
            .init(
                contentType: "audio/wav", body: wav + [UInt8](repeating: 0, count: wav.count), chunks: 2,
                beforeLastChunk: { gate.wait() }))
        let t = try TestDaemon(
            zones: [("kitchen", 44_100, nil)],
            announce: AnnounceConfig(allowURLHosts: ["127.0.0.1"], firstByteTimeout: .seconds(10)))
        defer { t.stop() }
        let r = try t.json("POST", "/api/v1/announce", #"{"url": "\#(server.url("/held.wav"))"}"#)
        #expect(r.status == 202, "\(r.object)")
        let id = try #require(r.object["id"])
        let granted = try #require(t.waitForEvent("granted", source: id)?.zoneFrames?["kitchen"])
        let grantedAt = SlowHTTPServer.now()
        let played = try #require(t.waitForEvent("played", source: id, seconds: 15))
        let after = SlowHTTPServer.now() - grantedAt
        #expect(after < 2, "played \(after) s after its grant, for 1 s of audio")
        #expect(played.reason?.hasPrefix("stopped: ") != true, "\(played.reason ?? "")")
        let frames = try #require(played.zoneFrames?["kitchen"]) - granted
        #expect(abs(frames - 44_100) < 4_410, "\(frames) frames played")
    }
}
