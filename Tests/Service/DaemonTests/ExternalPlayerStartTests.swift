import Arbiter
import BatonTesting
import Glibc
import OSThread
import Testing

@testable import BatonDaemon
@testable import ControlParts
@testable import Players

/// An external player admitted to the real daemon's arbiter, its control `ExternalPlayerTests.Told`.
@Suite(.ownThread) struct ExternalPlayerStartTests {
    /// A pause given after the source was granted but before its slots were free (every slot of
    /// the kitchen taken) is told to the player at its start: the first reconcile had no state
    /// before to compare with, so the player was never told, and played on, blocked on paused
    /// slots. (The window — up to the daemon's 250 ms slot wait — cannot be hit reliably with a
    /// real player: the slots are held by the test here, the wait made 10 s.)
    @Test func aPauseGivenWhileTheSourceWaitsForItsSlotsReachesThePlayer() throws {
        let t = try TestDaemon(slotWait: .seconds(10))
        defer { t.stop() }
        let mixer = try #require(t.daemon.output("kitchen")).mixer
        let held = (0..<8).compactMap { _ in mixer.claimSlot(gain: 0) }
        defer { for slot in held.dropFirst() { mixer.release(slot) } }
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        defer { close(fds[1]) }
        let stream = ExternalStream(
            name: "mpd", peer: ExternalPeer(pid: 1, program: "mpd"), fd: fds[0], logger: Logger(minimum: .error),
            onFrames: { _ in })
        OSThread.detach(name: "external-stream") { stream.run() }
        let told = ExternalPlayerTests.Told()
        let settings = ExternalPlayer.Settings(
            name: "mpd", whenInterrupted: .pause, idleReleaseNanoseconds: 5_000_000_000, control: told)
        let admission = try t.daemon.admit(.music, zones: ["kitchen"], volume: 1) { _ throws(ControlError) in
            ExternalPlayer(settings: settings, stream: stream)
        }
        let id = SourceID(admission.id)
        let waiting = t.daemon.state.withLock { $0.playbacks[id]?.awaitingSlots != nil }
        #expect(waiting, "granted, waiting for a slot")
        #expect(try t.json("POST", "/api/v1/music/pause", "{}").status == 200)
        mixer.release(held[0])
        #expect(
            waitUntil(seconds: 5) { t.daemon.state.withLock { $0.playbacks[id]?.started == true } }, "started")
        #expect(waitUntil(seconds: 2) { told.said.withLock { $0 } == ["pause"] }, "\(told.said.withLock { $0 })")
    }

    /// A player paused through the API while it waited for a call to end is granted paused when
    /// the call ends: its slot claimed paused, the player told `pause` at its start, the source
    /// read `paused`. (The grant cleared the pause: the API had answered the pause done, and the
    /// music played after the call, the player's state read "playing".)
    @Test func aPauseGivenWhileQueuedHoldsAtTheGrant() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        let call = try t.daemon.admit(.call, zones: ["kitchen"], volume: 1) { available throws(ControlError) in
            try t.daemon.sounds.player("music440", loop: true, in: available)
        }
        #expect(call.outcome == .playing)
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        defer { close(fds[1]) }
        let stream = ExternalStream(
            name: "mpd", peer: ExternalPeer(pid: 1, program: "mpd"), fd: fds[0], logger: Logger(minimum: .error),
            onFrames: { _ in })
        OSThread.detach(name: "external-stream") { stream.run() }
        let told = ExternalPlayerTests.Told()
        let settings = ExternalPlayer.Settings(
            name: "mpd", whenInterrupted: .pause, idleReleaseNanoseconds: 5_000_000_000, control: told)
        let admission = try t.daemon.admit(.music, zones: ["kitchen"], volume: 1) { _ throws(ControlError) in
            ExternalPlayer(settings: settings, stream: stream)
        }
        #expect(admission.outcome == .queued)
        let id = SourceID(admission.id)
        #expect(try t.json("POST", "/api/v1/music/pause", "{\"id\": \"\(admission.id)\"}").status == 200)
        try t.daemon.command(.stop, source: call.id)
        #expect(
            waitUntil(seconds: 5) { t.daemon.state.withLock { $0.playbacks[id]?.started == true } }, "started")
        #expect(t.daemon.state.withLock { $0.arbiter.state(of: id) } == .paused)
        let slotPaused = t.daemon.state.withLock { $0.playbacks[id]?.parts.first?.slot?.isPauseRequested }
        #expect(slotPaused == true, "the slot is claimed paused")
        #expect(waitUntil(seconds: 2) { told.said.withLock { $0 } == ["pause"] }, "\(told.said.withLock { $0 })")
        #expect(try t.json("POST", "/api/v1/music/resume", "{\"id\": \"\(admission.id)\"}").status == 200)
        #expect(t.daemon.state.withLock { $0.arbiter.state(of: id) } == .playing)
        #expect(
            waitUntil(seconds: 2) { told.said.withLock { $0 } == ["pause", "play"] }, "\(told.said.withLock { $0 })")
    }
}
