import BatonTesting
import FoundationEssentials
import Glibc
import OSThread
import Testing

@testable import BatonDaemon
@testable import BatonService
@testable import ControlParts

/// The doorbell scenario end to end: HTTP API → arbiter → slots → real alsa-lib file PCMs.
@Suite(.serialized, .ownThread) struct DaemonScenarioTests {
    let period = 441, ramp = 441  // kitchen: 44.1 kHz, 10 ms periods, 10 ms default ramp

    func level(_ s: [Float], _ at: Int, _ hz: Double, frames: Int = 441) -> Double {
        guard at >= 0, at + frames <= s.count else { return -1 }
        return Signals.windowedToneLevel(s[at..<(at + frames)], frequency: hz, rate: 44_100)
    }

    /// A chime announced on one zone is in that zone's file (tone detected) and not in the other's.
    @Test func announcementPlaysOnlyOnItsZone() throws {
        let t = try TestDaemon()
        let r = try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k", "zones": ["kitchen"]}"#)
        #expect(r.status == 202)
        #expect(r.object["status"] == "playing")
        let id = try #require(r.object["id"])
        let granted = try #require(t.waitForEvent("granted", source: id))
        #expect(t.waitForEvent("finished", source: id) != nil)
        t.stop()
        let kitchen = t.left("kitchen")
        let f = try #require(granted.zoneFrames?["kitchen"])
        let onset = try #require(Signals.onset(Array(kitchen[max(0, f - 4_410)...]), threshold: 0.001)).advanced(
            by: max(0, f - 4_410))
        #expect(
            onset >= f && onset <= f + period + 2,
            "the bell starts within one period of the grant (\(onset - f) frames)")
        #expect(level(kitchen, onset + 2, 1000) > 0.45, "at full level from its first period: no fade-in")
        #expect(level(kitchen, f - 441, 1000) < 0.001, "and not before")
        let patio = Signals.channel(ALSATestRig.readS16(t.files["patio"]!), 0, of: 2)
        #expect(patio.count > 4_800, "the patio zone played")
        #expect(patio.allSatisfy { $0 == 0 }, "nothing reached the patio")
    }

    /// A sound file shorter than its WAV header says (a copy cut off) plays what it holds, and it
    /// is said: a `stream-error` for the announcement names the file's problem. It played its
    /// first half without a word.
    @Test func aTruncatedSoundIsSaidAndPlaysWhatItHolds() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        WAVWriter.write(
            Signals.sine(frequency: 1000, rate: 48_000, frames: 48_000, channels: 2, amplitude: 0.5),
            rate: 48_000, channels: 2, to: "\(t.sounds)/cut.wav")
        guard case .success(let whole?) = FileIO.read("\(t.sounds)/cut.wav") else {
            throw TestSetupError(message: "no WAV")
        }
        _ = FileIO.writeAtomically(Array(whole.prefix(44 + 24_000 * 4)), to: "\(t.sounds)/cut.wav")
        let r = try t.json("POST", "/api/v1/announce", #"{"sound": "cut", "zones": ["kitchen"]}"#)
        #expect(r.status == 202, "\(r.object)")
        let id = try #require(r.object["id"])
        let said = try #require(t.waitForEvent("stream-error", source: id, seconds: 5))
        #expect(
            said.reason == "sound \"cut\": truncated: its data chunk says 48000 frames, the file holds 24000 "
                + "(0.50 of 1.00 s); it plays what the file holds", "\(said.reason ?? "")")
        #expect(t.waitForEvent("played", source: id, seconds: 5) != nil, "and it played")
    }

    /// The seed scenario: music plays → doorbell → music `began`, state interrupted, position frozen →
    /// doorbell ends → `ended(shouldResume: true)` → playing again. Each decision is audible within
    /// one period plus the ramp in the zone's file.
    @Test func doorbellInterruptsAndMusicResumes() throws {
        let t = try TestDaemon()
        let music = try t.json(
            "POST", "/api/v1/music/play", #"{"sound": "music440", "zones": ["kitchen"], "loop": true}"#)
        #expect(music.status == 202)
        let musicID = try #require(music.object["id"])
        #expect(waitUntil { (try? t.status().sources.first?.positionSeconds ?? 0) ?? 0 > 0.3 })
        let bell = try t.json("POST", "/api/v1/announce", #"{"sound": "bell2s", "zones": ["kitchen"]}"#)
        let bellID = try #require(bell.object["id"])
        let began = try #require(t.waitForEvent("interruption-began", source: musicID))
        #expect(began.zones == ["kitchen"])
        #expect(began.reason?.contains(bellID) == true, "the reason names the interrupter: \(began.reason ?? "")")

        // Status follows the audio: interrupted once the music's fade-out has been heard (the
        // device's delay plus the ramp after the decision).
        #expect(waitUntil { (try? t.status().sources.first { $0.id == musicID }?.state) == "interrupted" })
        let during = try t.status()
        let m = try #require(during.sources.first { $0.id == musicID })
        #expect(m.state == "interrupted")
        #expect(m.interruptedBy == bellID)
        #expect(during.zones[0].silenced.map(\.source) == [musicID])
        #expect(during.zones[0].audible == [bellID])
        // Paused at a fixed sample: the position does not move while interrupted.
        #expect(waitUntil { (try? t.status().zones[0].sources.first { $0.source == musicID }?.paused) == true })
        let frozen = try #require(try t.status().zones[0].sources.first { $0.source == musicID }?.positionFrames)
        usleep(100_000)
        #expect(try t.status().zones[0].sources.first { $0.source == musicID }?.positionFrames == frozen)

        let ended = try #require(t.waitForEvent("interruption-ended", source: musicID))
        #expect(ended.shouldResume == true)
        #expect(waitUntil { (try? t.status().sources.first { $0.id == musicID }?.state) == "playing" })
        #expect(
            waitUntil {
                (try? t.status().zones[0].sources.first { $0.source == musicID }?.positionFrames ?? 0) ?? 0 > frozen
                    + 4_410
            })
        t.stop()

        let out = t.left("kitchen")
        let cut = try #require(began.zoneFrames?["kitchen"])
        let resume = try #require(ended.zoneFrames?["kitchen"])
        #expect(level(out, cut - 2 * 441, 440) > 0.4, "music before the doorbell")
        #expect(level(out, cut + period + ramp, 440) < 0.01, "music silent one period + ramp after the decision")
        #expect(level(out, cut + period, 1000) > 0.45, "doorbell audible one period after the decision")
        #expect(level(out, resume + period + ramp, 440) > 0.4, "music back one period + ramp after ended")
        #expect(level(out, resume + period + ramp, 1000) < 0.01, "doorbell over")
        // Frames of music heard before the cut + frames heard after = the position: nothing skipped.
        let frames = try #require(frozen > 0 ? frozen : nil)
        #expect(
            frames >= cut
                - (try #require(
                    t.daemon.events.recent().first { $0.type == "granted" && $0.source == musicID }?.zoneFrames?[
                        "kitchen"])) - period)
    }

    /// The user pausing music during the doorbell wins: `ended(shouldResume: false)` and it stays paused.
    @Test func userPauseDuringDoorbellKeepsMusicPaused() throws {
        let t = try TestDaemon()
        let music = try t.json(
            "POST", "/api/v1/music/play", #"{"sound": "music440", "zones": ["kitchen"], "loop": true}"#)
        let musicID = try #require(music.object["id"])
        _ = try t.json("POST", "/api/v1/announce", #"{"sound": "bell2s", "zones": ["kitchen"]}"#)
        #expect(t.waitForEvent("interruption-began", source: musicID) != nil)
        let paused = try t.json("POST", "/api/v1/music/pause", #"{"id": "\#(musicID)"}"#)
        #expect(paused.status == 200)
        let ended = try #require(t.waitForEvent("interruption-ended", source: musicID))
        #expect(ended.shouldResume == false)
        #expect(ended.reason?.contains("pause") == true, "reason: \(ended.reason ?? "")")
        usleep(200_000)
        #expect(try t.status().sources.first { $0.id == musicID }?.state == "paused")
        t.stop()
        let out = t.left("kitchen")
        let end = try #require(ended.zoneFrames?["kitchen"])
        #expect(level(out, end + period + ramp, 440) < 0.001, "still silent after the doorbell")
        #expect(level(out, out.count - 441, 440) < 0.001, "and to the end")
    }

    /// Five presses of the doorbell within the coalesce window play one chime; the others say coalesced.
    @Test func repeatedDoorbellCoalesces() throws {
        let t = try TestDaemon()
        var statuses: [String] = []
        for _ in 0..<5 {
            statuses.append(try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k"}"#).object["status"] ?? "?")
        }
        #expect(statuses == ["playing", "coalesced", "coalesced", "coalesced", "coalesced"])
        #expect(t.daemon.events.recent().filter { $0.type == "coalesced" }.count == 4)
        t.stop()
    }

    /// A zone whose PCM cannot be opened is reported unavailable (with the ALSA error) while the other
    /// zone plays; announcing to it alone is refused with 503, to all plays where possible.
    @Test func unavailableZoneIsReportedAndSkipped() throws {
        let t = try TestDaemon(zones: [("kitchen", 44_100, nil), ("garage", 48_000, ALSATestRig.missingPCM)])
        let s = try t.status()
        let garage = try #require(s.zones.first { $0.name == "garage" })
        #expect(garage.state == "unavailable")
        #expect(garage.error?.contains(ALSATestRig.missingPCM) == true, "error: \(garage.error ?? "")")
        #expect(s.zones.first { $0.name == "kitchen" }?.state == "available")
        let only = try t.request("POST", "/api/v1/announce", #"{"sound": "bell1k", "zones": ["garage"]}"#)
        #expect(only.status == 503)
        #expect(only.text.contains("garage"))
        let all = try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k"}"#)
        #expect(all.status == 202)
        #expect(all.object["skipped"] == "garage")
        #expect(t.waitForEvent("zone-unavailable") != nil)
        t.stop()
    }

    /// A key given twice is found in the body's own object only, as the decoder reads keys: not in
    /// nested objects, not in strings, escapes and surrogate pairs decoded.
    @Test func aRepeatedKeyIsFoundAtTheTopOnly() {
        func repeated(_ text: String) -> String? { JSONBody.repeatedKey(in: Array(text.utf8)) }
        #expect(repeated(#"{"songs": [{"id": "a"}, {"id": "b"}], "next": true}"#) == nil)
        #expect(repeated(#"{"text": "a, \"text\": {[", "voice": "en"}"#) == nil)
        #expect(repeated(#"{"text": "x", "te\u0078t": "y"}"#) == "text")
        #expect(repeated(#"{"\ud83d\udd14": 1, "🔔": 2}"#) == "🔔")
        #expect(repeated(#"{"a": {"b": 1, "b": 2}, "c": 3}"#) == nil, "nested: not the command's own fields")
        #expect(repeated("{}") == nil)
    }

    /// Bad requests get a 4xx JSON error naming the problem, and the daemon keeps serving.
    @Test(
        arguments: [
            ("POST", "/api/v1/announce", #"{"sound": "doorbell""#, 400, "malformed JSON"),
            ("POST", "/api/v1/announce", #"["doorbell"]"#, 400, "JSON object"),
            (
                "POST", "/api/v1/announce", #"{"sound": "doorbell", "zones": ["cellar"]}"#, 404,
                "unknown zone or group \"cellar\""
            ),
            ("POST", "/api/v1/announce", #"{"sound": "trumpet"}"#, 404, "unknown sound"),
            ("POST", "/api/v1/announce", #"{"sound": "../etc/passwd"}"#, 400, "invalid sound name"),
            ("POST", "/api/v1/announce", #"{"sound": "a/b"}"#, 400, "invalid sound name"),
            ("POST", "/api/v1/announce", #"{"sound": 5}"#, 400, "field \"sound\": expected a string"),
            ("POST", "/api/v1/announce", #"{"zones": ["kitchen"]}"#, 400, "give exactly one of sound, text and url"),
            ("POST", "/api/v1/announce", #"{"sound": "doorbell", "volum": 1}"#, 400, "unknown field \"volum\""),
            ("POST", "/api/v1/announce", #"{"sound": "doorbell", "volume": 3}"#, 400, "volume must be between 0 and 1"),
            (
                "POST", "/api/v1/announce", "{\"sound\": \"" + String(repeating: "x", count: 5000) + "\"}", 413,
                "exceeds"
            ),
            ("GET", "/api/v1/announce", nil, 405, "not allowed"),
            ("GET", "/api/v1/nothing", nil, 404, "no such endpoint"),
            ("POST", "/api/v1/music/pause", #"{"id": "music-99"}"#, 404, "no source \"music-99\""),
            // Given twice, one value was kept without a word; a body where none is taken was ignored.
            (
                "POST", "/api/v1/zones/kitchen/volume", #"{"volume": 0.2, "volume": 5}"#, 400,
                "field \"volume\" is given more than once"
            ),
            (
                "POST", "/api/v1/zones/kitchen/volume", #"{"volume": 0.2, "vol\u0075me": 0.3}"#, 400,
                "field \"volume\" is given more than once"
            ),
            ("POST", "/api/v1/reload", #"{"bogus": 1}"#, 400, "unknown field \"bogus\""),
            ("POST", "/api/v1/call/end", "hang up", 400, "malformed JSON"),
            ("GET", "/api/v1/events/recent?after=1&after=9", nil, 400, "query parameter after is given more than once"),
        ] as [(String, String, String?, Int, String)])
    func badRequestsGetClearErrors(method: String, path: String, body: String?, status: Int, message: String) throws {
        let t = try TestDaemon()
        defer { t.stop() }
        let r = try t.request(method, path, body)
        #expect(r.status == status)
        #expect(r.headers["content-type"]?.hasPrefix("application/json") == true)
        let error = try JSONDecoder().decode([String: String].self, from: Data(r.body))["error"]
        #expect(error?.contains(message) == true, "body: \(r.text)")
        #expect(try t.request("GET", "/api/v1/status").status == 200, "still serving")
    }
}
