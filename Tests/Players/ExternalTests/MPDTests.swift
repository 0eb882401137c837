import BatonTesting
import Glibc
import Testing

/// MPD (with mpc) playing to `baton_mpd`, `when-interrupted: pause`, controlled through MPD's protocol.
@Suite(.serialized, .ownThread) struct MPDTests {
    final class MPD {
        let port: Int
        let process: BackgroundProcess
        let rig: ExternalRig

        /// `songSeconds`: the one song in its queue.
        init(_ rig: ExternalRig, port: Int, songSeconds: Int = 30) throws {
            self.rig = rig
            self.port = port
            let d = rig.directory
            mkdir(d + "/music", 0o755)
            ExternalRig.writeWAV(
                d + "/music/song.wav", AplayTests.music(frames: 48_000 * songSeconds), channels: 2)
            ExternalRig.write(
                d + "/mpd.conf",
                """
                music_directory "\(d)/music"
                db_file "\(d)/mpd.db"
                bind_to_address "127.0.0.1"
                port "\(port)"
                audio_output {
                    type "alsa"
                    name "baton"
                    device "baton_mpd"
                    mixer_type "none"
                }

                """)
            process = try rig.program("mpd", ["--no-daemon", "--stderr", d + "/mpd.conf"], log: "mpd.log")
            guard
                waitUntil(
                    seconds: 10,
                    {
                        usleep(50_000)
                        return self.mpc(["status"]).status == 0
                    })
            else {
                throw ExternalRig.RigError(description: "mpd did not start: \(process.output)")
            }
            _ = mpc(["update", "--wait"])
            _ = mpc(["add", "song.wav"])
        }

        @discardableResult
        func mpc(_ arguments: [String]) -> (status: Int32, output: String) {
            Subprocess.run("/usr/bin/mpc", ["-p", "\(port)"] + arguments, seconds: 5)
        }

        /// MPD's own word on its state, each time it changes (`idle player`, then `status`), as MPD
        /// says it (`PlayerWatch`): `state: pause` once paused.
        func watch() throws -> PlayerWatch {
            let script = rig.directory + "/mpd-watch.py"
            ExternalRig.write(
                script,
                """
                import socket, sys
                f = socket.create_connection(('127.0.0.1', \(port))).makefile('rw')
                print(f.readline(), end='', flush=True)
                def answer():
                    while True:
                        line = f.readline()
                        if not line: sys.exit()
                        print(line, end='', flush=True)
                        if line.startswith('OK') or line.startswith('ACK'): return
                while True:
                    for command in ('idle player', 'status'):
                        f.write(command + '\\n')
                        f.flush()
                        answer()

                """)
            return try PlayerWatch(rig, "/usr/bin/python3 -u \(script)", log: "mpd-watch.log")
        }

        var state: String {
            let out = mpc(["status"]).output
            return out.contains("[playing]") ? "playing" : (out.contains("[paused]") ? "paused" : "stopped")
        }

        deinit { process.stop() }
    }

    /// MPD playing to the `mpd` source (`pause`, controlled over MPD's protocol), heard in the zone;
    /// the rig's `bell` lasts `bellSeconds`.
    /// `options`: more keys for the source, each after ", ".
    static func playing(bellSeconds: Double, options: String = "") throws -> (ExternalRig, MPD) {
        let port = try FreePort.next()
        let bell: [Int16] = (0..<Int(48_000 * bellSeconds)).flatMap { [0, Int16(8_000 * sin(Double($0) * 0.1))] }
        let rig = try ExternalRig(
            sources: "  mpd: {class: music, when-interrupted: pause\(options), control: {mpd: 127.0.0.1:\(port)}}",
            sounds: bell.isEmpty ? [:] : ["bell": bell])
        let mpd = try MPD(rig, port: port)
        mpd.mpc(["play"])
        #expect(
            waitUntil(seconds: 5) {
                usleep(20_000)
                return Self.heard(rig).count > 48_000 / 2
            }, "MPD is heard")
        return (rig, mpd)
    }

    /// From the cut on, the song's next frames (the fades aside) for 0.4 s: what the player had
    /// sent and dropped at Baton's pause plays first (it was discarded: about a second of MPD's
    /// music was skipped at every doorbell). The player's own loss — what its output held, dropped
    /// at its pause as on any card — comes after them (docs/EXTERNAL.md). `heard`: the left
    /// channel heard (`heard(_:)`) of a song from its first frame (`AplayTests.music`).
    static func expectTheSongGoesOnFromTheCut(_ heard: [Int16]) {
        let song = { (k: Int) in Int16(10_000 + k % 20_000) }  // `AplayTests.music`'s left channel
        let cut = heard.indices.first { heard[$0] != song($0) } ?? heard.count
        #expect(heard.count >= cut + 19_000, "heard \(heard.count) frames, cut at \(cut)")
        var faded = 0
        var wrong: [Int] = []
        for k in cut..<min(heard.count, cut + 19_000) where heard[k] != song(k) {
            if heard[k] > 0 && heard[k] < song(k) { faded += 1 } else { wrong.append(k) }
        }
        let misplaced = wrong.count  // (the count only in the failure's expansion, not 20 000 indices)
        #expect(misplaced == 0, "not the song's next frame at \(wrong.prefix(3)) (cut at \(cut))")
        #expect(faded <= 2 * 480 + 2, "only the pause and resume fades (10 ms each) differ: \(faded)")
    }

    /// The music's frames heard so far (left channel non-zero).
    static func heard(_ rig: ExternalRig) -> [Int16] {
        let out = rig.zoneSamples()
        return stride(from: 0, to: out.count, by: 2).map { out[$0] }.filter { $0 != 0 }
    }

    /// A pause and a resume given through Baton (its API) reach MPD too: `mpc status` says paused
    /// (it went on saying playing, blocked on the paused source), the source waits for MPD through
    /// a pause longer than its idle-release (MPD closes its device), and after the resume MPD
    /// plays again and is heard (it was never asked to, and the source ended).
    @Test func aPauseAndResumeThroughBatonReachMPD() throws {
        let (rig, mpd) = try Self.playing(bellSeconds: 0, options: ", idle-release: 1s")
        #expect(rig.post("/api/v1/music/pause", "{}").contains("\"command\":\"pause\""))
        #expect(waitUntil(seconds: 5) { mpd.state == "paused" }, "MPD paused: \(mpd.state)")
        usleep(2_000_000)  // past idle-release
        #expect(rig.get("/api/v1/status").contains("\"paused\""), "the source waits, paused, for MPD")
        let heard = Self.heard(rig).count
        #expect(rig.post("/api/v1/music/resume", "{}").contains("\"command\":\"play\""))
        #expect(waitUntil(seconds: 5) { mpd.state == "playing" }, "MPD plays: \(mpd.state)")
        #expect(
            waitUntil(seconds: 5) {
                usleep(20_000)
                return Self.heard(rig).count > heard + 48_000 / 2
            }, "and is heard again")
    }

    /// A reload that changes the `mpd` source while a doorbell holds MPD paused ends the source
    /// before the doorbell: nothing will tell MPD to play, and it stays paused. That is said (an
    /// `external` event and a warning naming the program); the music was silently gone, and the
    /// status no longer listed it.
    @Test func aReloadDuringAnInterruptionSaysMPDStaysPaused() throws {
        let (rig, mpd) = try Self.playing(bellSeconds: 4)
        rig.post("/api/v1/announce", #"{"sound": "bell"}"#)
        #expect(waitUntil(seconds: 2) { mpd.state == "paused" })
        rig.writeConfig(
            sources:
                "  mpd: {class: music, when-interrupted: pause, idle-release: 2s, control: {mpd: 127.0.0.1:\(mpd.port)}}"
        )
        let report = rig.post("/api/v1/reload", "{}")
        #expect(report.contains(#""externalSourcesChanged":["mpd"]"#), "\(report)")
        let said = "mpd (pid \(mpd.process.pid)) on baton_mpd stays paused: Baton paused it for an interruption"
        #expect(rig.eventsSoon(contain: said), "\(rig.get("/api/v1/events/recent"))")
        #expect(rig.batond?.output.contains(said) == true, "logged")
        #expect(mpd.state == "paused")
    }

    /// MPD plays its one short song to the end of its queue: its output drains the device
    /// (non-blocking: one snd_pcm_drain, then it waits for the state to leave DRAINING) and MPD
    /// stops, every frame heard. A drain that answered -EAGAIN and never left DRAINING kept MPD
    /// "playing" at the end of its queue for ever (found by a review before it was committed).
    @Test func mpdPlaysToTheEndOfItsQueueAndStops() throws {
        let port = try FreePort.next()
        let rig = try ExternalRig(
            sources: "  mpd: {class: music, when-interrupted: pause, control: {mpd: 127.0.0.1:\(port)}}")
        let mpd = try MPD(rig, port: port, songSeconds: 1)
        #expect(mpd.mpc(["play"]).status == 0)
        // Started, as the zone hears it: the one-second song can begin and end between two
        // `mpc status` under load (CI saw "playing" never answered in 5 s).
        #expect(
            waitUntil(seconds: 5) {
                usleep(20_000)
                return !Self.heard(rig).isEmpty
            }, "MPD is heard")
        // Stopped, as MPD itself answers (a hung MPD does not answer `mpc status` at all).
        let stopped = {
            let status = mpd.mpc(["status"])
            return status.status == 0 && !status.output.contains("[playing]") && !status.output.contains("[paused]")
        }
        #expect(waitUntil(seconds: 8) { stopped() }, "MPD stopped at the end: \(mpd.mpc(["status"]))")
        #expect(Self.heard(rig).count > 48_000 * 9 / 10, "the song heard: \(Self.heard(rig).count) frames")
        // Not said to be the user's: it read "the user gave the player stop". Whether MPD's own
        // stop is seen at all depends on a race (MPD closes its output as it stops, which may end the
        // source first): waited for, not required.
        _ = rig.eventsSoon(contain: "the player stopped (its own controls or the end of its queue)")
        #expect(!rig.get("/api/v1/events/recent").contains("the user gave the player stop"))
    }

    /// An announcement interrupts MPD: `mpc status` shows it paused within 200 ms of the
    /// interruption's beginning; after the bell MPD plays again and the music goes on in the zone
    /// from the frame where it was cut, for as long as batond held MPD's frames.
    @Test func anAnnouncementPausesMPDAndItPlaysOnAfter() throws {
        let (rig, mpd) = try Self.playing(bellSeconds: 0.5)
        // Status shows the program, its pid and the control, beside the class and state.
        let status = rig.get("/api/v1/status")
        #expect(status.contains("\"program\":\"mpd\"") && status.contains("\"pid\":\(mpd.process.pid)"), "\(status)")
        #expect(status.contains("\"control\":\"mpd 127.0.0.1:\(mpd.port)\""), "\(status)")
        let watch = try mpd.watch()
        let asked = monotonicSeconds()
        #expect(rig.post("/api/v1/announce", #"{"sound": "bell"}"#).contains("\"id\""))
        let began = monotonicSeconds()
        let paused = try #require(watch.time(of: "state: pause"), "MPD paused: \(watch.process.output)")
        #expect(paused >= asked, "a pause said after the request")
        let pausedAfter = paused - began
        #expect(pausedAfter < 0.2, "paused \(Int(pausedAfter * 1000)) ms after interruption-began")
        let before = Self.heard(rig)
        #expect(
            waitUntil(seconds: 5) {
                usleep(20_000)
                return mpd.state == "playing"
            }, "MPD plays again")
        usleep(1_000_000)
        let after = Self.heard(rig)
        #expect(after.count > before.count + 48_000 / 2, "the music goes on in the zone")
        Self.expectTheSongGoesOnFromTheCut(after)
        let events = rig.get("/api/v1/events/recent")
        #expect(events.contains("\"shouldResume\":true"), "\(events)")
        #expect(events.contains("mpd (pid \(mpd.process.pid))"), "\(events)")
    }

    /// A change the user makes through MPD during the interruption (here `mpc play` then `mpc
    /// pause`) is a user pause: the interruption ends with shouldResume false and MPD stays paused.
    /// Before it, while MPD plays on, batond's `mpd-control` thread sleeps in `idle` (it woke every
    /// 500 ms to look whether it should stop).
    /// (A 4 s bell: what the user does must come before it ends, slow on a busy machine.)
    @Test func aUserPauseDuringTheInterruptionLeavesMPDPaused() throws {
        let (rig, mpd) = try Self.playing(bellSeconds: 4)
        let ran = try rig.wakeUpsInTwoSeconds(ofThreads: "mpd-control")["mpd-control"] ?? 0
        #expect(ran <= 2, "the mpd-control thread woke \(ran) times in 2 s")
        rig.post("/api/v1/announce", #"{"sound": "bell"}"#)
        #expect(waitUntil(seconds: 2) { mpd.state == "paused" })
        usleep(200_000)
        mpd.mpc(["play"])
        usleep(200_000)
        mpd.mpc(["pause"])
        #expect(rig.eventsSoon(contain: "interruption-ended", seconds: 8), "the bell ends")
        usleep(500_000)  // a play Baton gave at the end would show by now
        #expect(mpd.state == "paused", "MPD stays paused")
        let events = rig.get("/api/v1/events/recent")
        #expect(events.contains("\"shouldResume\":false"), "\(events)")
    }

    /// A play given through MPD during the interruption is not lost: the source reads interrupted
    /// (not paused) until the bell ends, the interruption ends with shouldResume true for the
    /// user's play, and MPD plays on, heard in the zone — both say playing; a pause and a play the
    /// user gives right after are seen.
    @Test func aUserPlayDuringTheInterruptionIsHeardAfterIt() throws {
        let (rig, mpd) = try Self.playing(bellSeconds: 4)
        rig.post("/api/v1/announce", #"{"sound": "bell"}"#)
        #expect(waitUntil(seconds: 2) { mpd.state == "paused" })
        usleep(300_000)
        mpd.mpc(["play"])
        #expect(rig.eventsSoon(contain: "the user gave the player play", seconds: 3))
        let during = rig.get("/api/v1/status")
        #expect(during.contains("\"state\":\"interrupted\""), "\(during)")
        #expect(rig.eventsSoon(contain: "\"shouldResume\":true", seconds: 8), "the bell ends with a resume")
        #expect(rig.get("/api/v1/events/recent").contains("user command play during interruption"))
        // MPD plays already: Baton does not tell it to play (a play it already does changes
        // nothing MPD reports, and Baton, waiting 3 s for the word, took the user's next play for
        // its own: it read paused while MPD played). The user's pause and play right after are theirs.
        mpd.mpc(["pause"])
        #expect(waitUntil(seconds: 2, every: 0.02) { rig.get("/api/v1/status").contains("\"state\":\"paused\"") })
        mpd.mpc(["play"])
        #expect(
            waitUntil(seconds: 2, every: 0.02) { rig.get("/api/v1/status").contains("\"state\":\"playing\"") },
            "the user's play after the resume is seen")
        let before = Self.heard(rig).count
        #expect(
            waitUntil(seconds: 5) {
                usleep(50_000)
                return Self.heard(rig).count > before + 48_000 / 2
            }, "the play is heard after the interruption")
        #expect(mpd.state == "playing")
        #expect(rig.get("/api/v1/status").contains("\"state\":\"playing\""))
    }
}
