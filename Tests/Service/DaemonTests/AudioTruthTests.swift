import Arbiter
import BatonConfig
import BatonTesting
import Engine
import FoundationEssentials
import Glibc
import OSThread
import Subsonic
import Testing

@testable import BatonDaemon
@testable import BatonService
@testable import ControlParts

/// The state never lies, down to the period: what status and the events say is checked against the
/// samples the zone wrote (an ALSA file PCM, whose frame n is the zone's frame n).
@Suite(.serialized, .ownThread) struct AudioTruthTests {
    /// Status samples taken as fast as the daemon answers, each with the zone's audible frame.
    struct Sample {
        var state: String
        var audibleFrame: Int
        var positionSeconds: Double?
        var title: String
    }

    static func sample(_ t: TestDaemon, _ id: String, zone: String = "kitchen") -> Sample? {
        let status = t.daemon.status()
        guard let source = status.sources.first(where: { $0.id == id }),
            let z = status.zones.first(where: { $0.name == zone })
        else { return nil }
        return Sample(
            state: source.state, audibleFrame: z.audibleFrame, positionSeconds: source.positionSeconds,
            title: source.track?.title ?? source.sound)
    }

    /// A period of the test zones (10 ms at 44.1 kHz) and their ramp (10 ms): the tolerance.
    static let period = 441
    static let ramp = 441

    /// A local sound played as music is `starting` until its first frame is heard, then `playing`;
    /// the `audible` event (after `granted`) carries the zone frame where the file's tone begins,
    /// and no status sample says `playing` before it.
    @Test func musicIsStartingUntilItsFirstFrameIsHeard() throws {
        let t = try TestDaemon()
        let r = try t.json("POST", "/api/v1/music/play", #"{"sound": "music440", "loop": true, "zones": ["kitchen"]}"#)
        let id = try #require(r.object["id"])
        var samples: [Sample] = []
        _ = waitUntil(seconds: 5) {
            if let s = Self.sample(t, id) { samples.append(s) }
            return samples.count > 20 && samples.last?.state == "playing"
        }
        let audible = try #require(t.waitForEvent("audible", source: id))
        let granted = try #require(t.waitForEvent("granted", source: id))
        #expect(granted.seq < audible.seq, "granted comes first")
        t.stop()
        let heard = try #require(audible.zoneFrames?["kitchen"])
        let out = t.left("kitchen")
        let onset = try #require(Signals.onset(Array(out[heard...]), threshold: 0.001))
        #expect(onset <= 2, "the tone starts at the audible event's frame (\(onset) frames later)")
        #expect(out[max(0, heard - 441)..<heard].allSatisfy { $0 == 0 }, "silence before it")
        // Each look against the frame it was taken at. (The first look was required to say
        // "starting": a busy machine can hold this thread up past the first frame heard.)
        for s in samples {
            if s.state == "playing" {
                #expect(s.audibleFrame >= heard - Self.period, "playing before the first frame is heard: \(s)")
            } else {
                #expect(s.state == "starting")
                #expect(s.audibleFrame < heard + Self.period, "starting after it was heard: \(s)")
            }
        }
    }

    /// An announcement that ends within the music's fade-out (200 frames, shorter than the 441-frame
    /// ramp): the music's fade-in begins at the very frame its fade-out reached 0, so it is heard
    /// throughout, and it is reported so — `playing` and in the zone's `audible` at every look after
    /// the resume. (It read `buffering` with `audible: []` for good while heard: the slot's "off" and
    /// "on" fell on one frame, and the frames alone read as "on, then off".)
    @Test func musicResumedWhereItsFadeEndedIsPlaying() throws {
        let t = try TestDaemon()
        WAVWriter.write(
            Signals.sine(frequency: 1000, rate: 44_100, frames: 200, channels: 2, amplitude: 0.5),
            rate: 44_100, channels: 2, to: "\(t.sounds)/blip.wav")
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"sound": "music440", "loop": true, "zones": ["kitchen"]}"#)
                .object["id"])
        _ = try #require(t.waitForEvent("audible", source: id))
        _ = try t.json("POST", "/api/v1/announce", #"{"sound": "blip", "zones": ["kitchen"]}"#)
        let ended = try #require(t.waitForEvent("interruption-ended", source: id))
        #expect(ended.shouldResume == true)
        let resumed = try #require(ended.zoneFrames?["kitchen"])
        // Looks at the status until half a second after the resume is heard.
        var looks: [(state: String, audible: [String], frame: Int)] = []
        _ = waitUntil(seconds: 5) {
            let status = t.daemon.status()
            guard let zone = status.zones.first(where: { $0.name == "kitchen" }) else { return false }
            let state = status.sources.first { $0.id == id }?.state ?? "-"
            looks.append((state, zone.audible, zone.audibleFrame))
            return zone.audibleFrame > resumed + 22_050
        }
        t.stop()
        let after = looks.filter { $0.frame >= resumed + Self.period }
        #expect(after.count > 20, "\(looks.count) looks")
        for look in after {
            #expect(look.state == "playing" && look.audible == [id], "at zone frame \(look.frame): \(look)")
        }
        // And the music is what the zone played from there: its tone in every period.
        let out = t.left("kitchen")
        let last = try #require(after.last).frame
        for start in stride(from: resumed + Self.period, to: min(last, out.count) - 441, by: 441) {
            let level = Signals.toneLevel(out[start..<start + 441], frequency: 440, rate: 44_100)
            #expect(level > 0.1, "no music at zone frame \(start) (level \(level))")
        }
    }

    /// The position reported is the frame heard now, not the frame mixed: for a sound playing from
    /// its first frame it is the audible frame less the frame it began at, within a period.
    @Test func positionIsWhatIsHeard() throws {
        let t = try TestDaemon()
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"sound": "music440", "loop": true, "zones": ["kitchen"]}"#)
                .object["id"])
        let audible = try #require(t.waitForEvent("audible", source: id))
        let heard = try #require(audible.zoneFrames?["kitchen"])
        var checked = 0
        _ = waitUntil(seconds: 3) {
            guard let s = Self.sample(t, id), let position = s.positionSeconds, s.audibleFrame > heard else {
                return false
            }
            let want = s.audibleFrame - heard
            #expect(
                abs(Int((position * 44_100).rounded()) - want) <= Self.period,
                "position \(position) s vs \(want) frames heard")
            checked += 1
            return checked >= 50
        }
        #expect(checked >= 50)
        t.stop()
    }

    /// A sound that decodes to digital zeros is heard (its frames are mixed) but the zone is silent:
    /// after `silence-alarm` the zone's state is `silent` with a `silent-while-playing` event at the
    /// frame the silence began; a bell brings the sound back (`sound-returned` at the bell's first
    /// frame) and the zone is `available` again. The meter reads −200 dBFS, then the bell's level.
    @Test func silentSourceRaisesTheSilenceAlarm() throws {
        let t = try TestDaemon(silenceAlarm: .milliseconds(300))
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"sound": "zeros", "loop": true, "zones": ["kitchen"]}"#)
                .object["id"])
        let audible = try #require(t.waitForEvent("audible", source: id))
        let alarm = try #require(t.waitForEvent("silent-while-playing", source: id, seconds: 5))
        #expect(alarm.zones == ["kitchen"])
        #expect(alarm.zoneFrames?["kitchen"] == audible.zoneFrames?["kitchen"], "silent from its first frame")
        let silent = try t.status().zones.first { $0.name == "kitchen" }!
        #expect(silent.state == "silent")
        #expect(silent.level.peakDb == -200)
        #expect(try t.status().zones.first { $0.name == "patio" }?.state == "available", "nothing plays there")
        #expect(try t.status().sources.first { $0.id == id }?.state == "playing", "the source does play")
        let bell = try #require(
            try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k", "zones": ["kitchen"]}"#).object["id"])
        let back = try #require(t.waitForEvent("sound-returned", seconds: 5))
        let bellHeard = try #require(t.waitForEvent("audible", source: bell))
        #expect(back.zoneFrames?["kitchen"] == bellHeard.zoneFrames?["kitchen"], "the sound returns with the bell")
        #expect(waitUntil { (try? t.status().zones.first { $0.name == "kitchen" }?.state) == "available" })
        let level = try #require(try t.status().zones.first { $0.name == "kitchen" }?.level)
        // The bell: a 0.5 sine: peak −6.0 dBFS, RMS −9.0 dBFS.
        #expect(abs(level.peakDb - -6.0) < 0.2, "\(level)")
        #expect(abs(level.rmsDb - -9.0) < 0.2, "\(level)")
        t.stop()
    }
}

extension AudioTruthTests {
    /// The status's title follows what is heard across a track change (`next`): each `playing`
    /// sample's track ("Tone NNN") is the tone the file holds just before its audible frame, not the
    /// other track's.
    @Test func titleIsTheTrackHeard() throws {
        let t = try TestDaemon(music: try TestSubsonic.music())
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"search": "Tone", "zones": ["kitchen"]}"#).object["id"])
        #expect(waitUntil(seconds: 15) { (Self.sample(t, id)?.positionSeconds ?? 0) > 0.5 })
        let first = try #require(Self.sample(t, id)?.title)
        #expect(try t.request("POST", "/api/v1/music/next").status == 200)
        var samples: [Sample] = []
        _ = waitUntil(seconds: 15) {
            if let s = Self.sample(t, id) { samples.append(s) }
            guard let last = samples.last else { return false }
            return last.title != first && (last.positionSeconds ?? 0) > 0.5
        }
        t.stop()
        let hz = { (title: String) in title.split(separator: " ").compactMap { Double($0) }.first ?? 0 }
        let titles = Set(samples.map(\.title)).union([first])
        #expect(titles.count == 2, "\(titles)")
        let out = t.left("kitchen")
        var checked = 0
        for s in samples where s.state == "playing" {
            // 50 ms from the audible frame; a sample a period + ramp before the tone begins is
            // judged on the 50 ms after that (the tolerance), so silence there is a lie.
            let other = titles.first { $0 != s.title }.map(hz) ?? 0
            var at = s.audibleFrame
            var level = 0.0
            var wrong = 0.0
            for start in [at, at + Self.period + Self.ramp] {
                at = start
                guard at > 0, at + 2_205 <= out.count else { break }
                let window = out[at..<(at + 2_205)]
                level = Signals.windowedToneLevel(window, frequency: hz(s.title), rate: 44_100)
                wrong = Signals.windowedToneLevel(window, frequency: other, rate: 44_100)
                if level > 0.05 || wrong > 0.05 { break }
            }
            guard at + 2_205 <= out.count else { continue }
            // A window across the change holds both: not judged.
            if level > 0.05 && wrong > 0.05 { continue }
            checked += 1
            #expect(level > wrong, "status says \(s.title) at \(s.audibleFrame), the file has \(other) Hz")
        }
        #expect(checked > 10)
    }

    /// A server slower than real time: the stream's audio runs out mid-track. The source goes
    /// `buffering` at the frame where its audio stops (a `buffering` event there, digital silence
    /// after it in the file) and back to `playing` with an `audible` event where it resumes; every
    /// status sample that says `buffering` is silent at its audible frame.
    @Test func starvedStreamGoesBufferingAndBack() throws {
        // Tone 880 WAV 48000: 192 000 bytes a second. The proxy sends 0.5 s of it every 0.7 s.
        let (slow, proxy) = try TestSubsonic.slowMusic(chunk: 96_000, interval: 0.7, free: 120_000)
        defer { _ = proxy.stop() }
        let t = try TestDaemon(music: slow)
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"search": "Tone 880", "zones": ["kitchen"]}"#).object["id"])
        var samples: [Sample] = []
        _ = waitUntil(seconds: 20) {
            if let s = Self.sample(t, id) { samples.append(s) }
            return t.daemon.events.recent().filter { $0.type == "audible" && $0.source == id }.count >= 3
        }
        t.stop()
        let events = t.daemon.events.recent().filter { $0.source == id }
        let buffering = events.filter { $0.type == "buffering" }
        let audible = events.filter { $0.type == "audible" }
        #expect(buffering.count >= 2, "\(events.map(\.type))")
        #expect(audible.count >= 3)
        // They alternate: audible, buffering, audible, …
        let order = events.filter { $0.type == "audible" || $0.type == "buffering" }.map(\.type)
        for (i, type) in order.enumerated() { #expect(type == (i % 2 == 0 ? "audible" : "buffering"), "\(order)") }
        let out = t.left("kitchen")
        for e in buffering {
            let f = try #require(e.zoneFrames?["kitchen"])
            #expect(out[(f - 64)..<f].contains { $0 != 0 }, "the tone plays up to the buffering frame \(f)")
            #expect(out[f..<(f + 441)].allSatisfy { $0 == 0 }, "silence from the buffering frame \(f)")
        }
        for e in audible.dropFirst() {
            let f = try #require(e.zoneFrames?["kitchen"])
            #expect(out[(f - 64)..<f].allSatisfy { $0 == 0 }, "silence up to the audible frame \(f)")
            #expect(out[f..<(f + 64)].contains { $0 != 0 }, "the tone is back at the audible frame \(f)")
        }
        // Each sample that says buffering is silent at its audible frame, unless a change of the
        // audio is within a period of it (the sample and the zone's counter are a moment apart).
        let changes = (buffering + audible).compactMap { $0.zoneFrames?["kitchen"] }
        let judged = samples.filter { s in
            s.state == "buffering" && !changes.contains { abs($0 - s.audibleFrame) <= Self.period }
        }
        #expect(!judged.isEmpty)
        for s in judged {
            #expect(
                out[s.audibleFrame..<(s.audibleFrame + 64)].allSatisfy { $0 == 0 },
                "buffering at \(s.audibleFrame) but the file plays")
        }
        let playing = samples.filter { s in
            s.state == "playing" && !changes.contains { abs($0 - s.audibleFrame) <= Self.period }
        }
        for s in playing {
            #expect(
                out[s.audibleFrame..<(s.audibleFrame + 64)].contains { $0 != 0 },
                "playing at \(s.audibleFrame) but the file is silent")
        }
    }
}

extension AudioTruthTests {
    /// Music, three doorbells and a pause/resume, recorded by the harness (every event, a status
    /// sample every period) and judged against the kitchen's file: every sample checked, none
    /// further than a period + ramp from the audio, every event's frame where the audio changes.
    @Test func doorbellsAgreeWithTheAudioAtPeriodResolution() throws {
        let t = try TestDaemon(policy: Self.uncoalescedAnnouncements)
        try Self.judgeDoorbells(t) { t.left("kitchen") }
    }

    /// The same with the kitchen on the virtual sound card (`clock: device`, a 120 ms buffer)
    /// rendering ahead: each bell, the pause and the resume are rendered in by taking back what the
    /// card had not started playing, and the state still agrees with what the card played (its
    /// record: frame n is the zone's frame n, every frame played once) to the period.
    @Test func doorbellsAgreeWithTheAudioRenderingAhead() throws {
        let card = ALSATestRig.makeCard(rate: 44_100, periodFrames: 441, bufferFrames: 5_292)
        let t = try TestDaemon(
            zones: [("kitchen", 44_100, card.name)], policy: Self.uncoalescedAnnouncements, deviceClocked: ["kitchen"],
            buffers: ["kitchen": .milliseconds(120)], renderAhead: ["kitchen"])
        #expect(waitUntil { t.daemon.status().zones.first?.state == "available" })
        try Self.judgeDoorbells(t) { Signals.channel(ALSATestRig.readS16(card.record), 0, of: 2) }
        // One before the card first played (the check that it takes back), then the changes.
        #expect(card.events("rewind").count >= 1 + 5, "each change was rendered in by taking back")
        #expect(card.events("xrun").isEmpty && card.events("rewind-late").isEmpty)
    }

    /// The same with the kitchen's `file` PCM (`clock: system`) rendering ahead into its 120 ms
    /// clocked buffer: each change is rendered in by taking back what the clock had not played, and
    /// the state agrees with the file (what the clock played, frame n the zone's frame n) to the period.
    @Test func doorbellsAgreeWithTheAudioRenderingAheadOnTheSystemClock() throws {
        let t = try TestDaemon(
            policy: Self.uncoalescedAnnouncements, buffers: ["kitchen": .milliseconds(120)], renderAhead: ["kitchen"])
        try Self.judgeDoorbells(t) { t.left("kitchen") }
    }

    static var uncoalescedAnnouncements: PolicyConfig {
        var policy = PolicyConfig.default
        for i in policy.classes.indices where policy.classes[i].name == "announcement" {
            policy.classes[i].coalesce = nil
        }
        return policy
    }

    /// Music, three bells, a pause and a resume on the kitchen, judged against `left()` (what the
    /// zone played, read after the daemon stopped).
    static func judgeDoorbells(_ t: TestDaemon, left: () -> [Float]) throws {
        let recorder = TruthRecorder(port: t.port, intervalMilliseconds: 10)
        recorder.start()
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"sound": "music440", "loop": true, "zones": ["kitchen"]}"#)
                .object["id"])
        for _ in 0..<3 {
            usleep(400_000)
            _ = try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k", "zones": ["kitchen"]}"#)
            _ = t.waitForEvent("interruption-ended", source: id)
        }
        usleep(300_000)
        #expect(try t.request("POST", "/api/v1/music/pause").status == 200)
        usleep(300_000)
        #expect(try t.request("POST", "/api/v1/music/resume").status == 200)
        usleep(400_000)
        let recording = recorder.stop()
        t.stop()
        let judge = TruthJudge(tones: ["music": 440, "announcement": 1000])
        let verdict = judge.judge(
            recording, zones: [.init(name: "kitchen", rate: 44_100, periodFrames: 441, rampFrames: 441, left: left())])
        print("harness: \(verdict.summary)")
        #expect(recording.samples.count > 150, "a sample every period: \(recording.samples.count)")
        #expect(verdict.samplesChecked >= recording.samples.count - 10)
        #expect(verdict.mismatches == 0, "\(verdict.problems)")
        #expect(verdict.eventMismatches == 0, "\(verdict.problems)")
        // Music: granted, audible; each bell heard (two at least; a third may queue behind the
        // second): granted, audible, began, played, ended, audible.
        #expect(verdict.eventsChecked >= 2 + 2 * 6, "\(verdict.eventsChecked)")
        #expect(verdict.widestDisagreementMs <= 20)
    }
}

extension AudioTruthTests {
    /// A server track that decodes to digital zeros ("Digital Silence", FLAC) is heard but silent:
    /// `silent-while-playing` at the frame its first frame was heard, the zone `silent`.
    @Test func silentServerTrackRaisesTheSilenceAlarm() throws {
        let t = try TestDaemon(music: try TestSubsonic.music(), silenceAlarm: .milliseconds(500))
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"search": "Digital Silence", "zones": ["kitchen"]}"#)
                .object["id"])
        let audible = try #require(t.waitForEvent("audible", source: id, seconds: 15))
        let alarm = try #require(t.waitForEvent("silent-while-playing", source: id, seconds: 5))
        #expect(alarm.zoneFrames?["kitchen"] == audible.zoneFrames?["kitchen"])
        #expect(try t.status().zones.first { $0.name == "kitchen" }?.state == "silent")
        #expect(try t.status().sources.first { $0.id == id }?.track?.title == "Digital Silence")
        t.stop()
    }
}

extension AudioTruthTests {
    /// A source the arbiter lets be heard, in a zone whose output is lost (a Snapcast server away),
    /// whose first frame was never mixed there (started, or skipped to the next track, while music
    /// is held there) reads `unavailable`, not `starting`: nothing of it can be heard there. It read
    /// `starting`, and the monitor looked for its first frame every 5 ms for as long as the outage
    /// lasted.
    @Test func aSourceNotBegunWhereTheOutputIsLostIsUnavailable() {
        let outage = Timeline()
        outage.record(on: 4_800, off: nil)
        let part = Hearing.Part(
            zone: "upstairs", audibleFrame: 9_600, sounding: Timeline().snapshot(), firstFrame: nil,
            outage: outage.snapshot())
        #expect(Hearing(parts: [part]).state(arbiter: .playing, previous: "playing") == "unavailable")
        let back = Hearing.Part(
            zone: "upstairs", audibleFrame: 9_600, sounding: Timeline().snapshot(), firstFrame: nil,
            outage: Timeline().snapshot())
        #expect(Hearing(parts: [back]).state(arbiter: .playing, previous: "unavailable") == "starting")
    }

    /// Music paused in a card zone and a Snapcast zone; the Snapcast server goes away; the user
    /// resumes: until the card's delay has passed the music reads `paused` as before, not
    /// `unavailable` — the card zone reaches its listeners, and the Snapcast zone lost nothing of
    /// a source paused before its loss.
    @Test func aSourcePausedBeforeALossIsNotLostThere() {
        let paused = Timeline()
        paused.record(on: 0, off: 1_000)
        let outage = Timeline()
        outage.record(on: 1_500, off: nil)
        let card = Hearing.Part(
            zone: "card", audibleFrame: 2_000, sounding: paused.snapshot(), firstFrame: 0,
            outage: Timeline().snapshot())
        let snapcast = Hearing.Part(
            zone: "upstairs", audibleFrame: 2_000, sounding: paused.snapshot(), firstFrame: 0,
            outage: outage.snapshot())
        #expect(!snapcast.lost)
        #expect(Hearing(parts: [card, snapcast]).state(arbiter: .playing, previous: "paused") == "paused")
    }
}

extension AudioTruthTests {
    /// Music asked at volume 0 plays — its frames pass the output at the gain asked, 0 — and reads
    /// `playing` once its first frame passes (with its `audible` event at that frame), as music at
    /// zone volume 0 does; nothing of it is heard, so it is not in the zone's `audible` and raises no
    /// silence alarm, and the monitor does not look for it every 5 ms. It read `buffering` for as
    /// long as it played (its frames were mixed at gain 0, which counted as not heard), and the
    /// monitor looked every 5 ms for its first frame heard.
    @Test func musicAtVolumeZeroPlaysUnheard() throws {
        let t = try TestDaemon(silenceAlarm: .milliseconds(300))
        let id = try #require(
            try t.json(
                "POST", "/api/v1/music/play", #"{"sound": "music440", "loop": true, "zones": ["kitchen"], "volume": 0}"#
            ).object["id"])
        let audible = try #require(t.waitForEvent("audible", source: id), "its first frame passes the output")
        let first = try #require(audible.zoneFrames?["kitchen"])
        // Past the silence alarm's 300 ms, and a monitor look after it.
        #expect(
            waitUntil { ((try? t.status().zones.first { $0.name == "kitchen" }?.audibleFrame) ?? 0) > first + 22_050 })
        _ = t.daemon.tick()
        let status = try t.status()
        #expect(status.sources.first { $0.id == id }?.state == "playing")
        #expect(status.zones.first { $0.name == "kitchen" }?.audible == [], "nothing of it is heard")
        #expect(t.daemon.events.recent().filter { $0.type == "silent-while-playing" }.isEmpty)
        let next = t.daemon.tick()
        #expect(next == nil || next! > 5_000_000, "the monitor looks again in \(String(describing: next)) ns")
        // Paused and resumed, it reads so: the pause has no fade to play out at volume 0.
        _ = try t.json("POST", "/api/v1/music/pause", "{}")
        #expect(waitUntil { (try? t.status().sources.first { $0.id == id }?.state) == "paused" })
        _ = try t.json("POST", "/api/v1/music/resume", "{}")
        #expect(waitUntil { (try? t.status().sources.first { $0.id == id }?.state) == "playing" })
        t.stop()
        #expect(t.left("kitchen").allSatisfy { $0 == 0 }, "played at gain 0")
    }
}

extension AudioTruthTests {
    /// A zone turned down to 0 while music plays in it: the music plays on, unheard — not in the
    /// zone's `audible`, and no `silent-while-playing` (said after `silence-alarm` each time someone
    /// turned a room down, with the music listed heard). Turned up again, it is heard again.
    @Test func aZoneTurnedDownToZeroHearsNothingAndRaisesNoAlarm() throws {
        let t = try TestDaemon(silenceAlarm: .milliseconds(300))
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"sound": "music440", "loop": true, "zones": ["kitchen"]}"#)
                .object["id"])
        #expect(t.waitForEvent("audible", source: id) != nil)
        try t.daemon.setVolume(zone: "kitchen", volume: 0)
        let down = try #require(try t.status().zones.first { $0.name == "kitchen" }?.audibleFrame)
        // Past the silence alarm's 300 ms, and a monitor look after it.
        #expect(
            waitUntil { ((try? t.status().zones.first { $0.name == "kitchen" }?.audibleFrame) ?? 0) > down + 22_050 })
        _ = t.daemon.tick()
        var kitchen = try #require(try t.status().zones.first { $0.name == "kitchen" })
        #expect(kitchen.audible == [] && kitchen.state == "available", "\(kitchen.audible) \(kitchen.state)")
        #expect(try t.status().sources.first { $0.id == id }?.state == "playing")
        #expect(t.daemon.events.recent().filter { $0.type == "silent-while-playing" }.isEmpty)
        // Turned up after more than the silence alarm at 0: heard again, and no alarm either (the
        // silence of the turn-down, still in the device at the first look, counted from the music's
        // start: the alarm came at once, then `sound-returned`).
        try t.daemon.setVolume(zone: "kitchen", volume: 0.5)
        _ = t.daemon.tick()
        let up = try #require(try t.status().zones.first { $0.name == "kitchen" }?.framesPlayed)
        #expect(waitUntil { ((try? t.status().zones.first { $0.name == "kitchen" }?.audibleFrame) ?? 0) > up + 8_820 })
        _ = t.daemon.tick()
        kitchen = try #require(try t.status().zones.first { $0.name == "kitchen" })
        #expect(kitchen.audible == [id])
        let alarms = t.daemon.events.recent().filter { ["silent-while-playing", "sound-returned"].contains($0.type) }
        #expect(alarms.isEmpty, "\(alarms.map(\.type))")
        t.stop()
    }

    /// Music at volume 0 in two zones, a doorbell in one: muted there, the music does not play
    /// there (its slot stops sounding where the mute begins) while it plays on in the other, and
    /// plays there again once the doorbell is over. It counted as playing where it was muted.
    @Test func musicAtVolumeZeroMutedInAZoneDoesNotPlayThere() throws {
        let t = try TestDaemon(silenceAlarm: .milliseconds(300))
        defer { t.stop() }
        let id = try #require(
            try t.json(
                "POST", "/api/v1/music/play",
                #"{"sound": "music440", "loop": true, "zones": ["kitchen", "patio"], "volume": 0}"#
            ).object["id"])
        #expect(waitUntil { (try? t.status().sources.first { $0.id == id }?.state) == "playing" })
        func sounding(_ zone: String) -> Bool {
            t.daemon.state.withLock { s in
                guard let slot = s.playbacks[SourceID(id)]?.parts.first(where: { $0.zone == zone })?.slot,
                    let z = t.daemon.output(zone)
                else { return false }
                return slot.sounding.snapshot().isOn(at: z.device.snapshot().audibleFrame)
            }
        }
        #expect(waitUntil { sounding("kitchen") && sounding("patio") })
        // Past the silence alarm's 300 ms: a false alarm would be due at once.
        let kitchen = try #require(t.daemon.output("kitchen"))
        let from = kitchen.device.snapshot().audibleFrame
        #expect(waitUntil { kitchen.device.snapshot().audibleFrame > from + 22_050 })
        let bell = try #require(
            try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k", "zones": ["kitchen"]}"#).object["id"])
        #expect(t.waitForEvent("audible", source: bell) != nil)
        #expect(waitUntil { !sounding("kitchen") }, "muted in the kitchen, it does not play there")
        #expect(sounding("patio"))
        #expect(try t.status().sources.first { $0.id == id }?.state == "playing", "it plays on in the patio")
        #expect(t.waitForEvent("played", source: bell) != nil)
        #expect(waitUntil { sounding("kitchen") }, "unmuted, it plays there again")
        // Nothing of it was heard, before the mute or after: no silence alarm for it (one came at
        // the mute, while the frame heard was still before it).
        let alarms = t.daemon.events.recent().filter { $0.type == "silent-while-playing" }
        #expect(alarms.isEmpty, "\(alarms.map { $0.reason ?? "" })")
    }
}
