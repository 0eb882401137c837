import Engine
import OSThread
import Synchronization

/// An external player — any ALSA program writing to a `baton_<name>` PCM — as a source: the frames of
/// its connection (an `ExternalStream`) go into the source's slots; an interruption holds the writer
/// (`hold`), discards its audio in real time (`drop`) or tells the player to pause and, when the
/// arbiter says so, to play again (`pause`, through its `PlayerControl`).
///
/// Threads: as `Source` (the control plane's lock); the stream's own thread aside.
public final class ExternalPlayer: Source, @unchecked Sendable {
    // @unchecked: `state` is touched only under the control plane's lock; `outputs` and `userChange`
    // are behind mutexes for readers on other threads.
    /// What an interruption does to the program (`when-interrupted:`).
    public enum WhenInterrupted: String, Sendable, CaseIterable {
        /// Muted where interrupted and its audio discarded at its own pace; it never blocks.
        case drop
        /// Baton tells the player to pause, and to play again when the interruption ends with shouldResume.
        case pause
        /// Baton stops reading: the writer blocks and resumes on the same sample.
        case hold
    }

    public struct Settings: Sendable {
        public let name: String
        public let whenInterrupted: WhenInterrupted
        /// Released after this long without frames (ns) while it could be heard.
        public let idleReleaseNanoseconds: Int
        public let control: (any PlayerControl)?
        /// Asks for a monitor pass now (any thread): a stream of the source ended. (A user change
        /// seen by the control asks through the control itself.)
        public let wake: @Sendable () -> Void
        public init(
            name: String, whenInterrupted: WhenInterrupted, idleReleaseNanoseconds: Int, control: (any PlayerControl)?,
            wake: @escaping @Sendable () -> Void = {}
        ) {
            self.name = name
            self.whenInterrupted = whenInterrupted
            self.idleReleaseNanoseconds = idleReleaseNanoseconds
            self.control = control
            self.wake = wake
        }
    }

    public let settings: Settings
    private let outputs = Mutex<[SourceOutput]>([])
    private let info: Mutex<(peer: ExternalPeer, format: String)>
    private var state = State()

    private struct State {
        var current: ExternalStream?
        var pending: [ExternalStream] = []
        var interrupted = false
        /// Told to pause by `pausedThroughBaton`, and not told to play since.
        var pausedThroughBaton = false
        /// The change the player itself reported, while the control plane applies it
        /// (`applyingPlayerChange`): the pause or play it leads to is not told back to the player.
        var applying: PlayerChange?
        /// What the player itself said the user did last during the interruption (nil: nothing):
        /// at the end it is there already, and not told again.
        var userChangeWhileInterrupted: PlayerChange?
        /// When Baton told the paused player to play (monotonic ns), until it writes again — on a new
        /// stream, or on the one it kept open. Until then the source waits for it, even once what it
        /// had sent has played out (the frames kept at its pause take about as long as a player
        /// takes to open its device again: the source ended at the resume, and the player's late
        /// stream became a source of its own).
        var playAskedAt: Int?
        /// The control's `lastError` when it was asked (a failure before it is not the play's).
        var errorAtAsk: String?
        var audible = true
        /// Whether the control plane lets it be heard (its slots not paused: not interrupted, not
        /// paused by the user), and since when (monotonic ns; 0: from the start). A program a held or
        /// paused source blocked sent nothing meanwhile: its idle time counts from then.
        var granted = true
        var grantedSince = 0
        /// When what its rings held was last seen to play out (monotonic ns, an estimate from the
        /// last look at them).
        var playsUntil = 0
        var ended = false
        /// The source ended by itself (idle, the program left): its stream may stay open.
        var selfEnded = false
        /// Baton ends it for good (`endsForGood`): a `pause` player is told to pause at the stop.
        var endsForGood = false
        /// CLOCK_MONOTONIC ns since which no stream is attached.
        var streamlessSince: Int?
    }

    public init(settings: Settings, stream: ExternalStream) {
        self.settings = settings
        info = Mutex((stream.peer, stream.formatDescription))
        state.current = stream
        stream.onFinish(settings.wake)
    }

    public var name: String { settings.name }
    public var label: String {
        let (peer, _) = info.withLock { $0 }
        return "\(peer.program) on baton_\(settings.name)"
    }
    /// The program writing now (the last one, when none does).
    public var peer: ExternalPeer { info.withLock { $0.peer } }
    /// The format of the stream playing now, as it says it now (a program may set another on the
    /// same connection: aplay between files of two rates); of the last one when none plays.
    /// Under the lock.
    public var format: String { state.current?.formatDescription ?? info.withLock { $0.format } }
    /// True while a new connection for this source may join it rather than start a new one.
    public var acceptsStreams: Bool { !state.ended }
    /// The program left before the arbiter granted the source. Under the lock.
    public var isAbandoned: Bool { state.current?.isFinished ?? true && state.pending.isEmpty }

    /// A program (again) sends frames as this source: it plays once the one before it is done.
    /// Under the lock.
    public func enqueue(_ stream: ExternalStream) {
        if state.current == nil {
            use(stream)
        } else {
            // Held too while it waits: a DROP on it (a second doorbell) keeps its frames.
            applyAudibility(to: stream, waiting: true)
            state.pending.append(stream)
        }
        stream.onFinish(settings.wake)
    }

    private func use(_ stream: ExternalStream) {
        state.current = stream
        state.streamlessSince = nil
        state.playAskedAt = nil
        // A program that waited behind another sent its last frames when it filled its buffer: the
        // handover is its start (whether the one before closed or was let go idle), or the next
        // look found it idle too and ended the source, the program left blocked.
        state.playsUntil = monotonicNanoseconds()
        info.withLock { $0 = (stream.peer, stream.formatDescription) }
        let outputs = self.outputs.withLock { $0 }
        // The arbiter's word (`audibilityChanged`), not whether the last stream was heard: a
        // program queued behind one whose ring had run dry was dropped for good (nothing changes
        // the arbiter's word to undo it).
        applyAudibility(to: stream)
        if !outputs.isEmpty { stream.attach(outputs) }
    }

    /// What the stream does while the source is not heard: discards (`drop`), or sleeps until it is
    /// (`hold`, and `pause`, which also keeps what the player drops when Baton pauses it — about
    /// a second of MPD's music was skipped at every doorbell). A player Baton paused through its
    /// control (`playerPausedByBaton`) is held and kept from, whatever `when-interrupted` says:
    /// with `drop` its audio was discarded at its pace, and the resume came back later in the
    /// track by what the player had sent before it paused. A stream `waiting` behind the current
    /// one discards nothing: it is not heard yet. Under the lock.
    private func applyAudibility(to stream: ExternalStream, waiting: Bool = false) {
        if settings.whenInterrupted == .pause || playerPausedByBaton {
            if settings.whenInterrupted == .drop { stream.setDiscarding(false) }
            stream.setHeld(!state.granted, keepingDropped: true)
            return
        }
        switch settings.whenInterrupted {
        case .drop:
            stream.setHeld(false)
            if !waiting { stream.setDiscarding(!state.granted) }
        case .hold: stream.setHeld(!state.granted)
        case .pause: break
        }
    }

    /// Baton told the player to pause through its control — a pause through Baton, or (`pause`)
    /// an interruption's end that left it paused — or asked it to play and waits for it to send
    /// again (`playAskedAt`). Under the lock.
    private var playerPausedByBaton: Bool {
        settings.control != nil && (state.pausedThroughBaton || state.playAskedAt != nil)
    }

    public func start(_ outputs: [SourceOutput]) {
        self.outputs.withLock { $0 = outputs }
        if let stream = state.current {
            info.withLock { $0.format = stream.formatDescription }
            stream.attach(outputs)
        }
    }

    /// After the control plane paused or resumed the source's slots (`Daemon.reconcile`): a held
    /// stream's thread sleeps until this says they were resumed.
    public func audibilityChanged(_ audible: Bool) {
        state.audible = audible
        if audible && !state.granted { state.grantedSince = monotonicNanoseconds() }
        state.granted = audible
        if let stream = state.current { applyAudibility(to: stream) }
        for stream in state.pending { applyAudibility(to: stream, waiting: true) }
    }

    /// The user paused (true) or resumed the source through Baton — its API, MQTT, a button —
    /// not an interruption. A player with a control is told as well, whatever `when-interrupted`
    /// says (that is about interruptions): left playing, a `pause` or `hold` player sat blocked on
    /// paused slots, showing "playing" in its own clients while Baton showed it paused, and a
    /// `drop` one (AirPlay) played on, discarded, and came back later in the track; and a player
    /// paused meanwhile (it closes its device) was never asked to play again, so Baton's resume
    /// ended the source instead. The source waits for the player as it does after an interruption
    /// (`waitingForPlayer`, then `idle-release`), and keeps what it drops at the pause for the
    /// resume (`applyAudibility`). A pause or play the player itself reported comes back here too
    /// (`applyingPlayerChange`): it is not told again. Call it before `audibilityChanged`, once
    /// the slots are paused or resumed: a `drop` stream then goes straight to held, none of its
    /// frames discarded. Under the lock; the control runs off it.
    public func pausedThroughBaton(_ paused: Bool) { setPausedThroughBaton(paused, playerDid: state.applying) }

    /// `pausedThroughBaton`; `playerDid`: what the player itself reported it did (`applying`, or
    /// the user's last change during an interruption), not told back to it.
    private func setPausedThroughBaton(_ paused: Bool, playerDid: PlayerChange?) {
        guard let control = settings.control else { return }
        state.pausedThroughBaton = paused
        // The player's own change coming back: it is there already. Told again, it changed nothing
        // the player reported, and Baton's wait for the word (3 s) took the user's next change of
        // the same kind for its own — Baton read playing while the player was paused.
        let echo = playerDid == (paused ? .paused : .played)
        // A play is awaited (`playAskedAt`) before the stream's mode is set: without it a `drop`
        // stream was set to discard until the audibility came, a moment later in the control
        // plane's step, and on a loaded machine its thread ran between the two and threw away the
        // first of what the player sent before its pause — the music jumped ahead just after the
        // resume. The stream stays held, keeping, until the audibility comes.
        if !paused { askToPlay(control, told: !echo) }
        // Held, keeping what it drops, before the player is told: its control runs at once on its
        // own thread, and a player quick to pause (mpv) sent its DROP before the audibility came,
        // which discarded the music just after the cut. Its slots are paused already.
        if paused { state.granted = false }
        if let stream = state.current { applyAudibility(to: stream) }
        for stream in state.pending { applyAudibility(to: stream, waiting: true) }
        if paused && !echo { control.pause() }
    }

    /// The control plane applies `change`, which the player itself reported (`takeUserChange`),
    /// until it calls this again with nil. Under the lock.
    public func applyingPlayerChange(_ change: PlayerChange?) { state.applying = change }

    /// Tells the player to play (unless `told` is false: it plays already), and waits for it from
    /// now (`playAskedAt`). Under the lock.
    private func askToPlay(_ control: any PlayerControl, told: Bool = true) {
        state.playAskedAt = monotonicNanoseconds()
        state.errorAtAsk = control.lastError
        if told { control.play() }
    }

    /// The arbiter's interruption of this source began (true) or ended. For `pause`, the player is
    /// told to pause, and to play again only on `shouldResume` — unless the player itself said the
    /// user played it meanwhile (what made the arbiter resume it): it plays already, and a play
    /// that changes nothing is not reported, so Baton's wait for the word would take the user's
    /// next play for its own. (Its state as last seen is not asked: the pause Baton queued at the
    /// start may not have been reported yet.) Without it the source stays paused, and a player that
    /// says it plays is paused again: left playing it would sit blocked on paused slots, showing
    /// "playing" while Baton shows it paused. Under the lock; the control runs off it.
    ///
    /// With `drop` or `hold` an interruption is not the player's (its stream is dropped or held),
    /// but a pause or play through Baton given during it is, and is told at its end: the arbiter
    /// goes paused → interrupted → playing (a resume during a doorbell) or interrupted → paused (a
    /// pause during it, or one that outlasted `resume-within`), no playing ↔ paused step for
    /// `pausedThroughBaton`'s caller to see. The player was left paused by Baton with the source
    /// "playing" and nothing heard until idle-release ended it, or left playing, its audio
    /// discarded, under a source read "paused".
    public func interruption(began: Bool, shouldResume: Bool = false) {
        state.interrupted = began
        // For every mode: with `drop` and `hold` it was reset only by a `pause` interruption, and
        // a user's play during one doorbell was taken at the next for one during it.
        if began { state.userChangeWhileInterrupted = nil }
        guard let control = settings.control else { return }
        guard settings.whenInterrupted == .pause else {
            // The player is told when what it does — the user's last change to it during the
            // interruption, else what Baton last told it — differs from the end's: a play or
            // pause through Baton during it (no step of pausedThroughBaton), or the user's own
            // through the player undone by one through Baton (paused through Baton, the user plays
            // the player, then pauses the source in Baton: the player played on, blocked in its
            // held write, while Baton showed it paused). What the user did that agrees is done: a
            // play re-sent at the end changed nothing the player reported, and Baton, waiting 3 s
            // for the word, took the user's next play (after a pause) for its own — the source
            // stayed paused and held while the player showed Playing.
            if !began {
                let does = state.userChangeWhileInterrupted ?? (state.pausedThroughBaton ? .paused : .played)
                if does != (shouldResume ? .played : .paused) || shouldResume == state.pausedThroughBaton {
                    setPausedThroughBaton(!shouldResume, playerDid: does)
                }
            }
            return
        }
        if began {
            // Paused through Baton already: a second pause could be a toggle's play.
            if !state.pausedThroughBaton { control.pause() }
        } else if shouldResume {
            state.pausedThroughBaton = false
            askToPlay(control, told: !playedByUserWhileInterrupted)
        } else {
            // Left paused by Baton: the next interruption must not pause it again (a toggle's play).
            state.pausedThroughBaton = true
            control.pauseIfPlaying()
        }
    }

    /// A change the user made to the player through its own controls (not Baton's), once; a play
    /// during an interruption is noted (`userChangeWhileInterrupted`). Under the lock.
    public func takeUserChange() -> PlayerChange? {
        let change = settings.control?.takeUserChange()
        if state.interrupted, let change { state.userChangeWhileInterrupted = change }
        return change
    }

    /// During the interruption the player itself said the user played it, and no pause since: at
    /// the end it plays already.
    private var playedByUserWhileInterrupted: Bool { state.userChangeWhileInterrupted == .played }

    /// With `pause`, no stream while interrupted or not heard is the player paused by Baton (it
    /// closes its device), not the program gone: the source waits for it. So with any mode while
    /// Baton paused the player through its control, or waits for the play it asked. Under the lock.
    private var waitingForPlayer: Bool {
        settings.whenInterrupted == .pause && (state.interrupted || !state.audible) || playerPausedByBaton
    }

    /// Since when (monotonic ns) the source, with no stream, could be heard — from which its
    /// idle-release counts; nil while interrupted or paused (its player waits, paused by Baton).
    private var playerAwaitedSince: Int? {
        guard let since = state.streamlessSince, !state.interrupted, state.granted else { return nil }
        return max(since, state.grantedSince)
    }

    /// When the monitor must look again: once the source's slots are drained after it ended; when
    /// idle-release is due (the program stopped sending, or no program is attached); at once when
    /// the stream ended or the source should end. A stream that ends and a user change wake the
    /// monitor themselves (`Settings.wake`, the control's `userChanged`). It used to be every 5 ms
    /// for as long as the source lived: 200 monitor passes a second while a program played.
    public var nextTick: Int? {
        if state.ended { return nanosecondsToDrain(outputs.withLock { $0 }) }
        let now = monotonicNanoseconds()
        let idle = settings.idleReleaseNanoseconds
        if let current = state.current {
            if current.isFinished { return 0 }
            let last = lastActive(current, now: now)
            // The next look finds it idle (if it is still silent then, and heard).
            return last > 0 && state.granted && !current.isClosed ? max(0, last + idle - now) : nil
        }
        if !waitingForPlayer { return 0 }
        if let since = playerAwaitedSince { return max(0, since + idle - now) }
        return nil
    }

    public func tick(audible: Bool) {
        state.audible = audible
        let now = monotonicNanoseconds()
        // A player that sends again (DATA, not frames moved on from before: a resume that came
        // before the player's pause had those pumped; looked at before a finished stream is let
        // go of), or one that could not be told to play (quit, unreachable: it showed "buffering"
        // for idle-release; an error other than the one there was at the ask — a stale one ended
        // the wait at once): not awaited any more.
        if let asked = state.playAskedAt,
            settings.control?.lastError.map({ $0 != state.errorAtAsk }) ?? false
                || (state.current?.lastReceived ?? 0) > asked
        {
            state.playAskedAt = nil
        }
        if let current = state.current, current.isFinished {
            state.current = nil
            state.streamlessSince = now
        }
        if state.current == nil, !state.pending.isEmpty {
            use(state.pending.removeFirst())
        }
        guard !state.ended else { return }
        if let current = state.current {
            let last = lastActive(current, now: now)
            let idle = last > 0 && now - last >= settings.idleReleaseNanoseconds
            // Not while held or paused (it is not idle: it is made to wait); a ring that ran dry, which
            // is not heard either, is what idleness looks like. A program waiting behind the quiet
            // one (a player paused with its device open) takes its place; the quiet one, let go,
            // asks again when it writes.
            if idle && state.granted && !current.isClosed {
                if state.pending.isEmpty {
                    end(now)
                } else {
                    current.detach()
                    use(state.pending.removeFirst())
                }
            }
        } else if !waitingForPlayer {
            end(now)
        } else if let since = playerAwaitedSince, now - since >= settings.idleReleaseNanoseconds {
            end(now)
        }
    }

    /// When the source was last busy (0: no data yet): the latest of the stream's last data, the
    /// moment it was last let be heard, and when what its rings hold plays out. Idle-release runs
    /// from there, so a program that a pause or an interruption held (blocked in its write) is not
    /// released the moment it is heard again, nor one that wrote its last frames ahead and waits for
    /// them to play (aplay's drain) before they have.
    private func lastActive(_ stream: ExternalStream, now: Int) -> Int {
        guard stream.lastData > 0 else { return 0 }
        let queued = nanosecondsQueued(outputs.withLock { $0 })
        if queued > 0 && state.granted { state.playsUntil = now + queued }
        return max(stream.lastData, state.grantedSince, state.playsUntil)
    }

    private func end(_ now: Int) {
        state.ended = true
        state.selfEnded = true
        state.current?.detach()
        // Let go of: its program may write again on it, as a new source that then owns it — whose
        // outputs this one's `stop` detached, and whose hold this one's audibility set.
        state.current = nil
        for o in outputs.withLock({ $0 }) { o.slot.finish() }
        for p in state.pending { p.refuse("batond released source \(settings.name)") }
        state.pending = []
    }

    /// Baton ends this source for good — the user stopped it, other music replaced it — not for a
    /// while (a reload, its zones lost). A player with a control is told to pause at the stop,
    /// whatever `when-interrupted` says: its own interface (and AirPlay's sender) read "playing"
    /// while nothing was heard, and, refused, a player that reopens its device after an error (MPD
    /// after 10 s) took its zones back on its own. Under the lock.
    public func endsForGood() { state.endsForGood = true }

    /// Baton paused the player for an interruption that still lasts, and would tell it to play at
    /// its end: ended now (a reload, batond's stop), nothing will, and the player stays paused.
    /// Under the lock.
    public var leftPausedByBaton: Bool {
        settings.whenInterrupted == .pause && settings.control != nil && state.interrupted
            && !state.pausedThroughBaton && !playedByUserWhileInterrupted && !state.selfEnded
            && !state.endsForGood
    }

    public func stop() -> Bool {
        if state.endsForGood && !state.selfEnded, let control = settings.control {
            // Each runs before `close` ends the control's queue.
            if !control.followsPlayer {
                // A command pair cannot ask whether the player plays, and did nothing here: a
                // player that reopens its device (squeezelite) played again as a new source. Told
                // when it plays as far as Baton knows — not paused by Baton, through it or for an
                // interruption (its pause may be a toggle).
                let pausedForInterruption = settings.whenInterrupted == .pause && state.interrupted
                if !state.pausedThroughBaton && !pausedForInterruption { control.pause() }
            } else if state.playAskedAt != nil {
                // A play Baton sent, not reported yet: the state last seen says paused.
                control.pause()
            } else {
                control.pauseIfPlaying()
            }
        }
        if let current = state.current {
            current.detach()
            if !state.selfEnded { current.refuse("batond stopped source \(settings.name)") }
        }
        for p in state.pending { p.refuse("batond stopped source \(settings.name)") }
        state.pending = []
        state.ended = true
        settings.control?.close()
        return true
    }

    public var position: Double? { slotPosition(outputs.withLock { $0 }) }
    public var isDrained: Bool {
        state.ended && (outputs.withLock { $0 }.isEmpty || allDrained(outputs.withLock { $0 }))
    }
}
