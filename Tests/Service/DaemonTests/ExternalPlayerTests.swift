import BatonTesting
import Glibc
import OSThread
import Synchronization
import Testing

@testable import BatonDaemon
@testable import Players

/// An external player as a source, driven as the control plane drives it, with its stream on a
/// socket pair (the program's end closed as a paused player closes its device).
@Suite(.ownThread) struct ExternalPlayerTests {
    /// What Baton tells the player, and what the user did through the player (`user`, taken once).
    final class Told: PlayerControl, @unchecked Sendable {
        let said = Mutex<[String]>([])
        let failure = Mutex<String?>(nil)
        let user = Mutex<PlayerChange?>(nil)
        var description: String { "test" }
        func pause() { said.withLock { $0.append("pause") } }
        func play() { said.withLock { $0.append("play") } }
        func pauseIfPlaying() { said.withLock { $0.append("pause-if-playing") } }
        var followsPlayer: Bool { true }
        func takeUserChange() -> PlayerChange? {
            user.withLock { change in
                defer { change = nil }
                return change
            }
        }
        var lastError: String? { failure.withLock { $0 } }
        func close() {}
    }

    /// A `pause` source resumed after a doorbell: the player is told to play, and what it had sent
    /// before its pause plays out before the player opened its device again. The source waits
    /// for it (up to idle-release). It ended there: the frames a pause keeps take about as long as
    /// a player takes to reopen, and the player's late stream became a source of its own.
    @Test func aResumedSourceWaitsForItsPlayerOnceWhatItSentHasPlayed() throws {
        let (player, _) = try Self.resumedAfterItsStreamEnded()
        #expect(player.acceptsStreams, "the source waits for the player it asked to play")
        #expect(
            (player.nextTick ?? 0) > 4_000_000_000, "until idle-release: \(player.nextTick.map(String.init) ?? "nil")")
    }

    /// A player that could not be told to play (it quit; the control says so) is not waited for:
    /// the source ends at once, as before — it read "buffering" for the whole idle-release.
    @Test func aPlayerThatCouldNotBeToldToPlayIsNotWaitedFor() throws {
        let (player, told) = try Self.resumedAfterItsStreamEnded { $0.failure.withLock { $0 = "connection refused" } }
        _ = told
        #expect(!player.acceptsStreams, "ended")
    }

    /// A `pause` source whose interruption ended without a resume stays paused by Baton: the next
    /// interruption does not tell the player to pause again — with a toggle (`playerctl
    /// play-pause`, mpv's `cycle pause`) that started it, playing into held slots.
    @Test func aSourceLeftPausedIsNotPausedAgainByTheNextInterruption() throws {
        let (player, told, _, program) = try Self.pausePlayer()
        defer { close(program) }
        player.interruption(began: true)
        player.interruption(began: false, shouldResume: false)
        player.interruption(began: true)
        #expect(told.said.withLock { $0 } == ["pause", "pause-if-playing"])
    }

    /// A user's play through the player during the interruption: at its end the player, which
    /// plays already, is not told to play (a play that changes nothing is not reported, and Baton's
    /// wait for the word would take the user's next play for its own); after a user's play and
    /// then pause it is, as after no play at all.
    @Test(arguments: [[PlayerChange.played], [.played, .paused], []])
    func aPlayerTheUserPlayedIsNotToldToPlayAgain(_ changes: [PlayerChange]) throws {
        let (player, told, _, program) = try Self.pausePlayer()
        defer { close(program) }
        player.interruption(began: true)
        for change in changes {
            told.user.withLock { $0 = change }
            #expect(player.takeUserChange() == change)
        }
        player.interruption(began: false, shouldResume: true)
        let toldToPlay = changes.last != .played
        #expect(told.said.withLock { $0 } == (toldToPlay ? ["pause", "play"] : ["pause"]))
    }

    /// A `drop` player the user paused through its own controls, then played during a doorbell:
    /// at the doorbell's end it plays already, and is not told to play again. It was (the user's
    /// play was noted only for `pause`), a play that changed nothing the player reported, and
    /// Baton, waiting 3 s for the word, took the user's next pause and play for its own: the source
    /// stayed paused and held while the player showed Playing.
    @Test(arguments: [ExternalPlayer.WhenInterrupted.drop, .hold])
    func aDropPlayerTheUserPlayedDuringADoorbellIsNotToldToPlay(whenInterrupted: ExternalPlayer.WhenInterrupted)
        throws
    {
        let (player, told, _, program) = try Self.pausePlayer(whenInterrupted: whenInterrupted)
        defer { close(program) }
        player.audibilityChanged(true)
        player.applyingPlayerChange(.paused)  // the user's pause through the player, applied
        player.pausedThroughBaton(true)
        player.applyingPlayerChange(nil)
        player.interruption(began: true)
        told.user.withLock { $0 = .played }
        #expect(player.takeUserChange() == .played)
        player.interruption(began: false, shouldResume: true)
        #expect(told.said.withLock { $0 } == [])
        // A user's pause during the next doorbell: the end that does not resume tells nothing
        // either (the player is paused already); with no change of the user's, the player is told.
        player.interruption(began: true)
        told.user.withLock { $0 = .paused }
        #expect(player.takeUserChange() == .paused)
        player.interruption(began: false, shouldResume: false)
        #expect(told.said.withLock { $0 } == [])
        player.pausedThroughBaton(false)
        player.interruption(began: true)
        player.interruption(began: false, shouldResume: false)
        #expect(told.said.withLock { $0 } == ["play", "pause"])
    }

    /// A `drop` or `hold` player paused through Baton that the user played through its own
    /// controls during a doorbell, then paused again through Baton (the interruption ends without
    /// resuming), is told to pause: it was not (Baton's side had not changed), and played on,
    /// blocked in its held write, while Baton showed it paused. The mirror: played, paused by the
    /// user during the doorbell, resumed through Baton, it is told to play.
    @Test(arguments: [ExternalPlayer.WhenInterrupted.drop, .hold])
    func aPlayerTheUserChangedDuringADoorbellIsToldWhatBatonSaysAtItsEnd(
        whenInterrupted: ExternalPlayer.WhenInterrupted
    ) throws {
        let (player, told, _, program) = try Self.pausePlayer(whenInterrupted: whenInterrupted)
        defer { close(program) }
        player.audibilityChanged(true)
        player.pausedThroughBaton(true)
        player.interruption(began: true)
        told.user.withLock { $0 = .played }
        #expect(player.takeUserChange() == .played)
        player.interruption(began: false, shouldResume: false)
        #expect(told.said.withLock { $0 } == ["pause", "pause"])
        player.pausedThroughBaton(false)
        player.interruption(began: true)
        told.user.withLock { $0 = .paused }
        #expect(player.takeUserChange() == .paused)
        player.interruption(began: false, shouldResume: true)
        #expect(told.said.withLock { $0 } == ["pause", "pause", "play", "play"])
    }

    /// Stopped for good (`music/stop`, other music), a player controlled by a command pair is told
    /// to pause when it plays as far as Baton knows: it was not (a command pair cannot say whether
    /// the player plays), and one that reopens its device (squeezelite) played again as a new
    /// source. Not when Baton paused it (through Baton, or `pause` for an interruption): its pause
    /// command may be a toggle. `said`: what the commands wrote, p for pause and r for resume.
    @Test(arguments: [
        (ExternalPlayer.WhenInterrupted.drop, "playing", "p"), (.hold, "playing", "p"), (.pause, "playing", "p"),
        (.hold, "interrupted", "p"), (.pause, "interrupted", "p"), (.drop, "paused", "p"), (.pause, "resumed", "prp"),
    ])
    func aStopForGoodPausesAPlayerOfACommandPair(
        whenInterrupted: ExternalPlayer.WhenInterrupted, before: String, said: String
    ) throws {
        let file = TestDirectory.make("command-control") + "/said"
        let control = CommandControl(pause: "printf p >> \(file)", resume: "printf r >> \(file)", report: { _ in })
        let (player, _, program) = try Self.player(whenInterrupted: whenInterrupted, control: control)
        defer { close(program) }
        player.audibilityChanged(true)
        // Each command waited for: one given while another waits replaces it.
        func saidSoon(_ text: String) -> Bool {
            waitUntil(seconds: 5) {
                usleep(10_000)
                return TextFile.read(file) == text
            }
        }
        switch before {
        case "interrupted":
            player.interruption(began: true)
            if whenInterrupted == .pause { #expect(saidSoon("p")) }
        case "paused":
            player.pausedThroughBaton(true)
            #expect(saidSoon("p"))
        case "resumed":
            player.pausedThroughBaton(true)
            #expect(saidSoon("p"))
            player.pausedThroughBaton(false)
            #expect(saidSoon("pr"))
        default: break
        }
        player.endsForGood()
        #expect(player.stop())
        #expect(saidSoon(said), "\(TextFile.read(file) ?? "")")
        usleep(200_000)
        #expect(TextFile.read(file) == said)
    }

    /// Stopped for good after Baton told the player to play, before the player said it plays: it
    /// is told to pause, not asked whether it plays (the state last seen says paused).
    @Test func aStopForGoodRightAfterAPlayPausesThePlayer() throws {
        let (player, told, _, program) = try Self.pausePlayer(whenInterrupted: .drop)
        defer { close(program) }
        player.audibilityChanged(true)
        player.pausedThroughBaton(true)
        player.pausedThroughBaton(false)
        player.endsForGood()
        #expect(player.stop())
        #expect(told.said.withLock { $0 } == ["pause", "play", "pause"])
    }

    /// A program that sets its format again on the same connection (aplay playing files of two
    /// rates, gmediarender between tracks): the source's format in the status is the new one. It
    /// stayed the first, read once when the stream was taken.
    @Test func theFormatShownIsTheStreamsLatest() throws {
        let (player, _, stream, program) = try Self.pausePlayer()
        defer { close(program) }
        func send(_ bytes: [UInt8]) {
            #expect(bytes.withUnsafeBytes { write(program, $0.baseAddress, $0.count) } == bytes.count)
        }
        for rate in [44_100, 48_000] {
            let format = [0, 2, rate, 22_050, 441]
            send(ExternalStreamTests.formatMessage(format))
            #expect(
                waitUntil(seconds: 5) { stream.formatDescription.contains("\(rate)") }, "\(stream.formatDescription)")
            #expect(player.format == stream.formatDescription, "\(player.format) against \(stream.formatDescription)")
        }
    }

    /// A `drop` player paused and resumed through Baton (`music/pause`, `music/resume`), as
    /// `Daemon.reconcile` tells it — `pausedThroughBaton`, then the audibility, in one step of the
    /// control plane: what it sent before its pause, kept at its DROP, plays after the resume. The
    /// stream was set to discard between the two (the play not awaited yet, the source not granted
    /// yet), and on a loaded machine its thread ran there and threw away the first of the kept
    /// frames at the program's rate: mpv's music jumped ahead a few ms after the resume.
    @Test func aDropPlayerResumedThroughBatonKeepsWhatItSentBeforeItsPause() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        let (output, release) = try ExternalStreamTests.kitchenOutput(t)
        defer { release() }
        let (player, told, _, program) = try Self.pausePlayer(whenInterrupted: .drop)
        defer { close(program) }
        player.audibilityChanged(true)
        func send(_ bytes: [UInt8]) {
            #expect(bytes.withUnsafeBytes { write(program, $0.baseAddress, $0.count) } == bytes.count)
        }
        output.slot.pause()  // the pause through Baton: the slot takes nothing, and holds what it is given
        player.pausedThroughBaton(true)
        player.audibilityChanged(false)
        player.start([output])
        // S16_LE, a 0.2 s buffer; 0.1 s sent: what the slot's ring does not take up to its lead
        // waits in the stream, and is kept at the DROP.
        let fields = [0, output.channels, output.rate, output.rate / 5, output.rate / 100]
        let sent = output.rate / 10
        send(ExternalStreamTests.formatMessage(fields))
        send(ExternalWire.message(.data, [UInt8](repeating: 1, count: sent * output.channels * 2)))
        send(ExternalWire.message(.drop))  // the player's pause
        ExternalStreamTests.awaitAnswers(from: program, drops: 1)
        player.pausedThroughBaton(false)
        usleep(100_000)  // the rest of the control plane's step, as long as a loaded machine makes it
        player.audibilityChanged(true)
        output.slot.resume()
        #expect(told.said.withLock { $0 } == ["pause", "play"])
        let reached = { output.slot.framesConsumed + output.slot.ring.readable / output.channels }
        #expect(waitUntil(seconds: 2) { reached() == sent }, "\(reached()) of the \(sent) frames reach the slot")
    }

    /// A `pause` source on a stream of a socket pair (the program's end returned, to close), its
    /// control `Told`, started on no zones and not heard.
    static func pausePlayer(
        whenInterrupted: ExternalPlayer.WhenInterrupted = .pause
    ) throws -> (ExternalPlayer, Told, ExternalStream, program: Int32) {
        let told = Told()
        let (player, stream, program) = try player(whenInterrupted: whenInterrupted, control: told)
        return (player, told, stream, program)
    }

    /// A source on a stream of a socket pair (the program's end returned, to close), its control
    /// `control`, started on no zones and not heard.
    static func player(
        whenInterrupted: ExternalPlayer.WhenInterrupted, control: any PlayerControl
    ) throws -> (ExternalPlayer, ExternalStream, program: Int32) {
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        let stream = ExternalStream(
            name: "mpd", peer: ExternalPeer(pid: 1, program: "mpd"), fd: fds[0], logger: Logger(minimum: .error),
            onFrames: { _ in })
        OSThread.detach(name: "external-stream") { stream.run() }
        let player = ExternalPlayer(
            settings: .init(
                name: "mpd", whenInterrupted: whenInterrupted, idleReleaseNanoseconds: 5_000_000_000,
                control: control),
            stream: stream)
        player.start([])
        player.audibilityChanged(false)
        return (player, stream, fds[1])
    }

    /// A `pause` source interrupted and resumed (the player told to pause, then to play), its
    /// stream ended (the player closed its device), and a monitor look after that. `beforeLook`:
    /// what the control reports meanwhile.
    static func resumedAfterItsStreamEnded(beforeLook: (Told) -> Void = { _ in }) throws -> (ExternalPlayer, Told) {
        let (player, told, stream, program) = try pausePlayer()
        player.interruption(began: true)
        player.audibilityChanged(true)
        player.interruption(began: false, shouldResume: true)
        #expect(told.said.withLock { $0 } == ["pause", "play"])
        close(program)  // the player's stream ends, everything it sent played
        #expect(waitUntil(seconds: 5) { stream.isFinished })
        beforeLook(told)
        player.tick(audible: true)
        return (player, told)
    }
}
