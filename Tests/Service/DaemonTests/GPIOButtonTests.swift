import BatonConfig
import BatonTesting
import GPIO
import Glibc
import OSThread
import Testing

@testable import BatonDaemon
@testable import BatonService
@testable import ControlParts

/// An edge source whose edges the test replays when it wants (the daemon's zones are up by then).
final class HeldEdgeSource: EdgeSource, @unchecked Sendable {
    // @unchecked: `handler` is set once by start() before the test replays.
    private var handler: (@Sendable (EdgeEvent) -> Void)?
    func start(_ handler: @escaping @Sendable (EdgeEvent) -> Void) { self.handler = handler }
    func stop() {}
    /// Delivers `events` in order on the calling thread, as a reader thread would.
    func replay(_ events: [EdgeEvent]) { RecordedEdgeSource(events).start(handler!) }
}

/// GPIO buttons in the daemon. This machine has no GPIO chip: the edges come from a recorded trace
/// through the same `EdgeSource` interface the libgpiod reader implements; the real reader is used
/// for the missing-chip case.
@Suite(.serialized, .ownThread) struct GPIOButtonTests {
    /// A press with contact bounce (falling edge, bounces within 50 ms, release) rings the doorbell
    /// once: one announcement, one press counted, 1 kHz in the kitchen.
    @Test func bouncyPressRingsOnce() throws {
        let trace: [EdgeEvent] = [
            .falling(ms: 0), .rising(ms: 0.4), .falling(ms: 1.1), .rising(ms: 2.0), .falling(ms: 3.5),
            .rising(ms: 180), .falling(ms: 181), .rising(ms: 183),
        ]
        let button = GPIOButtonConfig(line: 17, announce: AnnounceAction(sound: "bell1k", zones: ["kitchen"]))
        let line = HeldEdgeSource()
        let t = try TestDaemon(gpio: [button], edgeSources: { _ in line })
        line.replay(trace)
        let granted = try #require(t.waitForEvent("granted", seconds: 10))
        #expect(granted.source == "announce-1")
        #expect(t.waitForEvent("played", source: "announce-1") != nil)
        #expect(!t.daemon.events.recent().contains { $0.source == "announce-2" }, "one press, one announcement")
        let status = try #require(try t.status().gpio?.first)
        #expect(status.state == "listening" && status.presses == 1 && status.line == 17)
        t.stop()
        let out = t.left("kitchen")
        let at = try #require(granted.zoneFrames?["kitchen"]) + 882
        #expect(Signals.windowedToneLevel(out[at..<(at + 4_410)], frequency: 1000, rate: 44_100) > 0.4)
    }

    /// The real libgpiod reader on a machine without the chip: a clear error (chip and errno text) in
    /// status and as a `gpio-error` event; announcements still play.
    @Test func missingChipIsAClearError() throws {
        let button = GPIOButtonConfig(chip: "gpiochip0", line: 17, announce: AnnounceAction(sound: "bell1k"))
        let t = try TestDaemon(gpio: [button])
        defer { t.stop() }
        let status = try #require(try t.status().gpio?.first)
        #expect(status.state == "unavailable")
        #expect(status.error?.contains("gpiochip0: No such file or directory") == true, "\(status.error ?? "")")
        #expect(t.waitForEvent("gpio-error")?.reason?.contains("gpio[0] (gpiochip0 line 17)") == true)
        #expect(try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k"}"#).status == 202)
    }

    /// A button whose sound is not in the sounds directory (a typo: "dorbell") is said at start —
    /// a `gpio-error` event and its status — not found at the first visitor's ring, silent; a press
    /// then says it rang nothing; the status looks again each time (the sound may be added).
    @Test func aButtonWithAMissingSoundIsSaidAtStartAndAtEachPress() throws {
        let button = GPIOButtonConfig(line: 17, announce: AnnounceAction(sound: "dorbell", zones: ["kitchen"]))
        let line = HeldEdgeSource()
        let t = try TestDaemon(gpio: [button], edgeSources: { _ in line })
        defer { t.stop() }
        let atStart = try #require(t.waitForEvent("gpio-error", seconds: 0)?.reason)
        #expect(atStart.hasPrefix(#"gpio[0] (gpiochip0 line 17): its sound "dorbell" is not in the sounds directory"#))
        #expect(atStart.contains("doorbell"), "the sounds it has: \(atStart)")
        var status = try #require(try t.status().gpio?.first)
        #expect(
            status.state == "listening"
                && status.error == String(atStart.dropFirst("gpio[0] (gpiochip0 line 17): ".count)))
        line.replay([.falling(ms: 0)])
        #expect(waitUntil(seconds: 5) { t.daemon.events.recent().filter { $0.type == "gpio-error" }.count == 2 })
        let pressed = t.daemon.events.recent().last { $0.type == "gpio-error" }?.reason ?? ""
        #expect(pressed.contains(#"pressed, but sound "dorbell""#), "\(pressed)")
        status = try #require(try t.status().gpio?.first)
        #expect(
            status.presses == 1 && status.error?.hasPrefix("its sound \"dorbell\"") == true, "\(status.error ?? "-")")
        #expect(!t.daemon.events.recent().contains { $0.type == "granted" }, "nothing rang")
        // The sound added: the status says so at once, and the next press rings.
        #expect(link("\(t.sounds)/bell1k.wav", "\(t.sounds)/dorbell.wav") == 0)
        status = try #require(try t.status().gpio?.first)
        #expect(status.state == "listening" && status.error == nil, "\(status.error ?? "-")")
        line.replay([.rising(ms: 500), .falling(ms: 1000)])
        #expect(t.waitForEvent("granted", seconds: 5) != nil)
    }

    /// A button that speaks, on a speaker whose speech program cannot run (espeak-ng not
    /// installed, `speech.command` wrong): said at start and at each press, as a missing sound is.
    /// The press's error was `unavailable`, which went to the log only: "listening", no error, the
    /// presses counted, the doorbell rang nothing.
    @Test func aButtonWhoseSpeechCannotRunIsSaidAtStartAndAtEachPress() throws {
        let button = GPIOButtonConfig(line: 17, announce: AnnounceAction(text: "Someone is at the door"))
        let line = HeldEdgeSource()
        let t = try TestDaemon(
            speech: SpeechConfig(command: "/nonexistent/espeak-ng"), gpio: [button], edgeSources: { _ in line })
        defer { t.stop() }
        let cannot = "speech: cannot run /nonexistent/espeak-ng: not installed (apt install espeak-ng)"
        let atStart = try #require(t.waitForEvent("gpio-error", seconds: 0)?.reason)
        #expect(atStart.hasPrefix("gpio[0] (gpiochip0 line 17): its text cannot be spoken: \(cannot)"), "\(atStart)")
        var status = try #require(try t.status().gpio?.first)
        #expect(status.state == "listening" && status.error?.contains(cannot) == true, "\(status.error ?? "-")")
        line.replay([.falling(ms: 0)])
        #expect(waitUntil(seconds: 5) { t.daemon.events.recent().filter { $0.type == "gpio-error" }.count == 2 })
        let pressed = t.daemon.events.recent().last { $0.type == "gpio-error" }?.reason ?? ""
        #expect(pressed.contains("pressed, but \(cannot)"), "\(pressed)")
        status = try #require(try t.status().gpio?.first)
        #expect(status.presses == 1 && status.error?.contains(cannot) == true, "\(status.error ?? "-")")
        #expect(!t.daemon.events.recent().contains { $0.type == "granted" }, "nothing rang")
        // The program installed (here: the configuration's path made a working one): the status
        // says so at once, as for a sound added, not after the next press.
        let speech = "/tmp/baton-tests-speech-\(getpid())"
        _ = try TextFile.script(speech, "#!/bin/sh\nexec espeak-ng \"$@\"\n")
        defer { unlink(speech) }
        var config = t.config
        config.speech.command = speech
        #expect(t.daemon.apply(config).applied)
        status = try #require(try t.status().gpio?.first)
        #expect(status.error == nil, "\(status.error ?? "-")")
    }

    /// A button that speaks, in a voice espeak-ng does not have (`speech.voice: englsh`): its text
    /// is rendered once at start and the failure said there — a `gpio-error` event, the button's
    /// status — not at the first visitor's ring, lost (the status read "listening", no error, until
    /// then). A reload to a voice espeak-ng has renders it again and clears the error; the rendering
    /// is kept, so the first press does not run espeak-ng again.
    @Test func aButtonsTextIsTriedAtStartAndAfterEachReload() throws {
        let dir = TestDirectory.make("speech-runs")
        let runs = dir + "/runs"
        let speech = try TextFile.script(dir + "/speak", "#!/bin/sh\necho run >> \(runs)\nexec espeak-ng \"$@\"\n")
        let count = { () -> Int in
            guard case .success(let bytes?) = FileIO.read(runs) else { return 0 }
            return bytes.count { $0 == UInt8(ascii: "\n") }
        }
        let button = GPIOButtonConfig(
            line: 17, announce: AnnounceAction(text: "Someone is at the door", zones: ["kitchen"]))
        let line = HeldEdgeSource()
        let t = try TestDaemon(
            speech: SpeechConfig(voice: "englsh", command: speech), gpio: [button], edgeSources: { _ in line })
        defer { t.stop() }
        let failed = #"its text cannot be spoken: speech: espeak-ng failed (voice "englsh")"#
        let said = try #require(t.waitForEvent("gpio-error", seconds: 10)?.reason, "not said before a press")
        #expect(said.hasPrefix("gpio[0] (gpiochip0 line 17): \(failed)"), "\(said)")
        #expect(said.hasSuffix(": a press rings nothing"), "\(said)")
        let status = try #require(try t.status().gpio?.first)
        #expect(status.state == "listening" && status.error?.hasPrefix(failed) == true, "\(status.error ?? "-")")
        #expect(count() == 1)
        var config = t.config
        config.speech.voice = "en"
        #expect(t.daemon.apply(config).applied)
        #expect(
            waitUntil(seconds: 10) { (try? t.status())?.gpio?.first.map { $0.error == nil } == true },
            "the reload's rendering clears the error")
        #expect(count() == 2)
        line.replay([.falling(ms: 0)])
        #expect(t.waitForEvent("granted", seconds: 10) != nil)
        #expect(count() == 2, "the press plays the rendering made at the reload")
        #expect(t.daemon.events.recent().filter { $0.type == "gpio-error" }.count == 1)
    }

    /// A button's text whose rendering at start could not be tried (here espeak-ng's first run
    /// writes no audio, as with /tmp full; on a Pi busy at boot it times out) is not one that
    /// "rings nothing": a warning and the status say it is tried again at the next press, no
    /// `gpio-error`; the press renders and rings, and the status is clear. It was said as "its text
    /// cannot be spoken: …: a press rings nothing" with a gpio-error, not looked at again.
    @Test func aTextThatCouldNotBeTriedAtStartIsNotSaidToRingNothing() throws {
        let dir = TestDirectory.make("speech-once-empty")
        let speech = try TextFile.script(
            dir + "/speak",
            "#!/bin/sh\nif [ ! -e \(dir)/tried ]; then touch \(dir)/tried; exit 0; fi\nexec espeak-ng \"$@\"\n")
        let button = GPIOButtonConfig(
            line: 17, announce: AnnounceAction(text: "Someone is at the door", zones: ["kitchen"]))
        let line = HeldEdgeSource()
        let t = try TestDaemon(speech: SpeechConfig(command: speech), gpio: [button], edgeSources: { _ in line })
        defer { t.stop() }
        let couldNot = "its text could not be tried (speech: espeak-ng wrote no audio); tried again at the next press"
        #expect(
            waitUntil(seconds: 10) { (try? t.status())?.gpio?.first?.error == couldNot },
            "\((try? t.status())?.gpio?.first?.error ?? "-")")
        #expect(!t.daemon.events.recent().contains { $0.type == "gpio-error" })
        line.replay([.falling(ms: 0)])
        #expect(t.waitForEvent("granted", seconds: 10) != nil)
        // The press clears the status once its announcement is admitted, just after the grant's
        // event (CI read it in between once).
        #expect(
            waitUntil(seconds: 5) {
                let status = (try? t.status())?.gpio?.first
                return status?.state == "listening" && status?.error == nil
            }, "\((try? t.status())?.gpio?.first?.error ?? "-")")
        #expect(!t.daemon.events.recent().contains { $0.type == "gpio-error" })
    }

    /// A button whose text could not be tried at start nor at a reload that renamed its zone, then
    /// pressed: the press renders (espeak-ng is past), its announcement is refused (the zone is gone),
    /// and the status says that — it read "its text could not be tried …; tried again at the next
    /// press", a press that had just tried it and failed for another reason.
    @Test func aPressPastTheSpeechSaysItsOwnFailure() throws {
        let dir = TestDirectory.make("speech-twice-empty")
        let runs = dir + "/runs"
        // The first two runs (start, the reload) write no audio, as with /tmp full.
        let speech = try TextFile.script(
            dir + "/speak",
            "#!/bin/sh\necho run >> \(runs)\n[ $(wc -l < \(runs)) -le 2 ] && exit 0\nexec espeak-ng \"$@\"\n")
        let count = { () -> Int in
            guard case .success(let bytes?) = FileIO.read(runs) else { return 0 }
            return bytes.count { $0 == UInt8(ascii: "\n") }
        }
        let button = GPIOButtonConfig(
            line: 17, announce: AnnounceAction(text: "Someone is at the door", zones: ["patio"]))
        let line = HeldEdgeSource()
        let t = try TestDaemon(speech: SpeechConfig(command: speech), gpio: [button], edgeSources: { _ in line })
        defer { t.stop() }
        let couldNot = "its text could not be tried (speech: espeak-ng wrote no audio); tried again at the next press"
        #expect(waitUntil(seconds: 10) { (try? t.status())?.gpio?.first?.error == couldNot })
        var new = t.config
        new.zones[1].name = "terrace"
        new.gpio[0].announce.zones = ["terrace"]
        #expect(t.daemon.apply(new).applied)
        // The reload's check has run (and found the same) once its thread is gone.
        #expect(waitUntil(seconds: 10) { count() == 2 && Self.threads(named: "speech-check") == 0 })
        line.replay([.falling(ms: 0)])
        let said = try #require(t.waitForEvent("gpio-error", seconds: 10)?.reason)
        #expect(said.contains(#"pressed, but unknown zone or group "patio""#), "\(said)")
        #expect(count() == 3)
        let status = try #require(try t.status().gpio?.first)
        let error = status.error ?? "-"
        #expect(error.contains(#"pressed, but unknown zone or group "patio""#), "\(error)")
    }

    /// A chattering line (forty presses at once, a long doorbell wire) on a button that speaks,
    /// with speech slow to render: one press at a time, the newest waiting — a thread for each
    /// press piled up, without bound, each waiting on the synthesizer.
    @Test func aChatteringButtonDoesNotPileUpThreads() throws {
        let slow = try TextFile.script(
            TestDirectory.make("slow-speech") + "/speak", "#!/bin/sh\nsleep 1\nexec espeak-ng \"$@\"\n")
        let button = GPIOButtonConfig(
            line: 17, announce: AnnounceAction(text: "Someone is at the door", zones: ["kitchen"]))
        let line = HeldEdgeSource()
        let t = try TestDaemon(speech: SpeechConfig(command: slow), gpio: [button], edgeSources: { _ in line })
        defer { t.stop() }
        // The threads are counted in this process: an earlier test's press may still be ending
        // (its speech outlives its daemon by up to the synthesizer's run).
        #expect(waitUntil(seconds: 10) { Self.threads(named: "press") == 0 }, "an earlier test's press thread runs on")
        line.replay((0..<40).flatMap { [.falling(ms: Double($0) * 200), .rising(ms: Double($0) * 200 + 100)] })
        #expect(try t.status().gpio?.first?.presses == 40)
        // A thread the press thread starts (the synthesizer's deadline watch) carries the name
        // "press" until it names itself, a few microseconds later: one such read is no second
        // press thread. Piled-up press threads each wait a second and more on the synthesizer.
        var pressThreads = 0
        #expect(
            waitUntil(seconds: 0.5) {
                pressThreads = Self.threads(named: "press")
                return pressThreads <= 1
            }, "\(pressThreads) press threads")
        #expect(t.waitForEvent("granted", seconds: 20) != nil, "it speaks")
    }

    /// How many of this process's threads are named `name`.
    static func threads(named name: String) -> Int {
        guard let dir = opendir("/proc/self/task") else { return -1 }
        defer { closedir(dir) }
        var count = 0
        while let entry = readdir(dir) {
            let tid = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard !tid.hasPrefix("."), let f = fopen("/proc/self/task/\(tid)/comm", "r") else { continue }
            var buffer = [UInt8](repeating: 0, count: 64)
            let read = buffer.withUnsafeMutableBytes { fread($0.baseAddress, 1, 63, f) }
            if String(decoding: buffer[..<read], as: UTF8.self) == name + "\n" { count += 1 }
            fclose(f)
        }
        return count
    }

    /// A button whose zone a reload renamed (the file's button updated too; buttons take a reload
    /// at the next start): a press says it rang nothing, as an event and in the button's status. It
    /// was said nowhere but the log: "listening", the presses counted, silence.
    @Test func aPressIntoAZoneNoLongerThereIsSaid() throws {
        let button = GPIOButtonConfig(line: 17, announce: AnnounceAction(sound: "bell1k", zones: ["patio"]))
        let line = HeldEdgeSource()
        let t = try TestDaemon(gpio: [button], edgeSources: { _ in line })
        defer { t.stop() }
        var new = t.config
        new.zones[1].name = "terrace"
        new.gpio[0].announce.zones = ["terrace"]
        let report = t.daemon.apply(new)
        #expect(report.applied && report.needsRestart.contains("gpio"), "\(report.needsRestart)")
        line.replay([.falling(ms: 0)])
        let said = try #require(t.waitForEvent("gpio-error", seconds: 5)?.reason)
        #expect(said.contains(#"pressed, but unknown zone or group "patio""#), "\(said)")
        let status = try #require(try t.status().gpio?.first)
        #expect(status.presses == 1 && status.error?.contains("unknown zone") == true, "\(status.error ?? "-")")
    }
}
