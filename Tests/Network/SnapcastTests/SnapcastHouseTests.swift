import AudioCore
import BatonConfig
import BatonTesting
import Glibc
import OSThread
import Snapcast
import Testing

@testable import BatonDaemon
@testable import ControlParts

/// Baton feeding a real snapserver with two real snapclients: what the speakers play, when, and
/// how the house recovers from a server restart.
@Suite(.serialized, .ownThread) struct SnapcastHouseTests {
    /// A doorbell and music reach both speakers within 2 ms of each other, one server buffer after
    /// Baton mixed them; the music is interrupted by the bell and resumes; Baton groups both
    /// speakers on the zone's stream and sets the configured volume; after a snapserver restart
    /// the zone reconnects and the latency is back to the buffer within a few seconds.
    @Test func doorbellAndMusicInSyncThroughARestart() throws {
        let buffer = 600
        let rig = try SnapcastTestRig(
            bufferMilliseconds: buffer,
            clients: [.init(id: "bedroom-pi", volume: 0.8), .init(id: "bath-pi")])
        // Grouped by Baton: one group, both speakers, the zone's stream; the volume applied.
        var grouped = false
        #expect(
            waitUntil(seconds: 8, every: 0.02) {
                guard let status = try? rig.control.status(), let g = status.group(of: "bedroom-pi") else {
                    return false
                }
                grouped =
                    g.streamID == "upstairs" && Set(g.clients.map(\.id)) == ["bedroom-pi", "bath-pi"]
                    && status.client("bedroom-pi")?.config?.volume.percent == 80
                return grouped
            }, "Baton put both speakers in one group on stream upstairs (log: \(rig.log.lines.withLock { $0 }))")
        #expect(waitUntil(seconds: 5) { rig.snapshot.available })
        // Status says the same: both speakers connected, nothing wrong.
        #expect(
            waitUntil(seconds: 5) {
                let z = rig.zoneStatus
                return Set(z?.connected ?? []) == ["bedroom-pi", "bath-pi"] && z?.problem == nil
            }, "\(String(describing: rig.zoneStatus))")
        let snap = rig.snapshot
        #expect(snap.delayFrames == buffer * 48, "delay = the server buffer")
        #expect(snap.audibleFrame == snap.framesPlayed - buffer * 48)
        rig.pause(0.3)

        // 1. A doorbell over silence.
        let bell1 = try rig.ring("bell1")
        #expect(rig.waitForEvent("played", source: bell1.id) != nil)
        rig.pause(Double(buffer) / 1000 + 0.3)

        // 2. Music, interrupted by a doorbell, resumed.
        let music = try rig.daemon.announcer.playMusic(sound: "music440", zones: ["upstairs"], loop: true)
        let musicAt = monotonicNanoseconds()
        rig.pause(1.0)
        let bell2 = try rig.ring("bell2")
        // The zone's frame clock now, to turn event frames into times.
        let mark = (frames: rig.snapshot.framesPlayed, at: monotonicNanoseconds())
        let began = try #require(
            rig.waitForEvent("interruption-began", source: music.id),
            "events: \(rig.daemon.events.recent().map { "\($0.type) \($0.source ?? "") \($0.reason ?? "")" })")
        let ended = try #require(rig.waitForEvent("interruption-ended", source: music.id))
        #expect(ended.shouldResume == true)
        rig.pause(Double(buffer) / 1000 + 0.6)
        try rig.daemon.command(.stop, source: music.id)

        // 3. snapserver restarts; Baton reconnects; a doorbell is heard one buffer later again.
        rig.server.stop()
        rig.pause(0.5)
        #expect(!rig.snapshot.available, "the zone reports the outage")
        let played = rig.snapshot.framesPlayed
        rig.pause(0.3)
        #expect(rig.snapshot.framesPlayed > played, "the zone's clock runs on through the outage")
        try rig.server.start()
        let restarted = monotonicNanoseconds()
        let notBack = rig.waitUntilBack(restarted: restarted)
        #expect(notBack == nil, "the zone and both speakers are back: \(notBack ?? "")")
        let bell3 = try rig.ring("bell3")
        #expect(rig.waitForEvent("played", source: bell3.id) != nil)
        rig.pause(Double(buffer) / 1000 + 0.5)
        let backAfter = Double(monotonicNanoseconds() - restarted) / 1e9
        rig.daemon.stop()

        // Analysis, per speaker.
        // The interruption's zoneFrames are heard when audibleFrame (framesPlayed − buffer) reaches them.
        let cut = try #require(began.zoneFrames?["upstairs"])
        let cutHeard = mark.at + (cut - mark.frames + buffer * 48) * 1_000_000 / 48
        var heard: [String: [Int]] = [:]
        for tap in [rig.bedroom, rig.bath] {
            let left = tap.left()
            let b1 = try found(tap.onset(in: left, from: 0), "\(tap.id) heard the first doorbell")
            let m = try found(tap.onset(in: left, from: b1.frame + 19_200 + 4_800), "\(tap.id) heard the music")
            let b2 = try found(
                tap.toneStart(in: left, frequency: 1000, from: m.frame), "\(tap.id) heard the second doorbell")
            // While the bell rings the music is silent; after it, the music is back.
            let during = Signals.windowedToneLevel(
                left[(b2.frame + 4_800)..<(b2.frame + 14_400)], frequency: 440, rate: 48_000)
            #expect(during < 0.01, "\(tap.id): music interrupted during the bell (440 Hz at \(during))")
            let afterStart = b2.frame + 19_200 + 4_800
            let after = Signals.windowedToneLevel(
                left[afterStart..<min(left.count, afterStart + 9_600)], frequency: 440, rate: 48_000)
            #expect(after > 0.1, "\(tap.id): music resumed after the bell (440 Hz at \(after))")
            // The music stopped before the restart, so the last bell starts over silence.
            let quiet = b2.frame + 19_200 + Int((Double(buffer) / 1000 + 0.7) * 48_000)
            let b3 = try found(tap.onset(in: left, from: quiet), "\(tap.id) heard the doorbell after the restart")
            heard[tap.id] = [b1.at, m.at, b2.at, b3.at]
            #expect(
                abs(Double(b2.at - cutHeard) / 1e6) < 30,
                "\(tap.id): the bell is heard where the event's frame says (\(Double(b2.at - cutHeard) / 1e6) ms off)")
            #expect(
                abs(Double(b2.at - bell2.at) / 1e6 - Double(buffer)) < 40
                    && abs(Double(m.at - musicAt) / 1e6 - Double(buffer)) < 40)
            let ms = { (ns: Int) in Double(ns) / 1e6 }
            print(
                "snapcast \(tap.id): bell latency \(ms(b1.at - bell1.at)) ms, music \(ms(m.at - musicAt)) ms, bell over music \(ms(b2.at - bell2.at)) ms, after restart \(ms(b3.at - bell3.at)) ms"
            )
            #expect(abs(ms(b1.at - bell1.at) - Double(buffer)) < 40, "\(tap.id): heard one buffer after the request")
            #expect(
                abs(ms(b3.at - bell3.at) - Double(buffer)) < 40,
                "\(tap.id): latency back to the buffer \(backAfter) s after the restart")
        }
        let a = try #require(heard["bedroom-pi"])
        let b = try #require(heard["bath-pi"])
        let skew = zip(a, b).map { Double($0 - $1) / 1e6 }
        print(
            "snapcast sync bedroom−bath: \(skew.map { "\(($0 * 1000).rounded() / 1000)" }.joined(separator: ", ")) ms (bell, music, bell over music, bell after restart)"
        )
        #expect(
            abs(skew[0]) < 2 && abs(skew[1]) < 2 && abs(skew[3]) < 2, "onsets within 2 ms on both speakers: \(skew)")
        #expect(abs(skew[2]) < 6, "the bell's start over music (found in 5 ms blocks) agrees: \(skew)")
    }

    /// A server that accepts Baton's connection but reads nothing for a while (snapserver still
    /// starting: a busy Pi at boot, or a restart under load) adds nothing to the latency. What Baton
    /// wrote into that connection would wait unread in the server's socket and be heard that much
    /// later for as long as the connection lasts (snapserver stamps its first read "now" and then
    /// reads at exactly real time), so Baton sends no audio on a new connection before the
    /// server's JSON-RPC has answered a call made after it: the doorbell is heard one buffer after
    /// the request.
    @Test func aServerThatStartsSlowlyAddsNoLatency() throws {
        let buffer = 300
        let rig = try SnapcastTestRig(
            bufferMilliseconds: buffer, clients: [.init(id: "bedroom-pi"), .init(id: "bath-pi")])
        #expect(waitUntil(seconds: 8) { rig.snapshot.available })
        rig.server.stop()
        #expect(waitUntil(seconds: 5) { !rig.snapshot.available })
        let connectedWhileFrozen = try rig.server.start(frozenFor: 1.5)
        #expect(connectedWhileFrozen, "Baton connected while the server read nothing (else this tests nothing)")
        let restarted = monotonicNanoseconds()
        let notBack = rig.waitUntilBack(restarted: restarted)
        #expect(notBack == nil, "the zone and both speakers are back: \(notBack ?? "")")
        let bell = try rig.ring("bell1")
        #expect(rig.waitForEvent("played", source: bell.id) != nil)
        rig.pause(Double(buffer) / 1000 + 0.5)
        rig.daemon.stop()
        for tap in [rig.bedroom, rig.bath] {
            let heard = try found(tap.onset(in: tap.left(), from: 0), "\(tap.id) heard the doorbell")
            let latency = Double(heard.at - bell.at) / 1e6
            print("snapcast \(tap.id): bell latency after a frozen start \(latency) ms")
            #expect(abs(latency - Double(buffer)) < 40, "\(tap.id): heard one buffer after the request (\(latency) ms)")
        }
    }

    /// A speaker that goes away (its snapclient killed, as a crash would) is shown as not connected
    /// in Baton's status within a poll, while the zone plays on for the other; once it is back,
    /// Baton puts it in the zone's group again and it plays the next doorbell one buffer after the
    /// request.
    @Test func aSpeakerThatGoesAwayIsShownGoneAndTakenBack() throws {
        let buffer = 300
        let rig = try SnapcastTestRig(
            bufferMilliseconds: buffer, clients: [.init(id: "bedroom-pi"), .init(id: "bath-pi")])
        let connected = { Set(rig.zoneStatus?.connected ?? []) }
        #expect(
            waitUntil(seconds: 8, every: 0.02) { connected() == ["bedroom-pi", "bath-pi"] && rig.snapshot.available })
        rig.bath.kill()
        let gone = waitUntil(seconds: 5, every: 0.02) { connected() == ["bedroom-pi"] }
        #expect(gone, "the status lists bath-pi as not connected within a poll (2 s): \(connected())")
        #expect(rig.snapshot.available, "the zone plays on for bedroom-pi")
        try rig.bath.restart()
        let restarted = monotonicNanoseconds()
        let back = waitUntil(seconds: 8, every: 0.05) {
            connected() == ["bedroom-pi", "bath-pi"] && rig.speakersBack()
        }
        #expect(back, "bath-pi back in the status and on the zone's stream: \(connected()); \(rig.evidence())")
        rig.settle(since: restarted)
        let from = rig.bath.frameCount
        let bell = try rig.ring("bell1")
        #expect(rig.waitForEvent("played", source: bell.id) != nil)
        rig.pause(Double(buffer) / 1000 + 0.5)
        rig.daemon.stop()
        let heard = try found(rig.bath.onset(in: rig.bath.left(), from: from), "bath-pi heard the doorbell once back")
        let latency = Double(heard.at - bell.at) / 1e6
        print("snapcast bath-pi: bell latency after it came back \(latency) ms")
        #expect(abs(latency - Double(buffer)) < 40, "bath-pi heard it one buffer after the request (\(latency) ms)")
    }
}

/// `onset`, or a failure saying `what` was not heard. (`#require(tap.onset(in: left, …))` would
/// print every sample of `left` in its message.)
private func found(_ onset: Onset?, _ what: Comment, sourceLocation: SourceLocation = #_sourceLocation) throws
    -> Onset
{
    try #require(onset, what, sourceLocation: sourceLocation)
}
