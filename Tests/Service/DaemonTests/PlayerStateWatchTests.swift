import BatonTesting
import Synchronization
import Testing

@testable import Players

/// Telling Baton's own pauses and plays of an external player from the user's, as MPD's and
/// MPRIS's controls see the player report them, on a clock of the test's.
@Suite(.ownThread) struct PlayerStateWatchTests {
    final class Clock: Sendable {
        let now = Atomic<Int>(1_000_000_000)
        func advance(seconds: Double) { now.add(Int(seconds * 1e9), ordering: .relaxed) }
    }

    func watch(_ clock: Clock) -> PlayerStateWatch {
        let watch = PlayerStateWatch(paused: "pause", playing: "play", clock: { clock.now.load(ordering: .relaxed) }) {}
        watch.saw("play")
        return watch
    }

    /// A pause and then a play commanded before the player reported the pause (an interruption that
    /// ended at once; two doorbells in a row): both reports are Baton's. The play replaced the
    /// pause's expectation, and the player's "paused" was taken for the user's — the interruption
    /// then ended without a resume.
    @Test func aPauseThenAPlayReportedLateAreBothBatons() {
        let clock = Clock()
        let w = watch(clock)
        w.pauseThenPlay()
        clock.advance(seconds: 0.5)
        w.saw("pause")
        #expect(w.takeUserChange() == nil)
        w.saw("play")
        #expect(w.takeUserChange() == nil)
        // Done with: the user's pause after them is the user's.
        w.saw("pause")
        #expect(w.takeUserChange() == .paused)
    }

    /// A pause and a play that the player folded into one report (it says it plays, as it did) are
    /// done with soon: the user's pause a second later is the user's. The pause's expectation was
    /// left for 3 s, and took it for Baton's.
    @Test func commandsFoldedIntoNoChangeAreDoneWith() {
        let clock = Clock()
        let w = watch(clock)
        w.pauseThenPlay()
        w.saw("play")
        #expect(w.takeUserChange() == nil)
        clock.advance(seconds: 1.5)
        w.saw("pause")
        #expect(w.takeUserChange() == .paused)
    }

    /// The same "plays" reported stale, before the player applied the pause and the play (it
    /// repeats its status with other properties): their own reports, just after, are still Baton's.
    @Test func aStaleReportDoesNotEndWhatIsStillToCome() {
        let clock = Clock()
        let w = watch(clock)
        w.pauseThenPlay()
        w.saw("play")
        clock.advance(seconds: 0.3)
        w.saw("pause")
        #expect(w.takeUserChange() == nil)
        w.saw("play")
        #expect(w.takeUserChange() == nil)
    }

    /// A command waiting behind a slow one (a connect that takes seconds) counts from when it ran,
    /// not from when it was given: its report came after its 3 s had gone, and read as the user's.
    @Test func aCommandCountsFromWhenItRan() {
        let clock = Clock()
        let w = watch(clock)
        let pause = w.expect("pause")
        clock.advance(seconds: 7)  // queued behind a command that waited on a player not answering
        w.ran(pause)
        clock.advance(seconds: 1)
        w.saw("pause")
        #expect(w.takeUserChange() == nil)
        // Its 3 s after it ran gone, the same change is the user's.
        let play = w.expect("play")
        w.ran(play)
        clock.advance(seconds: 3.5)
        w.saw("play")
        #expect(w.takeUserChange() == .played)
    }

    /// The player found absent when the watcher looks again (it left while the watcher had no bus:
    /// no signal says so) has left, once; one never seen has not.
    @Test func aPlayerFoundAbsentHasLeftOnce() {
        let w = watch(Clock())
        w.forget(lastHeard: 0)
        w.sawAbsent()
        #expect(w.takeUserChange() == .gone)
        w.sawAbsent()
        #expect(w.takeUserChange() == nil)
        let never = PlayerStateWatch(paused: "Paused", playing: "Playing") {}
        never.sawAbsent()
        #expect(never.takeUserChange() == nil)
    }

    /// A command that failed expects nothing: the change that follows is the user's.
    @Test func aFailedCommandExpectsNothing() {
        let clock = Clock()
        let w = watch(clock)
        let pause = w.expect("pause")
        w.dropExpectation(pause)
        w.saw("pause")
        #expect(w.takeUserChange() == .paused)
    }
}

extension PlayerStateWatch {
    /// Baton's pause, then its play, both run (an interruption that ended at once).
    func pauseThenPlay() {
        let pause = expect("pause")
        ran(pause)
        let play = expect("play")
        ran(play)
    }
}
