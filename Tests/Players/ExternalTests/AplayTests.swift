import BatonTesting
import Glibc
import Testing

/// aplay through `baton_x`, the real plugin and the real batond (issue 13 §3).
@Suite(.serialized, .ownThread) struct AplayTests {
    /// The music: the left channel carries 10000 + (n mod 20000) at frame n, the right is silent, so
    /// every frame is recognisable in the zone's output (and never rounds to 0 in a fade).
    static func music(frames: Int) -> [Int16] {
        (0..<frames).flatMap { [Int16(10_000 + $0 % 20_000), 0] }
    }

    /// aplay playing `frames` of `music` (in a WAV) to `baton_x`; the input, and aplay (stopped
    /// when the test ends).
    static func playMusic(_ rig: ExternalRig, frames: Int) throws -> (input: [Int16], aplay: BackgroundProcess) {
        let input = music(frames: frames)
        ExternalRig.writeWAV(rig.directory + "/music.wav", input, channels: 2)
        return (
            input, try rig.program("aplay", ["-q", "-D", "baton_x", rig.directory + "/music.wav"], log: "aplay.log")
        )
    }

    /// A bell on the right channel only.
    static let bell: [Int16] = (0..<(48_000 / 4)).flatMap { [0, Int16(8_000 * sin(Double($0) * 0.1))] }

    /// With `hold`, a doorbell interrupts aplay: every input frame reaches the zone exactly once and
    /// in order (the only changes are the pause and resume fades), the bell plays in between, and
    /// aplay finishes normally.
    @Test func holdPlaysEveryFrameOnceInOrderAroundADoorbell() throws {
        let rig = try ExternalRig(sources: "  x: {class: music, when-interrupted: hold}", sounds: ["bell": Self.bell])
        let frames = 48_000 * 3
        let input = Self.music(frames: frames)
        ExternalRig.writeWAV(rig.directory + "/music.wav", input, channels: 2)
        let aplay = try rig.program("aplay", ["-q", "-D", "baton_x", rig.directory + "/music.wav"], log: "aplay.log")
        usleep(1_000_000)
        #expect(rig.post("/api/v1/announce", #"{"sound": "bell"}"#).contains("\"id\""))
        #expect(aplay.wait(seconds: 15) == 0, "aplay: \(aplay.output)")
        usleep(300_000)
        let events = rig.get("/api/v1/events/recent")
        #expect(events.contains("interruption-began") && events.contains("interruption-ended"), "\(events)")
        #expect(events.contains("aplay (pid \(aplay.pid)) writes S16_LE 2 ch 48000 Hz to baton_x"), "\(events)")

        Self.expectEveryFrameOnceAroundTheBell(rig.zoneSamples(), input: input, frames: frames, bellFrames: 48_000 / 8)
    }

    /// A held program paused through Baton keeps only tens of ms in hand (its pump's lead: 80 ms
    /// here), less than a device buffer (100 ms): its zone goes on. (A zone whose sources are all
    /// paused stops its device half a second in, but a restart at the resume takes a buffer's
    /// worth at once, more than this source has.) Every frame once, in order, and no `buffering`.
    @Test func aHeldProgramPausedThroughBatonKeepsItsZoneRunning() throws {
        let rig = try ExternalRig(
            sources: "  x: {class: music, when-interrupted: hold}", zoneOptions: ", buffer: 100ms")
        let frames = 48_000 * 4
        let (input, aplay) = try Self.playMusic(rig, frames: frames)
        defer { aplay.stop() }
        #expect(waitUntil(seconds: 5) { rig.get("/api/v1/status").contains("\"playing\"") })
        #expect(rig.post("/api/v1/music/pause", "{}").contains("\"command\":\"pause\""), "paused through the API")
        #expect(waitUntil(seconds: 5) { rig.get("/api/v1/status").contains("\"paused\"") })
        func played() -> Int {
            let after = rig.get("/api/v1/status").split(separator: "\"framesPlayed\":").dropFirst().first ?? ""
            return Int(after.prefix { $0.isNumber }) ?? -1
        }
        let before = played()
        usleep(1_000_000)
        #expect(played() - before > 48_000 / 2, "the zone went on while its only source was held")
        #expect(rig.post("/api/v1/music/resume", "{}").contains("\"command\":\"play\""))
        #expect(aplay.wait(seconds: 15) == 0, "aplay: \(aplay.output)")
        usleep(300_000)
        let events = rig.get("/api/v1/events/recent")
        #expect(!events.contains("\"buffering\""), "\(events)")
        let left = rig.zoneSamples().enumerated().filter { $0.offset % 2 == 0 && $0.element != 0 }.map(\.element)
        #expect(left.count == frames, "every frame exactly once")
        let wrong = zip(left, stride(from: 0, to: input.count, by: 2).map { input[$0] }).filter {
            $0.0 > $0.1 || $0.0 <= 0
        }
        #expect(wrong.count == 0, "frames out of order or changed (fades aside)")
    }

    /// `pause` with a command control: paused through Baton, then interrupted by a doorbell, the
    /// player is told to pause once — a second pause, from the interruption, could be a toggle's
    /// play (`playerctl play-pause`) — and after the doorbell, still paused, nothing; resumed
    /// through Baton, told to play once.
    @Test func aPlayerPausedThroughBatonIsNotPausedAgainByAnInterruption() throws {
        let directory = TestDirectory.make("toggle")
        let commands = directory + "/commands"
        let rig = try ExternalRig(
            sources:
                "  x: {class: music, when-interrupted: pause, control: {command: {pause: \"echo pause >> \(commands)\", resume: \"echo resume >> \(commands)\"}}}",
            sounds: ["bell": Self.bell])
        let (_, aplay) = try Self.playMusic(rig, frames: 48_000 * 10)
        defer { aplay.stop() }
        func said() -> [String] {
            guard case .success(let bytes?) = FileReading.read(commands) else { return [] }
            return String(decoding: bytes, as: UTF8.self).split(separator: "\n").map(String.init)
        }
        #expect(waitUntil(seconds: 5) { rig.get("/api/v1/status").contains("\"playing\"") })
        #expect(rig.post("/api/v1/music/pause", "{}").contains("\"command\":\"pause\""))
        #expect(waitUntil(seconds: 5) { said() == ["pause"] }, "\(said())")
        #expect(rig.post("/api/v1/announce", #"{"sound": "bell"}"#).contains("\"id\""))
        #expect(rig.eventsSoon(contain: "interruption-ended"))
        #expect(said() == ["pause"], "paused once: \(said())")
        #expect(rig.post("/api/v1/music/resume", "{}").contains("\"command\":\"play\""))
        #expect(waitUntil(seconds: 5) { said() == ["pause", "resume"] }, "\(said())")
    }

    /// The zone's output of a held `input` interrupted by a bell: the music (left channel) has
    /// every frame exactly once and in order, the pause and resume fades aside, and the bell (right
    /// channel) was heard, at least `bellFrames` of it.
    static func expectEveryFrameOnceAroundTheBell(_ out: [Int16], input: [Int16], frames: Int, bellFrames: Int) {
        let left = stride(from: 0, to: out.count, by: 2).map { out[$0] }.filter { $0 != 0 }
        #expect(left.count == frames, "every frame exactly once")
        var faded = 0
        var wrong = 0
        for (k, v) in left.prefix(frames).enumerated() {
            let x = input[2 * k]
            if v == x { continue }
            if v > 0 && v < x { faded += 1 } else { wrong += 1 }
        }
        #expect(wrong == 0, "frames out of order or changed")
        #expect(faded <= 2 * 480 + 2, "only the pause and resume fades (10 ms each) differ: \(faded)")
        let right = stride(from: 1, to: out.count, by: 2).filter { out[$0] != 0 }
        #expect(right.count > bellFrames)
    }

    /// While `hold` keeps aplay waiting through a 5 s doorbell, the stream's thread sleeps: it is
    /// woken when the source is resumed, not every 10 ms to see whether the paused rings took
    /// something (200 times in 2 s before). The music goes on afterwards, every frame once. (The
    /// 2 s counted must end before the bell does: with a 3 s bell, the looks before them could
    /// take the rest on a busy machine.)
    @Test func aHeldStreamSleepsUntilTheInterruptionEnds() throws {
        let bell: [Int16] = (0..<(48_000 * 5)).flatMap { [0, Int16(8_000 * sin(Double($0) * 0.1))] }
        let rig = try ExternalRig(sources: "  x: {class: music, when-interrupted: hold}", sounds: ["long-bell": bell])
        // Long enough that the bell lands in it even when the status is slow to say "playing" (each
        // look is a curl of its own; on a busy machine it once took the whole of 2 s of music).
        let frames = 48_000 * 6
        let input = Self.music(frames: frames)
        ExternalRig.writeWAV(rig.directory + "/music.wav", input, channels: 2)
        let aplay = try rig.program("aplay", ["-q", "-D", "baton_x", rig.directory + "/music.wav"], log: "aplay.log")
        #expect(waitUntil(seconds: 5) { rig.get("/api/v1/status").contains("\"playing\"") })
        usleep(300_000)
        #expect(rig.post("/api/v1/announce", #"{"sound": "long-bell"}"#).contains("\"id\""))
        #expect(waitUntil(seconds: 2) { rig.get("/api/v1/events/recent").contains("interruption-began") })
        usleep(200_000)  // the pause's 10 ms fade is over
        let held = try rig.wakeUpsInTwoSeconds(ofThreads: "external-stream")["external-stream"] ?? 0
        #expect(!rig.get("/api/v1/events/recent").contains("interruption-ended"), "counted while held")
        #expect(held <= 10, "the held stream's thread woke \(held) times in 2 s")
        #expect(aplay.wait(seconds: 20) == 0, "aplay: \(aplay.output)")
        usleep(300_000)
        #expect(rig.get("/api/v1/events/recent").contains("interruption-ended"))
        Self.expectEveryFrameOnceAroundTheBell(rig.zoneSamples(), input: input, frames: frames, bellFrames: 48_000)
    }

    /// batond's threads sleep until something is due: with an external source configured and no
    /// program, the accept thread does not run at all; while aplay plays, the monitor runs about
    /// once a second and the stream's thread about once per output wake-up (10 ms here) and per
    /// message. Before: 20 accept look-ups a second all day, 200 monitor passes a second and ~450
    /// stream wake-ups a second while a program played (bench-realtime `batond external aplay`).
    @Test func threadsSleepUntilSomethingIsDue() throws {
        let rig = try ExternalRig(sources: "  x: {class: music, when-interrupted: hold}")
        let idle = try rig.wakeUpsInTwoSeconds(ofThreads: "external-accept")["external-accept"] ?? 0
        #expect(idle <= 1, "the accept thread woke while idle")

        ExternalRig.writeWAV(rig.directory + "/music.wav", Self.music(frames: 48_000 * 6), channels: 2)
        let aplay = try rig.program("aplay", ["-q", "-D", "baton_x", rig.directory + "/music.wav"], log: "aplay.log")
        defer { aplay.stop() }
        #expect(waitUntil(seconds: 5) { rig.get("/api/v1/status").contains("\"playing\"") })
        usleep(500_000)
        let ran = try rig.wakeUpsInTwoSeconds(ofThreads: "monitor", "external-stream")
        let (monitorRan, streamRan) = (ran["monitor"] ?? 0, ran["external-stream"] ?? 0)
        #expect(monitorRan <= 10, "the monitor woke \(monitorRan) times in 2 s")
        #expect(streamRan <= 400, "the stream's thread woke \(streamRan) times in 2 s")
    }

    /// batond killed while aplay writes: aplay fails within 2 s (no hang); with batond started
    /// again, a new aplay plays.
    @Test func aplayFailsWhenBatondDiesAndANewOnePlaysAfterARestart() throws {
        let rig = try ExternalRig(sources: "  x: {class: music, when-interrupted: hold}")
        ExternalRig.writeWAV(rig.directory + "/music.wav", Self.music(frames: 48_000 * 10), channels: 2)
        let aplay = try rig.program("aplay", ["-q", "-D", "baton_x", rig.directory + "/music.wav"], log: "aplay.log")
        usleep(800_000)
        rig.killBatond()
        let killed = monotonicSeconds()
        let status = aplay.wait(seconds: 5)
        #expect(status != nil && status != 0, "aplay exits with an error")
        #expect(monotonicSeconds() - killed < 2, "within 2 s")
        try rig.startBatond()
        ExternalRig.writeWAV(rig.directory + "/short.wav", Self.music(frames: 24_000), channels: 2)
        let again = try rig.program("aplay", ["-q", "-D", "baton_x", rig.directory + "/short.wav"], log: "aplay2.log")
        #expect(again.wait(seconds: 10) == 0, "aplay after the restart: \(again.output)")
    }

    /// A program whose source batond ends (here another music source replaces it) is told batond's
    /// sentence, not that batond was lost: batond runs on.
    @Test func aProgramWhoseSourceIsStoppedIsToldWhy() throws {
        let rig = try ExternalRig(sources: "  x: {class: music, when-interrupted: hold}\n  mpd: {class: music}")
        ExternalRig.writeWAV(rig.directory + "/music.wav", Self.music(frames: 48_000 * 10), channels: 2)
        ExternalRig.writeWAV(rig.directory + "/short.wav", Self.music(frames: 24_000), channels: 2)
        let first = try rig.program("aplay", ["-q", "-D", "baton_x", rig.directory + "/music.wav"], log: "first.log")
        // Playing before the second starts (a fixed 0.8 s was not always enough for aplay to start
        // on a busy machine: the two came the other way round).
        #expect(
            waitUntil(seconds: 10) {
                usleep(20_000)
                return rig.get("/api/v1/status").contains("\"playing\"")
            })
        let second = try rig.program(
            "aplay", ["-q", "-D", "baton_mpd", rig.directory + "/short.wav"], log: "second.log")
        #expect(first.wait(seconds: 5) == 1, "the replaced aplay exits with an error: \(first.output)")
        #expect(
            first.output.contains(
                "baton: batond stopped source x (batond at \(rig.socket), source \"x\"); reopen the device"),
            "\(first.output)")
        #expect(!first.output.contains("lost batond"), "\(first.output)")
        #expect(second.wait(seconds: 10) == 0, "the new source plays: \(second.output)")
        // And in batond's log, with the program: only the program said it.
        let log = rig.batond?.output ?? ""
        #expect(
            log.contains("external x: aplay (pid \(first.pid)): batond stopped source x; closing its connection"),
            "\(log)")
    }

    /// A reload that changes an external source's settings, or removes it, stops the program
    /// playing through it with batond's sentence (it played on with the old settings, or as a
    /// source batond no longer had); the reload's report names it. Reopened, the program plays with
    /// the new settings, or is refused with the sources batond has now.
    @Test func aReloadThatChangesOrRemovesTheSourceStopsItsProgram() throws {
        let rig = try ExternalRig(sources: "  x: {class: music, when-interrupted: hold}\n  mpd: {class: music}")
        ExternalRig.writeWAV(rig.directory + "/music.wav", Self.music(frames: 48_000 * 10), channels: 2)
        ExternalRig.writeWAV(rig.directory + "/short.wav", Self.music(frames: 24_000), channels: 2)
        let stopped = "baton: batond stopped source x (batond at \(rig.socket), source \"x\"); reopen the device"
        // aplay plays the long file through x; a reload to `sources` names x and stops it, told why.
        func reloadStopsAplay(_ sources: String, log: String) throws {
            let aplay = try rig.program("aplay", ["-q", "-D", "baton_x", rig.directory + "/music.wav"], log: log)
            #expect(waitUntil(seconds: 5) { rig.get("/api/v1/status").contains("\"playing\"") })
            rig.writeConfig(sources: sources)
            let report = rig.post("/api/v1/reload", "{}")
            #expect(report.contains(#""externalSourcesChanged":["x"]"#), "\(report)")
            #expect(aplay.wait(seconds: 5) == 1, "the program exits with an error: \(aplay.output)")
            #expect(aplay.output.contains(stopped), "\(aplay.output)")
        }
        try reloadStopsAplay("  x: {class: music, when-interrupted: drop}\n  mpd: {class: music}", log: "first.log")
        let again = try rig.program("aplay", ["-q", "-D", "baton_x", rig.directory + "/short.wav"], log: "again.log")
        #expect(again.wait(seconds: 10) == 0, "reopened, it plays: \(again.output)")

        try reloadStopsAplay("  mpd: {class: music}", log: "third.log")
        let refused = try rig.program("aplay", ["-q", "-D", "baton_x", rig.directory + "/short.wav"], log: "gone.log")
        #expect(refused.wait(seconds: 5) == 1)
        #expect(refused.output.contains(#"unknown source "x" (batond's external sources: mpd)"#), "\(refused.output)")
    }

    /// External sources added by a reload to a batond that had none: their socket is set up then,
    /// and aplay plays through them. It was set up only at start: every program was refused
    /// ("cannot connect") until a restart, and the reload said nothing of it.
    @Test func externalSourcesAddedByAReloadPlay() throws {
        let rig = try ExternalRig(sources: "")
        ExternalRig.writeWAV(rig.directory + "/short.wav", Self.music(frames: 24_000), channels: 2)
        rig.writeConfig(sources: "  x: {class: music}")
        let report = rig.post("/api/v1/reload", "{}")
        #expect(report.contains(#""needsRestart":[]"#), "\(report)")
        let aplay = try rig.program("aplay", ["-q", "-D", "baton_x", rig.directory + "/short.wav"], log: "aplay.log")
        #expect(aplay.wait(seconds: 10) == 0, "aplay: \(aplay.output)")
        #expect(rig.get("/api/v1/events/recent").contains("writes S16_LE 2 ch 48000 Hz to baton_x"))
    }

    /// aplay through `baton_x` to the file zone and a virtual card; the card unplugged a second in:
    /// aplay plays on to its end, and the file zone has every frame once and in order (the stream
    /// waited for room in the lost card's ring: aplay hung until a replug).
    @Test func aLostCardDoesNotHoldAProgramPlayingToOtherZonesToo() throws {
        let card = ALSATestRig.makeCard(rate: 48_000, periodFrames: 480, bufferFrames: 1_920)
        let rig = try ExternalRig(
            sources: "  x: {class: music, zones: [a, card]}",
            zones: "  card: {pcm: \"\(card.name)\", rate: 48000, channels: 2, format: S16_LE, clock: device}")
        let frames = 48_000 * 4
        let input = Self.music(frames: frames)
        ExternalRig.writeWAV(rig.directory + "/music.wav", input, channels: 2)
        let aplay = try rig.program("aplay", ["-q", "-D", "baton_x", rig.directory + "/music.wav"], log: "aplay.log")
        #expect(waitUntil(seconds: 5) { card.recordedFrames > 48_000 })
        card.send(.unplug)
        #expect(aplay.wait(seconds: 10) == 0, "aplay: \(aplay.output)")
        usleep(300_000)
        let out = rig.zoneSamples()
        let left = stride(from: 0, to: out.count, by: 2).map { out[$0] }.filter { $0 != 0 }
        #expect(left.count == frames, "every frame once in zone a")
        let changed = zip(left, stride(from: 0, to: input.count, by: 2)).filter { $0.0 != input[$0.1] }.count
        #expect(changed == 0, "frames out of order or changed")
        #expect(rig.get("/api/v1/status").contains("\"unavailable\""))
    }

    /// No batond: the open fails with ECONNREFUSED and one line saying what and where; an unknown
    /// source name fails with batond's sentence naming the configured ones.
    @Test func openFailsClearlyWithoutBatondOrWithAnUnknownSource() throws {
        let rig = try ExternalRig(sources: "  x: {class: music}")
        ExternalRig.writeWAV(rig.directory + "/short.wav", Self.music(frames: 4_800), channels: 2)
        let unknown = try rig.program("aplay", ["-D", "baton_nope", rig.directory + "/short.wav"], log: "nope.log")
        #expect(unknown.wait(seconds: 5) == 1)
        #expect(unknown.output.contains("unknown source \"nope\" (batond's external sources: x)"), "\(unknown.output)")
        rig.killBatond()
        let refused = try rig.program("aplay", ["-D", "baton_x", rig.directory + "/short.wav"], log: "refused.log")
        #expect(refused.wait(seconds: 5) == 1)
        #expect(
            refused.output.contains("baton: cannot reach batond at \(rig.socket) for source \"x\""), "\(refused.output)"
        )
        #expect(refused.output.contains("Connection refused (is batond running?)"), "\(refused.output)")
    }

    /// A user that may not use the socket (mode 0660, group audio: a player's user left out of the
    /// group) is told so, "Permission denied (is this user in the socket's group?)", not "(is batond
    /// running?)" while batond runs. aplay runs as `nobody` through setpriv, since root passes any
    /// mode; given the socket's group, the same user plays.
    @Test(.enabled(if: getuid() == 0, "runs aplay as nobody")) func aUserOutsideTheSocketsGroupIsToldSo() throws {
        let rig = try ExternalRig(sources: "  x: {class: music}")
        chmod(rig.directory, 0o755)  // nobody reads the ALSA configuration and the WAV there
        ExternalRig.writeWAV(rig.directory + "/short.wav", Self.music(frames: 4_800), channels: 2)
        var socket = stat()
        try #require(stat(rig.socket, &socket) == 0)
        try #require(socket.st_mode & 0o007 == 0, "the socket is open to others")
        func aplay(_ groups: String, log: String) throws -> BackgroundProcess {
            try BackgroundProcess(
                "/usr/bin/setpriv",
                [
                    "--reuid=65534", "--regid=65534", groups, "/usr/bin/env", "ALSA_CONFIG_PATH=\(rig.alsaConfig)",
                    "aplay", "-D", "baton_x", rig.directory + "/short.wav",
                ], outputPath: rig.directory + "/" + log)
        }
        let outside = try aplay("--clear-groups", log: "outside.log")
        #expect(outside.wait(seconds: 5) == 1)
        #expect(
            outside.output.contains(
                "baton: cannot reach batond at \(rig.socket) for source \"x\": Permission denied (is this user in the "
                    + "socket's group?)"), "\(outside.output)")
        let inside = try aplay("--groups=\(socket.st_gid)", log: "inside.log")
        #expect(inside.wait(seconds: 10) == 0, "\(inside.output)")
    }
}

/// A surround program in a stereo zone.
@Suite(.ownThread) struct SurroundProgramTests {
    /// The amplitude of `hertz` in `x` (48 kHz; a whole number of its cycles in `x`).
    static func level(_ x: [Double], _ hertz: Double) -> Double {
        var c = 0.0
        var s = 0.0
        for (n, v) in x.enumerated() {
            let phase = 2 * Double.pi * hertz * Double(n) / 48_000
            c += v * cos(phase)
            s += v * sin(phase)
        }
        return 2 * (c * c + s * s).squareRoot() / Double(x.count)
    }

    /// aplay plays a 5.1 WAV (one tone per channel, amplitude 0.3) in ALSA's default order, FL FR
    /// RL RR FC LFE, into the stereo zone: it is downmixed as Baton's decoders downmix (docs/
    /// CODECS.md): each side its front, the centre and its rear at −3 dB, no LFE, over 2.414. Zone
    /// channel c took program channel c: the centre (dialogue) and the rears were never heard.
    @Test func aFiveOneProgramIsDownmixedIntoAStereoZone() throws {
        let rig = try ExternalRig(sources: "  x: {class: music}")
        // FL FR RL RR FC LFE; whole cycles in every 0.5 s.
        let tones: [Double] = [300, 500, 700, 900, 1_100, 1_300]
        let frames = 48_000 * 2
        var input: [Int16] = []
        input.reserveCapacity(frames * tones.count)
        for n in 0..<frames {
            for hertz in tones {
                let phase: Double = 2 * Double.pi * hertz * Double(n) / 48_000
                input.append(Int16(0.3 * 32_767 * sin(phase)))
            }
        }
        ExternalRig.writeWAV(rig.directory + "/surround.wav", input, channels: 6)
        let aplay = try rig.program(
            "aplay", ["-q", "-D", "baton_x", rig.directory + "/surround.wav"], log: "aplay.log")
        #expect(aplay.wait(seconds: 15) == 0, "aplay: \(aplay.output)")
        #expect(rig.eventsSoon(contain: "\"played\"", seconds: 10), "the source played to its end")
        let samples = rig.zoneSamples()
        let start = (samples.firstIndex { $0 != 0 } ?? 0) / 2 + 4_800
        try #require(samples.count / 2 >= start + 24_000, "\(samples.count / 2) frames heard")
        func side(_ c: Int) -> [Double] { (start..<(start + 24_000)).map { Double(samples[2 * $0 + c]) / 32_767 } }
        let (left, right) = (side(0), side(1))
        let h = 0.707_106_77
        let front: Double = 0.3 / (1 + 2 * h)
        let back: Double = front * h
        // Per program channel FL FR RL RR FC LFE: its level in the left and in the right.
        let inLeft: [Double] = [front, 0, back, 0, back, 0]
        let inRight: [Double] = [0, front, 0, back, back, 0]
        let names = ["FL", "FR", "RL", "RR", "FC", "LFE"]
        var expected: [(String, [Double], Double, Double)] = []
        for c in 0..<6 {
            expected.append(("\(names[c]) in left", left, tones[c], inLeft[c]))
            expected.append(("\(names[c]) in right", right, tones[c], inRight[c]))
        }
        for (what, x, hertz, want) in expected {
            let got = Self.level(x, hertz)
            #expect(abs(got - want) < 0.005, "\(what): \(got), expected \(want)")
        }
    }
}

func monotonicSeconds() -> Double {
    var t = timespec()
    clock_gettime(CLOCK_MONOTONIC, &t)
    return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
}

/// The plugin any ALSA program loads.
@Suite(.ownThread) struct PluginTests {
    /// It needs alsa-lib and libc, never the Swift runtime (a program loading it gets no Swift).
    @Test func thePluginDoesNotLinkTheSwiftRuntime() {
        let plugin = Subprocess.buildDirectory + "/libasound_module_pcm_baton.so"
        let (status, output) = Subprocess.run("/usr/bin/ldd", [plugin])
        #expect(status == 0, "\(output)")
        #expect(output.contains("libasound.so"))
        #expect(!output.lowercased().contains("swift"), "\(output)")
        let symbols = Subprocess.run("/usr/bin/nm", ["-D", "--defined-only", plugin]).output
        #expect(symbols.contains("_snd_pcm_baton_open"), "the entry alsa-lib looks up")
    }
}

/// idle-release: a program that keeps its device open but stops writing gives the zones back.
@Suite(.ownThread) struct IdleReleaseTests {
    /// aplay reading raw frames from a FIFO: 1 s of frames, then nothing for longer than
    /// `idle-release` (the source is released: `played`), then frames again (admitted anew).
    @Test func aSilentProgramIsReleasedAndAdmittedAgainWhenItWrites() throws {
        let rig = try ExternalRig(sources: "  x: {class: music, idle-release: 500ms}")
        let fifo = rig.directory + "/frames.fifo"
        mkfifo(fifo, 0o644)
        let aplay = try rig.program(
            "aplay", ["-q", "-D", "baton_x", "-t", "raw", "-f", "S16_LE", "-r", "48000", "-c", "2", fifo],
            log: "aplay.log")
        defer { aplay.stop() }
        let fd = open(fifo, O_WRONLY)
        #expect(fd >= 0)
        defer { close(fd) }
        let second = AplayTests.music(frames: 48_000)
        func send() { _ = second.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } }
        send()
        #expect(rig.eventsSoon(contain: "\"played\""), "released after idle-release")
        send()
        #expect(rig.eventsSoon(contain: "\"music-2\""), "admitted again: \(rig.get("/api/v1/events/recent"))")
    }

    /// `when-interrupted: drop`: a program that opens while another holds the source waits its
    /// turn; when the first — quiet (its frames all played) — goes away, the second is heard. It
    /// was promoted to dropping its frames, for good, because the first was not heard at that
    /// moment (the arbiter's word had not changed, so nothing undid it). The first is a peer that
    /// speaks the protocol and just closes (aplay would pad its last period as it drains).
    @Test func aProgramQueuedBehindAQuietOneIsHeardWhenItCloses() throws {
        // A long idle-release: the first program's quiet must not end the source before it closes.
        let (rig, fd, second) = try Self.queuedBehindAQuietOne("when-interrupted: drop, idle-release: 60s")
        defer { second.stop() }
        close(fd)  // the first goes away
        #expect(
            waitUntil(seconds: 5, every: 0.05) { rig.zoneSamples().contains(0x1234) }, "the second program is heard")
        #expect(second.wait(seconds: 10) == 0, "and plays to its end: \(second.output)")
    }

    /// A program queued behind a quiet one (a player paused with its device open) is heard when
    /// idle-release lets the quiet one go, and plays to its end; the quiet one stays connected (it
    /// is admitted again when it writes). It was refused ("batond released source x") with the
    /// source, its audio lost.
    /// The second opens while the first still plays (a second of frames): its own last frames are
    /// then older than idle-release when it is handed the source, which must not count against it —
    /// it was found idle at the next look and the source ended, its audio lost.
    @Test(arguments: [false, true])
    func aProgramQueuedBehindAQuietOneIsHeardWhenItIsReleased(secondOpensWhileFirstPlays: Bool) throws {
        let (rig, fd, second) = try Self.queuedBehindAQuietOne(
            "idle-release: 500ms", firstSeconds: secondOpensWhileFirstPlays ? 1 : 0.1,
            waitForTheFirst: !secondOpensWhileFirstPlays)
        defer {
            second.stop()
            close(fd)
        }
        #expect(
            waitUntil(seconds: 5, every: 0.05) { rig.zoneSamples().contains(0x1234) }, "the second program is heard")
        #expect(second.wait(seconds: 10) == 0, "and plays to its end: \(second.output)")
    }

    /// Source `x` (with `settings`), a peer that speaks the protocol and sent `firstSeconds` of
    /// frames (then quiet, its connection open), and aplay playing 2 s of 0x1234 to `baton_x`,
    /// waiting its turn behind it — started once the peer's frames all played, or right away.
    static func queuedBehindAQuietOne(
        _ settings: String, firstSeconds: Double = 0.1, waitForTheFirst: Bool = true
    ) throws -> (ExternalRig, Int32, BackgroundProcess) {
        let rig = try ExternalRig(sources: "  x: {class: music, \(settings)}")
        let fd = HostilePeerTests.connectPeer(rig.socket)
        #expect(fd >= 0)
        // S16 stereo, 48 kHz, a 4 096-frame buffer, 256-frame periods.
        let open = HostilePeerTests.message(1, [1, 0, 0, 0] + Array("x".utf8))
        let format = HostilePeerTests.message(4, [0, 0, 0, 0, 2, 0, 0, 0, 0x80, 0xbb, 0, 0, 0, 0x10, 0, 0, 0, 1, 0, 0])
        let data = HostilePeerTests.message(5, [UInt8](repeating: 0x08, count: Int(firstSeconds * 48_000) * 4))
        _ = (open + format + data).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if waitForTheFirst {
            #expect(
                waitUntil(seconds: 15) { rig.get("/api/v1/status").contains("\"buffering\"") }, "its frames played")
        }
        ExternalRig.writeWAV(
            rig.directory + "/second.wav", [Int16](repeating: 0x1234, count: 48_000 * 2 * 2), channels: 2)
        let second = try rig.program(
            "aplay", ["-q", "-D", "baton_x", rig.directory + "/second.wav"], log: "second.log")
        #expect(
            waitUntil(seconds: 5, every: 0.02) {
                (rig.batond?.output ?? "").split(separator: "\n")
                    .count { $0.contains("external x:") && $0.hasSuffix(" connected") } == 2
            }, "the second program waits its turn")
        return (rig, fd, second)
    }

    /// A `hold` source interrupted for longer than its idle-release (a 1 s doorbell, 300 ms): aplay
    /// sends nothing meanwhile (blocked in its write), and that is not idleness: the music goes on
    /// after the doorbell, every frame once, and aplay ends by itself. It used to be released the
    /// moment it was heard again (`played`, `finished`), aplay left blocked for good.
    @Test func aHeldProgramIsNotReleasedWhenHeardAgain() throws {
        let bell: [Int16] = (0..<48_000).flatMap { [0, Int16(8_000 * sin(Double($0) * 0.1))] }
        let rig = try ExternalRig(
            sources: "  x: {class: music, when-interrupted: hold, idle-release: 300ms}", sounds: ["bell1s": bell])
        let frames = 48_000 * 2
        let (input, aplay) = try AplayTests.playMusic(rig, frames: frames)
        defer { aplay.stop() }
        #expect(waitUntil(seconds: 5) { rig.get("/api/v1/status").contains("\"playing\"") })
        usleep(300_000)
        #expect(rig.post("/api/v1/announce", #"{"sound": "bell1s"}"#).contains("\"id\""))
        #expect(aplay.wait(seconds: 15) == 0, "aplay did not end: \(aplay.output)")
        usleep(300_000)
        let events = rig.get("/api/v1/events/recent")
        #expect(events.contains("interruption-ended"))
        AplayTests.expectEveryFrameOnceAroundTheBell(
            rig.zoneSamples(), input: input, frames: frames, bellFrames: 40_000)
    }
}

/// A peer that is not the plugin gets a clear ERROR, and batond runs on.
@Suite(.ownThread) struct HostilePeerTests {
    /// Connects to the socket, sends `bytes`, and returns what batond answers before it closes.
    static func exchange(_ socketPath: String, _ bytes: [UInt8]) -> String {
        let fd = connectPeer(socketPath)
        defer { close(fd) }
        guard fd >= 0 else { return "connect failed" }
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        return answer(fd)
    }

    /// A connected socket, or -1.
    static func connectPeer(_ socketPath: String) -> Int32 {
        // Close-on-exec: a program a test starts meanwhile must not keep it open.
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in socketPath.utf8.enumerated() { raw[i] = b }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            close(fd)
            return -1
        }
        return fd
    }

    /// What batond sends until it closes (5 s at most between reads), the first header left out.
    static func answer(_ fd: Int32) -> String {
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var answer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            answer += chunk[0..<n]
        }
        return String(decoding: answer.dropFirst(answer.count > 8 ? 8 : 0), as: UTF8.self)
    }

    static func message(_ type: UInt32, _ payload: [UInt8]) -> [UInt8] {
        func le(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8((v >> (8 * UInt32($0))) & 0xff) } }
        return le(type) + le(UInt32(payload.count)) + payload
    }

    /// A batond that is stopping refuses an open with "batond is stopping" (an older one said only
    /// that; one now adds "; try again later"): aplay is told the device is busy (-EBUSY, try again),
    /// with the sentence. The plugin took it for no such source (-ENOENT, "No such file or
    /// directory"), and a player opening during `systemctl restart batond` gave up for good.
    @Test func aStoppingBatondIsBusyNotAbsent() throws {
        let rig = try ExternalRig(sources: "  x: {class: music}")
        rig.killBatond()
        unlink(rig.socket)
        // batond's side of the open, as a stopping batond answers it.
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in rig.socket.utf8.enumerated() { raw[i] = b }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        #expect(bound == 0 && listen(listener, 1) == 0, "listening at \(rig.socket): errno \(errno)")
        ExternalRig.writeWAV(rig.directory + "/short.wav", AplayTests.music(frames: 4_800), channels: 2)
        let aplay = try rig.program("aplay", ["-q", "-D", "baton_x", rig.directory + "/short.wav"], log: "stop.log")
        var ready = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
        #expect(poll(&ready, 1, 10_000) == 1, "aplay connects")
        let peer = accept(listener, nil, nil)
        #expect(peer >= 0)
        var open = [UInt8](repeating: 0, count: 64)
        _ = recv(peer, &open, open.count, 0)
        let refusal = Self.message(3, Array("batond is stopping".utf8))
        _ = refusal.withUnsafeBytes { send(peer, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        close(peer)
        #expect(aplay.wait(seconds: 10) != 0)
        #expect(aplay.output.contains("Device or resource busy"), "\(aplay.output)")
        #expect(aplay.output.contains("batond is stopping"), "\(aplay.output)")
    }

    /// A listening socket at `path` in batond's place (batond killed, its socket removed), with
    /// `backlog` connections waiting at most.
    static func fakeBatond(at path: String, backlog: Int32 = 1) -> Int32 {
        unlink(path)
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in path.utf8.enumerated() { raw[i] = b }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        #expect(bound == 0 && listen(listener, backlog) == 0, "listening at \(path): errno \(errno)")
        return listener
    }

    /// Opens `baton_x`, prints `opened`, waits for the file argv[1], then sets the stream up
    /// (hw_params): prints `hw_params RC`.
    static let hwParamsProbe = #"""
        import ctypes, os, sys, time
        lib = ctypes.CDLL("libasound.so.2")
        pcm = ctypes.c_void_p()
        assert lib.snd_pcm_open(ctypes.byref(pcm), b"baton_x", 0, 0) == 0
        print("opened", flush=True)
        while not os.path.exists(sys.argv[1]):
            time.sleep(0.01)
        print("hw_params", lib.snd_pcm_set_params(pcm, 2, 3, 2, 48000, 0, 500000), flush=True)
        """#

    /// batond closed a connection between the open and hw_params (the 30 s FORMAT deadline, a
    /// refusal, a restart), saying why in an ERROR: hw_params fails with the sentence on stderr.
    /// The FORMAT's send failed (EPIPE) and hw_params returned a bare -ENODEV, the sentence unread:
    /// the user saw only "Unable to install hw params: No such device".
    @Test func hwParamsAfterBatondClosedSaysWhy() throws {
        let rig = try ExternalRig(sources: "  x: {class: music}")
        rig.killBatond()
        let listener = Self.fakeBatond(at: rig.socket)
        defer { close(listener) }
        let script = rig.directory + "/hwparams.py"
        let go = rig.directory + "/go"
        ExternalRig.write(script, Self.hwParamsProbe)
        let probe = try rig.program("python3", [script, go], log: "hwparams.log")
        defer { _ = probe.stop() }
        var ready = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
        #expect(poll(&ready, 1, 10_000) == 1, "the probe connects")
        let peer = accept(listener, nil, nil)
        #expect(peer >= 0)
        var open = [UInt8](repeating: 0, count: 64)
        _ = recv(peer, &open, open.count, 0)
        let ok = Self.message(2, [])
        _ = ok.withUnsafeBytes { send(peer, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        #expect(waitUntil(seconds: 10) { probe.output.contains("opened") }, "\(probe.output)")
        // batond's side of the FORMAT deadline: the ERROR, then the connection closed.
        let refusal = Self.message(3, Array("no FORMAT within 30 s of OPEN".utf8))
        _ = refusal.withUnsafeBytes { send(peer, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        close(peer)
        ExternalRig.write(go, "")
        #expect(probe.wait(seconds: 10) == 0, "\(probe.output)")
        #expect(probe.output.contains("hw_params -19"), "\(probe.output)")
        #expect(
            probe.output.contains("baton: no FORMAT within 30 s of OPEN (batond at \(rig.socket), source \"x\")"),
            "\(probe.output)")
    }

    /// A batond alive but not taking connections (stopped, stuck, out of descriptors), its backlog
    /// full: the open gives up within the plugin's 2 s send timeout, busy (-EBUSY, try again), with
    /// a sentence. The connect had no timeout, and snd_pcm_open (MPD's output thread at each retry)
    /// waited for ever.
    @Test func anOpenToABatondThatTakesNoConnectionsGivesUp() throws {
        let rig = try ExternalRig(sources: "  x: {class: music}")
        rig.killBatond()
        let listener = Self.fakeBatond(at: rig.socket, backlog: 0)
        defer { close(listener) }
        // The one connection a backlog of 0 queues: the next connect waits for an accept.
        let queued = Self.connectPeer(rig.socket)
        #expect(queued >= 0)
        defer { close(queued) }
        ExternalRig.writeWAV(rig.directory + "/short.wav", AplayTests.music(frames: 4_800), channels: 2)
        let started = monotonicSeconds()
        let aplay = try rig.program("aplay", ["-q", "-D", "baton_x", rig.directory + "/short.wav"], log: "stuck.log")
        defer { _ = aplay.stop() }
        #expect(aplay.wait(seconds: 10) != nil, "aplay still waits in its open: \(aplay.output)")
        #expect(monotonicSeconds() - started < 8, "it gave up after \(monotonicSeconds() - started) s")
        #expect(aplay.output.contains("Device or resource busy"), "\(aplay.output)")
        #expect(
            aplay.output.contains(
                "baton: batond at \(rig.socket) did not take the connection for source \"x\" within 2 s"),
            "\(aplay.output)")
    }

    /// Garbage, a wrong first message and an unsupported format each get a sentence saying what is
    /// wrong; afterwards aplay still plays.
    @Test func garbageAndBadFormatsGetClearErrorsAndBatondRunsOn() throws {
        let rig = try ExternalRig(sources: "  x: {class: music}")
        #expect(Self.exchange(rig.socket, Array("GET / HTTP/1.0\r\n\r\n".utf8)).contains("not the baton PCM protocol"))
        let open = Self.message(1, [1, 0, 0, 0] + Array("x".utf8))
        let nineChannels = Self.message(4, [0, 0, 0, 0, 9, 0, 0, 0, 0x80, 0xbb, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0])
        let answer = Self.exchange(rig.socket, open + nineChannels)
        #expect(answer.contains("unsupported format: 9 channels (batond takes 1 to 8)"), "\(answer)")
        // Below the plugin's 8 kHz: a resampler of its own could refuse the ratio, and the frames
        // went in at their own rate, the wrong speed and pitch.
        let slow = Self.message(4, [0, 0, 0, 0, 2, 0, 0, 0, 0xe8, 0x03, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0])
        let slowAnswer = Self.exchange(rig.socket, open + slow)
        #expect(slowAnswer.contains("unsupported format: 1000 Hz (batond takes 8000 to 384000 Hz)"), "\(slowAnswer)")
        // The plugin's own limit, 4 MiB: 8 MiB was taken, zero-filled, 32 connections 256 MiB.
        let huge = Self.message(4, [0, 0, 0, 0, 2, 0, 0, 0, 0x80, 0xbb, 0, 0, 0, 0, 0x20, 0, 0, 1, 0, 0])
        let hugeAnswer = Self.exchange(rig.socket, open + huge)
        #expect(
            hugeAnswer.contains(
                "unsupported format: a buffer of 2097152 frames (8388608 bytes of S16_LE 2 ch 48000 Hz); "
                    + "batond takes at most 4 MiB, the plugin's own limit"), "\(hugeAnswer)")
        let largest = Self.message(4, [0, 0, 0, 0, 2, 0, 0, 0, 0x80, 0xbb, 0, 0, 0, 0, 0x10, 0, 0, 1, 0, 0])
        let largestFd = Self.connectPeer(rig.socket)
        defer { close(largestFd) }
        _ = (open + largest).withUnsafeBytes { send(largestFd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var oks = [UInt8](repeating: 0, count: 16)
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(largestFd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        #expect(
            recv(largestFd, &oks, 16, Int32(MSG_WAITALL)) == 16 && oks[0] == 2 && oks[8] == 2,
            "4 MiB exactly is taken (OK, OK): \(oks)")
        let unknownType = Self.exchange(rig.socket, open + Self.message(77, []))
        #expect(unknownType.contains("unknown message type 77"), "\(unknownType)")
        ExternalRig.writeWAV(rig.directory + "/short.wav", AplayTests.music(frames: 4_800), channels: 2)
        let aplay = try rig.program("aplay", ["-q", "-D", "baton_x", rig.directory + "/short.wav"], log: "aplay.log")
        #expect(aplay.wait(seconds: 10) == 0, "batond runs on: \(aplay.output)")
        #expect(rig.batond?.wait(seconds: 0) == nil, "batond is still running")
    }

    /// A program that changes its format and sends the new format's frames in the same write,
    /// without waiting for the OK (a quick program on a slow machine), has them played as the new
    /// format: they went through the old format's converters (a buffer for one channel written with
    /// two), which corrupted batond's memory.
    @Test func framesRightAfterAFormatChangeArePlayedInTheNewFormat() throws {
        let rig = try ExternalRig(sources: "  x: {class: music}")
        let fd = Self.connectPeer(rig.socket)
        #expect(fd >= 0)
        defer { close(fd) }
        // S16, 48 kHz, a 4 096-frame buffer, 256-frame periods.
        func format(channels: UInt8) -> [UInt8] {
            Self.message(4, [0, 0, 0, 0, channels, 0, 0, 0, 0x80, 0xbb, 0, 0, 0, 0x10, 0, 0, 0, 1, 0, 0])
        }
        func data(_ samples: [Int16]) -> [UInt8] {
            Self.message(5, samples.flatMap { [UInt8(truncatingIfNeeded: $0), UInt8(truncatingIfNeeded: $0 >> 8)] })
        }
        func send(_ bytes: [UInt8]) {
            _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }
        send(
            Self.message(1, [1, 0, 0, 0] + Array("x".utf8)) + format(channels: 1)
                + data([Int16](repeating: 8_000, count: 2_048)))
        #expect(rig.eventsSoon(contain: "\"granted\"", seconds: 10), "the program's source was admitted")
        // The new format and 256 frames of it in one write: left 16 000, right -16 000.
        send(format(channels: 2) + data((0..<512).map { $0 % 2 == 0 ? 16_000 : -16_000 }))
        #expect(waitUntil(seconds: 5) { rig.zoneSamples().contains(-16_000) }, "the new format's frames are played")
        #expect(rig.batond?.wait(seconds: 0) == nil, "batond is still running")
        let samples = rig.zoneSamples()
        let first = samples.firstIndex(of: -16_000) ?? 0
        #expect(first % 2 == 1 && samples[max(0, first - 1)] == 16_000, "left and right as sent (at sample \(first))")
    }

    /// A program that goes on sending but stops reading batond's answers (stopped, or hostile):
    /// its POSITIONs are not waited for, so its frames go on being played (batond's thread used to
    /// wait in `send` once the socket was full, taking nothing more); an answer that must reach it
    /// (DRAINED) waits 2 s, then its connection is closed; batond runs on.
    @Test func aProgramThatStopsReadingIsPlayedOnThenClosed() throws {
        let rig = try ExternalRig(sources: "  x: {class: music}")
        let fd = Self.connectPeer(rig.socket)
        #expect(fd >= 0)
        defer { close(fd) }
        func trySend(_ bytes: [UInt8]) -> Bool {
            bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
                == bytes.count
        }
        // S16 stereo, 48 kHz, a 4 096-frame buffer, 256-frame periods; then 10 s at its real rate.
        let format = Self.message(4, [0, 0, 0, 0, 2, 0, 0, 0, 0x80, 0xbb, 0, 0, 0, 0x10, 0, 0, 0, 1, 0, 0])
        #expect(trySend(Self.message(1, [1, 0, 0, 0] + Array("x".utf8)) + format))
        let block = Self.message(
            5, [UInt8](repeating: 0, count: 256 * 4).enumerated().map { $0.offset % 2 == 0 ? 0 : 0x20 })
        let began = monotonicSeconds()
        var sent = 0
        while monotonicSeconds() - began < 10 {
            let due = Int((monotonicSeconds() - began) * 48_000) + 4_096
            while sent < due && trySend(block) { sent += 256 }
            usleep(5_000)
        }
        #expect(sent >= 9 * 48_000, "batond took \(Double(sent) / 48_000) s of the program's 10")
        let played = rig.zoneSamples().count { $0 == 0x2000 } / 2
        #expect(played >= 8 * 48_000, "\(Double(played) / 48_000) s of its frames played")

        #expect(trySend(Self.message(6, [])))  // DRAIN: its DRAINED cannot be sent
        var p = pollfd(fd: fd, events: 0, revents: 0)  // POLLHUP is always reported
        let asked = monotonicSeconds()
        #expect(poll(&p, 1, 6_000) == 1 && p.revents & Int16(POLLHUP) != 0, "batond closed the connection")
        #expect(monotonicSeconds() - asked < 5, "closed \(monotonicSeconds() - asked) s after the DRAIN")
        #expect(rig.batond?.wait(seconds: 0) == nil, "batond is still running")
        let log = rig.batond.map(\.output) ?? ""
        #expect(log.contains("read nothing for 2 s; closing its connection"))
    }

    /// A program that closes inside a frame (killed during a write, or hostile) has its source
    /// played to its end and released, the partial frame dropped and said; the next program on the
    /// source plays. The partial frame stayed in the FIFO, where nothing takes less than a frame:
    /// the stream never finished, the source held its zone ("buffering"), and the next program on
    /// it waited behind it for ever.
    @Test func aProgramThatClosesInsideAFrameIsPlayedToItsEnd() throws {
        let rig = try ExternalRig(sources: "  x: {class: music}")
        let fd = Self.connectPeer(rig.socket)
        #expect(fd >= 0)
        // S16 stereo, 48 kHz, a 4 096-frame buffer, 256-frame periods; a DATA of 4 800 frames of
        // which all but the last frame's last two bytes are sent.
        let format = Self.message(4, [0, 0, 0, 0, 2, 0, 0, 0, 0x80, 0xbb, 0, 0, 0, 0x10, 0, 0, 0, 1, 0, 0])
        let header: [UInt8] = Array(Self.message(5, []).prefix(4)) + [0x00, 0x4b, 0, 0]  // 19 200 bytes
        let frames: [UInt8] = (0..<19_198).map { $0 % 2 == 0 ? 0 : 0x20 }
        let bytes = Self.message(1, [1, 0, 0, 0] + Array("x".utf8)) + format + header + frames
        #expect(bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == bytes.count)
        #expect(rig.eventsSoon(contain: "\"granted\"", seconds: 10), "the program's source was admitted")
        close(fd)
        #expect(rig.eventsSoon(contain: "\"played\"", seconds: 10), "the source played to its end and was released")
        // The last of them still in the card's buffer when the source was released.
        #expect(
            waitUntil(seconds: 5) { rig.zoneSamples().count { $0 == 0x2000 } / 2 == 4_799 }, "every whole frame played")
        let log = rig.batond.map(\.output) ?? ""
        #expect(log.contains("closed its connection inside a frame; its last 2 bytes are dropped"), "\(log)")
        ExternalRig.writeWAV(rig.directory + "/short.wav", AplayTests.music(frames: 4_800), channels: 2)
        let aplay = try rig.program("aplay", ["-q", "-D", "baton_x", rig.directory + "/short.wav"], log: "aplay.log")
        #expect(aplay.wait(seconds: 10) == 0, "the next program plays: \(aplay.output)")
    }

    /// A program the policy refuses (a second call while one plays: `same: reject`) gets its ERROR
    /// at once, twenty in a row well within 2 s: each refusal used to wait its full 100 ms, with
    /// the control plane's lock held, for the stream's own thread, the one that was waiting.
    @Test func refusalsDoNotStallTheDaemon() throws {
        let rig = try ExternalRig(sources: "  x: {class: call}\n  y: {class: call}")
        let format = Self.message(4, [0, 0, 0, 0, 2, 0, 0, 0, 0x80, 0xbb, 0, 0, 0, 0x10, 0, 0, 0, 1, 0, 0])
        let data = Self.message(5, [UInt8](repeating: 0x08, count: 256 * 4))
        let y = Self.connectPeer(rig.socket)
        defer { close(y) }
        let first = Self.message(1, [1, 0, 0, 0] + Array("y".utf8)) + format + data
        _ = first.withUnsafeBytes { send(y, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        #expect(rig.eventsSoon(contain: "\"granted\"", seconds: 10), "y plays")
        let began = monotonicSeconds()
        for _ in 0..<20 {
            let answer = Self.exchange(rig.socket, Self.message(1, [1, 0, 0, 0] + Array("x".utf8)) + format + data)
            #expect(answer.contains("batond refused source x"), "\(answer)")
        }
        let took = monotonicSeconds() - began
        #expect(took < 1.9, "20 refusals took \(took) s")
        let log = rig.batond?.output ?? ""
        #expect(
            log.contains("(pid \(getpid())): batond refused source x: ") && log.contains("; closing its connection"),
            "each refusal is in batond's log, with the program: \(log)")
    }

    /// A name that is not a source name is refused escaped (it cannot forge a log line); an OPEN
    /// trickled a byte at a time is cut at 3 s in all (each byte used to give it 3 s more); past
    /// 32 connections at once the next is refused with a sentence, and batond runs on.
    @Test func oddNamesSlowOpensAndTooManyPeersAreRefused() throws {
        let rig = try ExternalRig(sources: "  x: {class: music}")
        let forged = Self.exchange(
            rig.socket, Self.message(1, [1, 0, 0, 0] + Array("zz\nbatond error: FORGED".utf8)))
        #expect(
            forged.contains(#"the source name "zz\nbatond error: FORGED" is not letters, digits, - and _"#),
            "\(forged)")
        let log = rig.batond.map(\.output) ?? ""
        #expect(!log.contains("\nbatond error: FORGED"), "no forged line in the log")

        // A peer that closes at once (a probe, a second batond's start-up check) is said as that,
        // at info: it was "no OPEN message within 3 s", a warning, and an ERROR on a closed socket.
        let probe = Self.connectPeer(rig.socket)
        #expect(probe >= 0)
        close(probe)
        #expect(
            waitUntil(seconds: 5) {
                usleep(20_000)
                return rig.batond?.output.contains("closed its connection before sending OPEN") == true
            }, "\(rig.batond?.output ?? "")")
        #expect(rig.batond?.output.contains("no OPEN message within 3 s") == false)

        let slow = Self.connectPeer(rig.socket)
        #expect(slow >= 0)
        let began = monotonicSeconds()
        for byte in Self.message(1, [1, 0, 0, 0] + Array("x".utf8)) {
            var b = byte
            guard send(slow, &b, 1, Int32(MSG_NOSIGNAL)) == 1 else { break }
            var p = pollfd(fd: slow, events: Int16(POLLIN), revents: 0)
            if poll(&p, 1, 700) > 0 { break }  // batond answered (and closes)
        }
        let trickled = Self.answer(slow)
        close(slow)
        #expect(trickled.contains("within 3 s"), "\(trickled)")
        #expect(monotonicSeconds() - began < 4.5, "cut after \(monotonicSeconds() - began) s")

        // The file first: the 32 held connections send nothing, and batond closes each 3 s after it
        // came (no OPEN): what follows must be done within that (a loaded run once took longer, and
        // aplay found room).
        ExternalRig.writeWAV(rig.directory + "/short.wav", AplayTests.music(frames: 4_800), channels: 2)
        var held: [Int32] = []
        defer { for fd in held { close(fd) } }
        for _ in 0..<32 { held.append(Self.connectPeer(rig.socket)) }
        let heldAt = monotonicSeconds()
        #expect(held.allSatisfy { $0 >= 0 })
        let refused = Self.exchange(rig.socket, Self.message(1, [1, 0, 0, 0] + Array("x".utf8)))
        #expect(refused.contains("batond has 32 connections from programs already; try again later"), "\(refused)")
        // A program sees it as busy (try again), with batond's sentence: the plugin said every
        // refusal at open was no such source (-ENOENT), or, when batond had closed before OPEN
        // went out, "closed the connection at once" (-ECONNREFUSED).
        let busy = try rig.program("aplay", ["-q", "-D", "baton_x", rig.directory + "/short.wav"], log: "busy.log")
        let status = busy.wait(seconds: 10)
        if monotonicSeconds() - heldAt < 2.5 {
            #expect(status != 0)
            #expect(busy.output.contains("Device or resource busy"), "\(busy.output)")
            #expect(busy.output.contains("try again later"), "\(busy.output)")
        } else {
            // So slow a run that batond had cut the held connections (no OPEN in 3 s): room again.
            #expect(status == 0 || busy.output.contains("try again later"), "\(busy.output)")
        }
        for fd in held { close(fd) }
        held = []
        let aplay = try rig.program("aplay", ["-q", "-D", "baton_x", rig.directory + "/short.wav"], log: "aplay.log")
        #expect(aplay.wait(seconds: 10) == 0, "batond runs on: \(aplay.output)")
    }
}
