import BatonConfig
import BatonTesting
import Glibc
import OSThread
import Testing

@testable import BatonDaemon
@testable import BatonService
@testable import ControlParts

/// Spoken announcements through the real espeak-ng, checked in the zone's output file.
@Suite(.serialized, .ownThread) struct SpeechTests {
    /// A text is spoken in the kitchen: the file holds about a second of speech-level audio after the
    /// grant, the source is labelled with its text, and the same text again within the coalesce
    /// window plays once.
    @Test func speaksAText() throws {
        let t = try TestDaemon()
        let r = try t.json(
            "POST", "/api/v1/announce", #"{"text": "Someone is at the front door", "zones": ["kitchen"]}"#)
        #expect(r.status == 202, "\(r.object)")
        let id = try #require(r.object["id"])
        #expect(try t.status().sources.first { $0.id == id }?.sound == "speech: Someone is at the front door")
        let again = try t.json(
            "POST", "/api/v1/announce", #"{"text": "Someone is at the front door", "zones": ["kitchen"]}"#)
        #expect(again.object["status"] == "coalesced" && again.object["into"] == id, "\(again.object)")
        let played = try #require(t.waitForEvent("played", source: id, seconds: 15))
        let granted = try #require(t.waitForEvent("granted", source: id)?.zoneFrames?["kitchen"])
        let end = try #require(played.zoneFrames?["kitchen"])
        usleep(300_000)
        t.stop()
        let out = t.left("kitchen")
        let seconds = Double(end - granted) / 44_100
        #expect(seconds > 1 && seconds < 4, "spoken for \(seconds) s")
        let loud = stride(from: granted, to: end - 2_205, by: 2_205).filter {
            Signals.rms(out[$0..<($0 + 2_205)]) > 0.02
        }.count
        #expect(Double(loud) * 0.05 > 0.6, "speech in \(loud) of the 50 ms windows")
        #expect(out.count >= end + 8_820)
        if out.count >= end + 8_820 {
            #expect(Signals.rms(out[(end + 4_410)..<(end + 8_820)]) == 0, "silence after it")
        }
    }

    /// Bad requests are clear: empty or too long text, a voice that could be an option, both sound and
    /// text, a voice espeak-ng does not know.
    @Test func rejectsBadTextRequests() throws {
        let t = try TestDaemon(speech: SpeechConfig(maxLength: 20))
        defer { t.stop() }
        let cases: [(String, Int, String)] = [
            (#"{"text": "   "}"#, 400, "text is empty"),
            (#"{"text": "a\u0000b"}"#, 400, "text has a control character (U+0000)"),
            (#"{"text": "this text is longer than twenty"}"#, 400, "at most 20 (speech.max-length)"),
            (#"{"text": "hi", "voice": "--help"}"#, 400, "is not a voice name"),
            (#"{"text": "hi", "sound": "bell1k"}"#, 400, "exactly one of sound, text and url"),
            (#"{"sound": "bell1k", "voice": "en"}"#, 400, "voice applies to a text"),
            (#"{"text": "hi", "voice": "xx-nosuchvoice"}"#, 422, "espeak-ng failed (voice"),
        ]
        for (body, status, text) in cases {
            let r = try t.request("POST", "/api/v1/announce", body)
            #expect(r.status == status && r.text.contains(text), "\(body) → \(r.status) \(r.text)")
        }
    }

    /// Without espeak-ng (a command that does not exist) a text announcement is a clear 503 and the
    /// daemon plays sounds on.
    @Test func missingSynthesizerIsAClearError() throws {
        let t = try TestDaemon(speech: SpeechConfig(command: "/nonexistent/espeak-ng"))
        defer { t.stop() }
        let r = try t.request("POST", "/api/v1/announce", #"{"text": "hello"}"#)
        #expect(r.status == 503)
        #expect(
            r.text.contains("cannot run /nonexistent/espeak-ng: not installed (apt install espeak-ng)"), "\(r.text)")
        #expect(try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k"}"#).status == 202)
    }

    /// A rendering that may pass at the next try (here the program exits 0 and writes no audio, as
    /// with /tmp full; on a busy Pi espeak-ng killed at its deadline) is a 503, which a client tries
    /// again; it was a 422, which Home Assistant reads as final.
    @Test func aRenderingThatMayPassLaterIsUnavailable() throws {
        let silent = try TextFile.script(TestDirectory.make("speech-silent") + "/speak", "#!/bin/sh\nexit 0\n")
        let t = try TestDaemon(speech: SpeechConfig(command: silent))
        defer { t.stop() }
        let r = try t.request("POST", "/api/v1/announce", #"{"text": "hello"}"#)
        #expect(r.status == 503 && r.text.contains("speech: espeak-ng wrote no audio"), "\(r.status) \(r.text)")
    }

    /// batond's stop (`stopNetwork`, before the API's server waits for its requests) ends a text
    /// request whose speech program is slow: it is answered at once, not after the program's 30 s
    /// deadline, past systemd's 5 s.
    @Test func batondsStopAnswersASlowTextRequestAtOnce() throws {
        let slow = try TextFile.script(TestDirectory.make("speech-slow") + "/speak", "#!/bin/sh\nsleep 3598.75\n")
        let t = try TestDaemon(speech: SpeechConfig(command: slow))
        defer { t.stop() }
        let daemon = t.daemon
        let stopping = startThread {
            usleep(400_000)
            daemon.stopNetwork()
        }
        defer { pthread_join(stopping, nil) }
        let started = monotonicNanoseconds()
        let r = try t.request("POST", "/api/v1/announce", #"{"text": "hello"}"#)
        let took = Double(monotonicNanoseconds() - started) / 1e9
        #expect(r.status == 503 && r.text.contains("stopped: batond is stopping"), "\(r.status) \(r.text)")
        #expect(took < 2, "answered after \(took) s")
    }
}
