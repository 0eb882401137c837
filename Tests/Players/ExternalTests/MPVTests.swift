import BatonTesting
import Glibc
import Testing

/// mpv with mpv-mpris on a private D-Bus session bus, playing to `baton_mpv`, `when-interrupted:
/// pause`, controlled through MPRIS (sd-bus).
@Suite(.serialized, .ownThread) struct MPVTests {
    /// A private session bus (dbus-daemon --session) in `directory`; killed on deinit.
    final class SessionBus {
        let address: String
        let process: BackgroundProcess
        init(_ directory: String) throws {
            address = "unix:path=\(directory)/bus.sock"
            process = try BackgroundProcess(
                "/usr/bin/dbus-daemon", ["--session", "--nofork", "--address=\(address)"],
                outputPath: directory + "/dbus.log")
            guard
                waitUntil(
                    seconds: 5,
                    {
                        usleep(20_000)
                        return access(directory + "/bus.sock", F_OK) == 0
                    })
            else {
                throw ExternalRig.RigError(description: "dbus-daemon did not start: \(process.output)")
            }
        }
        deinit { process.stop() }
    }

    func status(_ rig: ExternalRig) -> String {
        let out = Subprocess.run(
            "/usr/bin/env",
            rig.environment + [
                "busctl", "--user", "get-property", "org.mpris.MediaPlayer2.mpv", "/org/mpris/MediaPlayer2",
                "org.mpris.MediaPlayer2.Player", "PlaybackStatus",
            ], seconds: 5
        ).output
        return out.contains("Playing") ? "Playing" : (out.contains("Paused") ? "Paused" : out)
    }

    /// mpv playing to `baton_mpv` under MPRIS control, heard in the zone.
    func playingMPV(
        _ bus: SessionBus, _ directory: String, bellSeconds: Double = 0.5, whenInterrupted: String = "pause"
    ) throws -> (ExternalRig, BackgroundProcess) {
        let bell: [Int16] = (0..<Int(48_000 * bellSeconds)).flatMap { [0, Int16(8_000 * sin(Double($0) * 0.1))] }
        let rig = try ExternalRig(
            sources:
                "  mpv: {class: music, when-interrupted: \(whenInterrupted), control: {mpris: org.mpris.MediaPlayer2.mpv}}",
            sounds: ["bell": bell], environment: ["DBUS_SESSION_BUS_ADDRESS=\(bus.address)"])
        ExternalRig.writeWAV(rig.directory + "/song.wav", AplayTests.music(frames: 48_000 * 20), channels: 2)
        let mpv = try rig.program(
            "mpv",
            [
                "--no-video", "--no-config", "--ao=alsa", "--audio-device=alsa/baton_mpv",
                "--script=/usr/lib/mpv-mpris/mpris.so", rig.directory + "/song.wav",
            ], log: "mpv.log")
        #expect(
            waitUntil(seconds: 10) {
                usleep(20_000)
                return MPDTests.heard(rig).count > 48_000 / 2
            }, "mpv is heard")
        return (rig, mpv)
    }

    /// mpv playing, then paused by a 4 s bell through MPRIS (long enough for what the user does
    /// during it: a look, a wait and a busctl each, slow on a busy machine). The bus must outlive
    /// the test's use.
    func interruptedMPV() throws -> (ExternalRig, BackgroundProcess, SessionBus) {
        let directory = TestDirectory.make("external-bus")
        let bus = try SessionBus(directory)
        let (rig, mpv) = try playingMPV(bus, directory, bellSeconds: 4)
        #expect(rig.post("/api/v1/announce", #"{"sound": "bell"}"#).contains("\"id\""))
        #expect(waitUntil(seconds: 2) { status(rig) == "Paused" })
        usleep(300_000)
        return (rig, mpv, bus)
    }

    func mpris(_ rig: ExternalRig, _ member: String) {
        let out = Subprocess.run(
            "/usr/bin/env",
            rig.environment + [
                "busctl", "--user", "call", "org.mpris.MediaPlayer2.mpv", "/org/mpris/MediaPlayer2",
                "org.mpris.MediaPlayer2.Player", member,
            ], seconds: 5)
        #expect(out.status == 0, "busctl \(member): \(out.output)")
    }

    /// batond follows mpv's PlaybackStatus through its PropertiesChanged signals: while nothing
    /// changes, its `mpris` thread sleeps (it used to read the property every 50 ms: 40 wake-ups in
    /// these 2 s, and as many round trips through dbus-daemon and mpv).
    @Test func theWatcherSleepsWhileNothingChanges() throws {
        let directory = TestDirectory.make("external-bus")
        let bus = try SessionBus(directory)
        let (rig, mpv) = try playingMPV(bus, directory)
        defer { mpv.stop() }
        let woke = try rig.wakeUpsInTwoSeconds(ofThreads: "mpris")["mpris"] ?? 0
        #expect(woke <= 4, "the mpris thread woke \(woke) times in 2 s")
        #expect(status(rig) == "Playing")
    }

    /// A name nobody owns on the bus (a typo; spotifyd's, which carries its pid) is said once its
    /// grace (`MPRISControl.ownerGrace`, 3 s) has passed, in the source's `controlError` and a
    /// `control-error` event: it was accepted and never reported until a doorbell's Pause failed.
    @Test func aNameWithNoOwnerIsSaid() throws {
        let directory = TestDirectory.make("external-bus")
        let bus = try SessionBus(directory)
        let rig = try ExternalRig(
            sources: "  mpv: {class: music, control: {mpris: org.mpris.MediaPlayer2.nobody}}",
            environment: ["DBUS_SESSION_BUS_ADDRESS=\(bus.address)"])
        ExternalRig.writeWAV(rig.directory + "/song.wav", AplayTests.music(frames: 48_000 * 10), channels: 2)
        let aplay = try rig.program("aplay", ["-q", "-D", "baton_mpv", rig.directory + "/song.wav"], log: "aplay.log")
        defer { aplay.stop() }
        #expect(waitUntil(seconds: 5) { rig.get("/api/v1/status").contains("\"music-") }, "the source plays")
        let said = "org.mpris.MediaPlayer2.nobody has no owner on the session bus"
        #expect(
            waitUntil(seconds: 5) {
                usleep(20_000)
                return rig.get("/api/v1/status").contains("\"controlError\":\"\(said)\"")
            }, "\(rig.get("/api/v1/status"))")
        #expect(rig.eventsSoon(contain: said))
    }

    /// A player that takes its name a moment after its first frames (mpv does so after opening its
    /// audio, about 0.25 s after its launch) is not said to have no owner: the control starts at
    /// the first frames, and the name is given `MPRISControl.ownerGrace` (3 s) to appear. It was
    /// reported at once, a `control-error` and a warning for a player that was starting.
    @Test func aPlayerThatTakesItsNameLateIsNotSaidMissing() throws {
        let directory = TestDirectory.make("external-bus")
        let bus = try SessionBus(directory)
        let rig = try ExternalRig(
            sources: "  mpv: {class: music, control: {mpris: org.mpris.MediaPlayer2.mpv}}",
            environment: ["DBUS_SESSION_BUS_ADDRESS=\(bus.address)"])
        ExternalRig.writeWAV(rig.directory + "/song.wav", AplayTests.music(frames: 48_000 * 10), channels: 2)
        let aplay = try rig.program("aplay", ["-q", "-D", "baton_mpv", rig.directory + "/song.wav"], log: "aplay.log")
        defer { aplay.stop() }
        #expect(waitUntil(seconds: 5) { rig.get("/api/v1/status").contains("\"music-") }, "the source plays")
        let playing = monotonicSeconds()
        usleep(300_000)
        let mpv = try rig.program(
            "mpv", ["--no-config", "--idle=yes", "--ao=null", "--script=/usr/lib/mpv-mpris/mpris.so"], log: "mpv.log")
        defer { mpv.stop() }
        #expect(
            waitUntil(seconds: 5) {
                usleep(50_000)
                return Subprocess.run(
                    "/usr/bin/env", rig.environment + ["busctl", "--user", "list", "--acquired"], seconds: 5
                ).output.contains("org.mpris.MediaPlayer2.mpv ")
            }, "mpv takes its name")
        let named = monotonicSeconds() - playing
        // Past the grace (`MPRISControl.ownerGrace`, 3 s), counted from before the source was seen
        // playing.
        let past = playing + 3.5 - monotonicSeconds()
        if past > 0 { usleep(UInt32(past * 1e6)) }
        let events = rig.get("/api/v1/events/recent")
        if named < 2.5 {
            #expect(!events.contains("control-error"), "\(events)")
        } else if named > 3.2 {
            // A machine so loaded that mpv took its name after the grace: then it was said, rightly.
            #expect(events.contains("has no owner"), "mpv named \(named) s after: \(events)")
        }
        // Once the name is there, the status does not say it is missing.
        #expect(
            waitUntil(seconds: 3) { !rig.get("/api/v1/status").contains("controlError") },
            "\(rig.get("/api/v1/status"))")
    }

    /// A player whose MPRIS name carries its pid (spotifyd's `org.mpris.MediaPlayer2.spotifyd.
    /// instance<PID>`; a second mpv's `org.mpris.MediaPlayer2.mpv.instance<PID>`) is reached by
    /// the name without it: the configured name had no owner, and no pause ever reached it.
    @Test func anInstanceOfTheNameIsFollowedAndTold() throws {
        let directory = TestDirectory.make("external-bus")
        let bus = try SessionBus(directory)
        let rig = try ExternalRig(
            sources: "  mpv: {class: music, when-interrupted: pause, control: {mpris: org.mpris.MediaPlayer2.mpv}}",
            environment: ["DBUS_SESSION_BUS_ADDRESS=\(bus.address)"])
        ExternalRig.writeWAV(rig.directory + "/song.wav", AplayTests.music(frames: 48_000 * 20), channels: 2)
        // Another mpv holds the plain name, so the one under test takes its instance name; it
        // then quits, leaving the instance name alone on the bus.
        let other = try rig.program(
            "mpv", ["--no-config", "--idle=yes", "--ao=null", "--script=/usr/lib/mpv-mpris/mpris.so"], log: "other.log")
        func names() -> String {
            Subprocess.run("/usr/bin/env", rig.environment + ["busctl", "--user", "list", "--acquired"], seconds: 5)
                .output
        }
        #expect(
            waitUntil(seconds: 10) {
                usleep(50_000)
                return names().contains("org.mpris.MediaPlayer2.mpv ")
            })
        let mpv = try rig.program(
            "mpv",
            [
                "--no-video", "--no-config", "--ao=alsa", "--audio-device=alsa/baton_mpv", "--pause",
                "--script=/usr/lib/mpv-mpris/mpris.so", rig.directory + "/song.wav",
            ], log: "mpv.log")
        defer { mpv.stop() }
        let instance = "org.mpris.MediaPlayer2.mpv.instance\(mpv.pid)"
        #expect(
            waitUntil(seconds: 10) {
                usleep(50_000)
                return names().contains(instance)
            }, "\(names())")
        _ = other.stop()
        #expect(
            waitUntil(seconds: 5) {
                usleep(50_000)
                return !names().contains("org.mpris.MediaPlayer2.mpv ")
            })
        func call(_ member: String) {
            let out = Subprocess.run(
                "/usr/bin/env",
                rig.environment + [
                    "busctl", "--user", "call", instance, "/org/mpris/MediaPlayer2", "org.mpris.MediaPlayer2.Player",
                    member,
                ], seconds: 5)
            #expect(out.status == 0, "busctl \(member): \(out.output)")
        }
        func playbackStatus() -> String {
            Subprocess.run(
                "/usr/bin/env",
                rig.environment + [
                    "busctl", "--user", "get-property", instance, "/org/mpris/MediaPlayer2",
                    "org.mpris.MediaPlayer2.Player", "PlaybackStatus",
                ], seconds: 5
            ).output
        }
        call("Play")
        #expect(
            waitUntil(seconds: 10) {
                usleep(20_000)
                return MPDTests.heard(rig).count > 48_000 / 2
            }, "mpv is heard")
        #expect(rig.post("/api/v1/music/pause", "{}").contains("\"command\":\"pause\""))
        #expect(waitUntil(seconds: 5) { playbackStatus().contains("Paused") }, "mpv: \(playbackStatus())")
        #expect(!rig.get("/api/v1/status").contains("controlError"), "\(rig.get("/api/v1/status"))")
    }

    /// With two mpvs on the bus, the TV's owning `org.mpris.MediaPlayer2.mpv` and the one writing to
    /// Baton `org.mpris.MediaPlayer2.mpv.instance<PID>`, a pause through Baton reaches the one whose
    /// pid wrote to it: the plain name came first, and Baton paused the TV.
    @Test func theInstanceOfThePlayersPidIsToldBeforeThePlainName() throws {
        let directory = TestDirectory.make("external-bus")
        let bus = try SessionBus(directory)
        let rig = try ExternalRig(
            sources: "  mpv: {class: music, when-interrupted: drop, control: {mpris: org.mpris.MediaPlayer2.mpv}}",
            environment: ["DBUS_SESSION_BUS_ADDRESS=\(bus.address)"])
        ExternalRig.writeWAV(rig.directory + "/song.wav", AplayTests.music(frames: 48_000 * 20), channels: 2)
        func names() -> String {
            Subprocess.run("/usr/bin/env", rig.environment + ["busctl", "--user", "list", "--acquired"], seconds: 5)
                .output
        }
        func playbackStatus(_ name: String) -> String {
            let out = Subprocess.run(
                "/usr/bin/env",
                rig.environment + [
                    "busctl", "--user", "get-property", name, "/org/mpris/MediaPlayer2",
                    "org.mpris.MediaPlayer2.Player", "PlaybackStatus",
                ], seconds: 5
            ).output
            return out.contains("Playing") ? "Playing" : (out.contains("Paused") ? "Paused" : out)
        }
        // The TV's mpv, not Baton's: it plays to no device, and holds the plain name.
        let tv = try rig.program(
            "mpv", ["--no-config", "--ao=null", "--script=/usr/lib/mpv-mpris/mpris.so", rig.directory + "/song.wav"],
            log: "tv.log")
        defer { tv.stop() }
        #expect(
            waitUntil(seconds: 10) {
                usleep(50_000)
                return names().contains("org.mpris.MediaPlayer2.mpv ")
            })
        let mpv = try rig.program(
            "mpv",
            [
                "--no-video", "--no-config", "--ao=alsa", "--audio-device=alsa/baton_mpv",
                "--script=/usr/lib/mpv-mpris/mpris.so", rig.directory + "/song.wav",
            ], log: "mpv.log")
        defer { mpv.stop() }
        let instance = "org.mpris.MediaPlayer2.mpv.instance\(mpv.pid)"
        #expect(
            waitUntil(seconds: 10) {
                usleep(20_000)
                return MPDTests.heard(rig).count > 48_000 / 2
            }, "mpv is heard")
        #expect(waitUntil(seconds: 5) { playbackStatus(instance) == "Playing" }, "\(names())")
        #expect(rig.post("/api/v1/music/pause", "{}").contains("\"command\":\"pause\""))
        #expect(waitUntil(seconds: 5) { playbackStatus(instance) == "Paused" }, "mpv: \(playbackStatus(instance))")
        #expect(playbackStatus("org.mpris.MediaPlayer2.mpv") == "Playing", "the TV plays on")
    }

    /// Stopped through Baton (`music/stop`), mpv is told to pause through MPRIS: it went on saying
    /// "Playing" while nothing was heard, its writes refused. (MPD pauses by itself when its only
    /// output fails; mpv does not.) Whatever an interruption does to it: with `hold` or `drop` the
    /// control only followed the player, and a stop left it "Playing" — AirPlay's sender too.
    @Test(arguments: ["pause", "hold", "drop"]) func aStopThroughBatonPausesMPV(whenInterrupted: String) throws {
        let directory = TestDirectory.make("external-bus")
        let bus = try SessionBus(directory)
        let (rig, mpv) = try playingMPV(bus, directory, whenInterrupted: whenInterrupted)
        defer { mpv.stop() }
        let stop = rig.post("/api/v1/music/stop", "{}")
        let id = try #require(stop.split(separator: "\"").drop { $0 != "id" }.dropFirst(2).first, "\(stop)")
        #expect(waitUntil(seconds: 5) { !rig.get("/api/v1/status").contains("\"\(id)\"") }, "\(id) ended")
        #expect(waitUntil(seconds: 5) { status(rig) == "Paused" }, "mpv: \(status(rig))")
    }

    /// A pause and a resume given through Baton (`music/pause`, `music/resume`) reach mpv through
    /// MPRIS whatever `when-interrupted` says (that is about interruptions): with `drop` mpv played
    /// on, "Playing", its audio discarded, and the resume came back later in the track by the
    /// length of the pause; with `hold` it sat blocked, "Playing". Paused, it says Paused;
    /// resumed, it says Playing and the music goes on from the frame where it was paused (what mpv
    /// had sent before its pause kept for the resume).
    @Test(arguments: ["drop", "hold"]) func aPauseAndResumeThroughBatonReachMPV(whenInterrupted: String) throws {
        let directory = TestDirectory.make("external-bus")
        let bus = try SessionBus(directory)
        let (rig, mpv) = try playingMPV(bus, directory, whenInterrupted: whenInterrupted)
        defer { mpv.stop() }
        #expect(rig.post("/api/v1/music/pause", "{}").contains("\"command\":\"pause\""))
        #expect(waitUntil(seconds: 5) { status(rig) == "Paused" }, "mpv paused: \(status(rig))")
        usleep(1_500_000)  // a pause long enough to show as a jump in the track
        #expect(rig.get("/api/v1/status").contains("\"state\":\"paused\""), "the source waits, paused, for mpv")
        let before = MPDTests.heard(rig).count
        #expect(rig.post("/api/v1/music/resume", "{}").contains("\"command\":\"play\""))
        #expect(waitUntil(seconds: 5) { status(rig) == "Playing" }, "mpv plays: \(status(rig))")
        #expect(
            waitUntil(seconds: 5) {
                usleep(20_000)
                return MPDTests.heard(rig).count > before + 48_000
            }, "and is heard again")
        MPDTests.expectTheSongGoesOnFromTheCut(MPDTests.heard(rig))
        #expect(!rig.get("/api/v1/events/recent").contains("control-error"))
    }

    /// A pause or a resume through Baton given during a doorbell reaches a `drop` mpv at the
    /// doorbell's end: paused, then resumed during the bell, it plays after it and is heard; playing,
    /// then paused during the bell, it says Paused after it. The arbiter goes paused → interrupted
    /// → playing, or interrupted → paused, with no playing ↔ paused step: mpv stayed paused while
    /// the source read "playing", or played on, discarded, under a source read "paused".
    @Test func aPauseOrResumeDuringADoorbellReachesADropMPVAtItsEnd() throws {
        let directory = TestDirectory.make("external-bus")
        let bus = try SessionBus(directory)
        let (rig, mpv) = try playingMPV(bus, directory, bellSeconds: 2, whenInterrupted: "drop")
        defer { mpv.stop() }
        #expect(rig.post("/api/v1/music/pause", "{}").contains("\"command\":\"pause\""))
        #expect(waitUntil(seconds: 5) { status(rig) == "Paused" }, "mpv paused: \(status(rig))")
        #expect(rig.post("/api/v1/announce", #"{"sound": "bell"}"#).contains("\"id\""))
        #expect(rig.post("/api/v1/music/resume", "{}").contains("\"command\":\"play\""))
        #expect(status(rig) == "Paused", "not before the bell ends")
        #expect(waitUntil(seconds: 8) { status(rig) == "Playing" }, "mpv plays after the bell: \(status(rig))")
        let before = MPDTests.heard(rig).count
        #expect(
            waitUntil(seconds: 5) {
                usleep(20_000)
                return MPDTests.heard(rig).count > before + 48_000
            }, "and is heard again")
        #expect(rig.post("/api/v1/announce", #"{"sound": "bell"}"#).contains("\"id\""))
        #expect(rig.post("/api/v1/music/pause", "{}").contains("\"command\":\"pause\""))
        #expect(waitUntil(seconds: 8) { status(rig) == "Paused" }, "mpv paused after the bell: \(status(rig))")
        #expect(rig.get("/api/v1/status").contains("\"state\":\"paused\""))
    }

    /// mpv crashes while paused through Baton: its MPRIS name leaves the bus, and the source ends
    /// ("the player left"). It waited for a player that was gone, "paused" in the status for as
    /// long as the pause lasted, its resume a Play to nobody. (mpv that quits says "Stopped".)
    @Test func aPlayerThatCrashesWhilePausedEndsItsSource() throws {
        let directory = TestDirectory.make("external-bus")
        let bus = try SessionBus(directory)
        let (rig, mpv) = try playingMPV(bus, directory)
        defer { _ = mpv.stop() }
        #expect(rig.post("/api/v1/music/pause", "{}").contains("\"command\":\"pause\""))
        #expect(waitUntil(seconds: 5) { status(rig) == "Paused" })
        #expect(rig.get("/api/v1/status").contains("\"music-"), "the source waits, paused")
        _ = mpv.stop(signal: SIGKILL)  // a crash: no PlaybackStatus "Stopped" on the way out
        #expect(rig.eventsSoon(contain: "the player left (quit or crashed)"))
        #expect(waitUntil(seconds: 5) { !rig.get("/api/v1/status").contains("\"music-") }, "the source ended")
    }

    /// The user pauses mpv, plays it and pauses it again through its own controls (MPRIS), each
    /// within a second: Baton reads each. It told mpv back the Pause and the Play mpv had reported
    /// — changing nothing there, so mpv signalled nothing of them — and waited 3 s for mpv's word on
    /// each: the user's second pause was taken for Baton's echo, and Baton read playing while mpv
    /// was paused.
    @Test func aUsersQuickPausePlayPauseIsReadEachTime() throws {
        let directory = TestDirectory.make("external-bus")
        let bus = try SessionBus(directory)
        let (rig, mpv) = try playingMPV(bus, directory)
        defer { mpv.stop() }
        let state = { (want: String) in
            waitUntil(seconds: 2, every: 0.02) { rig.get("/api/v1/status").contains("\"state\":\"\(want)\"") }
        }
        mpris(rig, "Pause")
        #expect(state("paused"), "the user's pause")
        mpris(rig, "Play")
        #expect(state("playing"), "the user's play")
        mpris(rig, "Pause")
        #expect(state("paused"), "the user's second pause, within 3 s of the first")
        usleep(500_000)
        #expect(status(rig) == "Paused" && rig.get("/api/v1/status").contains("\"state\":\"paused\""))
    }

    /// A Play and then a Pause the user gives mpv through MPRIS during the interruption are a user
    /// pause: the interruption ends with shouldResume false and mpv stays paused. (Back to back, a
    /// few ms apart, mpv signals only the Paused it ends in: there is nothing to see then.)
    @Test func aUserPlayAndPauseDuringTheInterruptionLeavesMPVPaused() throws {
        let (rig, mpv, bus) = try interruptedMPV()
        defer { mpv.stop() }
        _ = bus
        mpris(rig, "Play")
        usleep(200_000)
        mpris(rig, "Pause")
        #expect(rig.eventsSoon(contain: "interruption-ended", seconds: 8))
        let events = rig.get("/api/v1/events/recent")
        #expect(events.contains("\"shouldResume\":false"), "\(events)")
        usleep(500_000)
        #expect(status(rig) == "Paused", "mpv stays paused")
    }

    /// A Play given through MPRIS during the interruption is not lost: the source reads
    /// interrupted until the bell ends, which ends with shouldResume true for the user's play, and
    /// mpv plays on, heard — both say playing.
    @Test func aUserPlayDuringTheInterruptionIsHeardAfterIt() throws {
        let (rig, mpv, bus) = try interruptedMPV()
        defer { mpv.stop() }
        _ = bus
        mpris(rig, "Play")
        #expect(rig.eventsSoon(contain: "the user gave the player play", seconds: 3))
        let during = rig.get("/api/v1/status")
        #expect(during.contains("\"state\":\"interrupted\""), "\(during)")
        #expect(rig.eventsSoon(contain: "\"shouldResume\":true", seconds: 8), "the bell ends with a resume")
        #expect(rig.get("/api/v1/events/recent").contains("user command play during interruption"))
        let before = MPDTests.heard(rig).count
        #expect(
            waitUntil(seconds: 5) {
                usleep(50_000)
                return MPDTests.heard(rig).count > before + 48_000 / 2
            }, "the play is heard after the interruption")
        #expect(status(rig) == "Playing")
        #expect(rig.get("/api/v1/status").contains("\"state\":\"playing\""))
    }

    /// An announcement pauses mpv through MPRIS within 200 ms; after it, mpv plays again and is heard.
    @Test func anAnnouncementPausesMPVThroughMPRISAndItPlaysOnAfter() throws {
        let directory = TestDirectory.make("external-bus")
        let bus = try SessionBus(directory)
        let (rig, mpv) = try playingMPV(bus, directory)
        defer { mpv.stop() }
        #expect(status(rig) == "Playing")
        // mpv's PlaybackStatus as mpv signals it (a `busctl` started for each look took longer
        // than the bound under test on a busy machine).
        let watch = try PlayerWatch(
            rig,
            "dbus-monitor --session \"type='signal',member='PropertiesChanged',path='/org/mpris/MediaPlayer2'\"",
            log: "mpv-watch.log")
        let asked = monotonicSeconds()
        #expect(rig.post("/api/v1/announce", #"{"sound": "bell"}"#).contains("\"id\""))
        let began = monotonicSeconds()
        let paused = try #require(
            watch.time(of: #"string "Paused""#),
            "mpv: \(status(rig)); events: \(rig.get("/api/v1/events/recent")); batond: \(rig.batond?.output ?? "")")
        #expect(paused >= asked, "a pause said after the request")
        let pausedAfter = paused - began
        #expect(pausedAfter < 0.2, "paused \(Int(pausedAfter * 1000)) ms after interruption-began")
        let before = MPDTests.heard(rig)
        #expect(
            waitUntil(seconds: 5) {
                usleep(20_000)
                return status(rig) == "Playing"
            }, "mpv plays again")
        usleep(1_000_000)
        let after = MPDTests.heard(rig)
        #expect(after.count > before.count + 48_000 / 2, "the music goes on in the zone")
        MPDTests.expectTheSongGoesOnFromTheCut(after)
        let events = rig.get("/api/v1/events/recent")
        #expect(events.contains("\"shouldResume\":true"), "\(events)")
        #expect(!events.contains("control-error"), "\(events)")
    }
}
