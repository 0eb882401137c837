import BatonTesting
import Glibc
import OSThread
import Synchronization
import Testing

@testable import Players

/// An external player as a source, driven as the control plane drives it, with its stream on a
/// socket pair (the program's end closed as a paused player closes its device).
@Suite struct ExternalPlayerTests {
    /// What Baton tells the player, and nothing seen of the user.
    final class Told: PlayerControl, @unchecked Sendable {
        let said = Mutex<[String]>([])
        var description: String { "test" }
        func pause() { said.withLock { $0.append("pause") } }
        func play() { said.withLock { $0.append("play") } }
        func pauseIfPlaying() { said.withLock { $0.append("pause-if-playing") } }
        func takeUserChange() -> PlayerChange? { nil }
        var lastError: String? { nil }
        func close() {}
    }

    /// A `pause` source resumed after a doorbell: the player is told to play, and what it had sent
    /// before its pause plays out before the player opened its device again. The source waits
    /// for it (up to idle-release). It ended there: the frames a pause keeps take about as long as
    /// a player takes to reopen, and the player's late stream became a source of its own.
    @Test func aResumedSourceWaitsForItsPlayerOnceWhatItSentHasPlayed() throws {
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        let stream = ExternalStream(
            name: "mpd", peer: ExternalPeer(pid: 1, program: "mpd"), fd: fds[0], logger: Logger(minimum: .error),
            onFrames: { _ in })
        OSThread.detach(name: "external-stream") { stream.run() }
        let told = Told()
        let player = ExternalPlayer(
            settings: .init(
                name: "mpd", whenInterrupted: .pause, idleReleaseNanoseconds: 5_000_000_000, control: told),
            stream: stream)
        player.start([])
        player.audibilityChanged(false)
        player.interruption(began: true)
        player.audibilityChanged(true)
        player.interruption(began: false, shouldResume: true)
        #expect(told.said.withLock { $0 } == ["pause", "play"])
        close(fds[1])  // the player's stream ends, everything it sent played
        #expect(waitUntil(seconds: 5) { stream.isFinished })
        player.tick(audible: true)
        #expect(player.acceptsStreams, "the source waits for the player it asked to play")
        #expect(
            (player.nextTick ?? 0) > 4_000_000_000, "until idle-release: \(player.nextTick.map(String.init) ?? "nil")")
    }
}
