import Glibc
import OSThread
import Synchronization

/// Something the user did to an external player through its own controls.
public enum PlayerChange: Sendable, Equatable {
    case paused
    case played
    case stopped
    /// The player left (its MPRIS name has no owner: it quit or crashed).
    case gone
}

/// How Baton tells an external player to pause and play (`control:` of an external source): MPD's
/// protocol, MPRIS, a command pair. `pause` and `play` return at once: the work runs on the control's
/// own thread, never under the control plane's lock. Failures are reported (`control-error`).
public protocol PlayerControl: AnyObject, Sendable {
    /// What it talks to, for status: `mpd 127.0.0.1:6600`.
    var description: String { get }
    func pause()
    func play()
    /// Pauses the player if its own interface says it plays now; a control that cannot see the
    /// player does nothing (its pause command may be a toggle).
    func pauseIfPlaying()
    /// Whether it sees the player's own state (MPD, MPRIS), or only tells it (a command pair).
    var followsPlayer: Bool { get }
    /// A change the user made (seen through the player's interface, not commanded by Baton), once.
    func takeUserChange() -> PlayerChange?
    /// The last failure, if the last attempt failed.
    var lastError: String? { get }
    func close()
}

/// Runs a control's commands on a thread of its own, so that the arbiter never waits: the one
/// running, and the newest after it. A command given while another waits replaces it (its `dropped`
/// runs): each is "be paused" or "be playing", and only the newest is what Baton wants. They were
/// all kept: with the player slow to answer (MPD unreachable, 2–16 s a command) and doorbells
/// ringing, the player flapped between pause and play for minutes once it answered again.
final class ControlQueue: Sendable {
    private struct Job {
        let run: @Sendable () -> Void
        let dropped: @Sendable () -> Void
    }
    private let waiting = Mutex<Job?>(nil)
    private let wake = Semaphore()
    private let running = Atomic<Bool>(true)

    /// The thread sleeps until a job or `close` posts it (it used to look every 100 ms as well).
    init() {
        OSThread.detach(name: "player-control") { [self] in
            while running.load(ordering: .acquiring) {
                wake.wait()
                runQueued()
            }
            // Jobs given before `close` run (the pause of a source Baton ended): one queued between
            // the last look and the close was dropped.
            runQueued()
        }
    }

    /// Runs the job waiting, and the one given meanwhile, until none waits. The queue's thread.
    private func runQueued() {
        while let job = waiting.withLock({ w -> Job? in
            defer { w = nil }
            return w
        }) {
            job.run()
        }
    }

    /// Runs `job` after the one running, in place of the one waiting (whose `dropped` runs now).
    func run(dropped: @escaping @Sendable () -> Void = {}, _ job: @escaping @Sendable () -> Void) {
        let replaced = waiting.withLock { w -> Job? in
            defer { w = Job(run: job, dropped: dropped) }
            return w
        }
        replaced?.dropped()
        wake.post()
    }

    func close() {
        running.store(false, ordering: .releasing)
        wake.post()
    }
}

/// `control: {command: {pause: "...", resume: "..."}}`: each runs with `/bin/sh -c`; a non-zero exit
/// is a control error. It cannot see what the user does to the player.
public final class CommandControl: PlayerControl, @unchecked Sendable {
    // @unchecked: `failure` is behind a Mutex; the rest is `let`.
    public let pauseCommand: String
    public let resumeCommand: String
    private let queue = ControlQueue()
    private let failure = Mutex<String?>(nil)
    private let report: @Sendable (String) -> Void

    public init(pause: String, resume: String, report: @escaping @Sendable (String) -> Void) {
        pauseCommand = pause
        resumeCommand = resume
        self.report = report
    }

    public var description: String { "command" }
    public func pause() { run(pauseCommand) }
    public func play() { run(resumeCommand) }
    public func pauseIfPlaying() {}
    public var followsPlayer: Bool { false }
    public func takeUserChange() -> PlayerChange? { nil }
    public var lastError: String? { failure.withLock { $0 } }
    public func close() { queue.close() }

    private func run(_ command: String) {
        queue.run { [self] in
            let status = Self.shell(command)
            if status == 0 {
                failure.withLock { $0 = nil }
            } else {
                let why =
                    status.map { "command \"\(command)\" exited with status \($0)" }
                    ?? "command \"\(command)\" did not finish within \(Self.deadline.components.seconds) s; it was stopped"
                failure.withLock { $0 = why }
                report(why)
            }
        }
    }

    /// How long a pause or resume command may run before it is stopped: one that hung held every
    /// command after it for ever.
    static let deadline: Duration = .seconds(10)

    /// `/bin/sh -c command`, waited for `deadline` at most; its exit status (127 when it could not
    /// run), nil when it was stopped at the deadline (with what it started: its own process
    /// group). The shell starts with no signal blocked or ignored (`ChildProcess`), as it would
    /// from a terminal.
    static func shell(_ command: String) -> Int32? {
        var pid: pid_t = 0
        let args = ["/bin/sh", "-c", command]
        var argv: [UnsafeMutablePointer<CChar>?] = args.map { strdup($0) } + [nil]
        defer { for a in argv { free(a) } }
        // Its own process group (for the deadline) is not the terminal's: reading batond's stdin
        // there would stop it (SIGTTIN). It has none.
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        ChildProcess.closeInherited(&actions)
        let rc = ChildProcess.withDefaultSignals(ownGroup: true) {
            posix_spawn(&pid, "/bin/sh", &actions, $0, &argv, environ)
        }
        guard rc == 0 else { return 127 }
        return ChildProcess.waitForExit(pid, killingAfter: deadline.wholeNanoseconds)
    }
}

/// A player's state as its own interface reports it, told apart from what Baton asked for: a change
/// to a state Baton commanded — while the command waits or runs, or within 3 s after it ran — is
/// Baton's own; any other change is the user's, kept once for `takeUserChange`. Shared by the MPD
/// and MPRIS controls. Any thread.
final class PlayerStateWatch: Sendable {
    /// The player's words for paused and playing (`pause`/`play`, `Paused`/`Playing`).
    private let paused: String
    private let playing: String
    /// A state Baton commanded, and until when a change to it is Baton's own (ns; nil while the
    /// command has not run: it may wait behind a slow one).
    private struct Expectation {
        let ticket: Int
        let state: String
        var until: Int?
    }
    /// Every command's, in the order given. There was one, replaced by each command: a pause and
    /// then a play before the player reported the pause (a doorbell that ended at once, two in a
    /// row) read its "paused" as the user's — the interruption then ended without a resume.
    private let expected = Mutex<(next: Int, list: [Expectation])>((0, []))
    /// How long after its command ran a player's report of it counts as Baton's (ns).
    static let reportWithin = 3_000_000_000
    /// How long commands seem folded into no change still count (ns; see `saw`).
    static let foldedWithin = 1_000_000_000
    private let change = Mutex<PlayerChange?>(nil)
    /// The state last seen, whether it is known now (`forget`: kept, to tell what changed while the
    /// interface could not be reached once it can), and since when it is not: the watcher's last
    /// word from the player (ns).
    private let observed = Mutex<(state: String?, known: Bool, unknownSince: Int)>((nil, false, 0))

    /// Called (on the watcher's thread) when a user change is kept: the monitor takes it at once.
    private let changed: @Sendable () -> Void
    private let clock: @Sendable () -> Int

    /// `clock`: monotonic ns (tests give their own).
    init(
        paused: String, playing: String, clock: @escaping @Sendable () -> Int = { monotonicNanoseconds() },
        changed: @escaping @Sendable () -> Void
    ) {
        self.changed = changed
        self.paused = paused
        self.playing = playing
        self.clock = clock
    }

    /// The state as last seen.
    var state: String? { observed.withLock { $0.known ? $0.state : nil } }
    /// The player said it plays, last.
    var isPlaying: Bool { state == playing }

    /// Baton is about to command `state`: the ticket for `ran` and `dropExpectation`.
    func expect(_ state: String) -> Int {
        let now = clock()
        return expected.withLock { e in
            e.list.removeAll { $0.until.map { $0 < now } ?? false }
            if e.list.count >= 16 { e.list.removeFirst() }
            e.next += 1
            e.list.append(Expectation(ticket: e.next, state: state, until: nil))
            return e.next
        }
    }

    /// The command of `ticket` ran: the player reports it within `reportWithin` from now.
    func ran(_ ticket: Int) {
        let until = clock() + Self.reportWithin
        expected.withLock { e in
            if let i = e.list.firstIndex(where: { $0.ticket == ticket }) { e.list[i].until = until }
        }
    }

    func takeUserChange() -> PlayerChange? {
        change.withLock { c in
            defer { c = nil }
            return c
        }
    }

    /// The state is not known now (the interface cannot be reached). The state seen next is compared
    /// with the one seen last: an MPD restarted meanwhile (`stop`) is a change.
    /// `lastHeard`: when the watcher last heard from the player (a connection that went silent
    /// told nothing since; ns, monotonic).
    func forget(lastHeard: Int) {
        observed.withLock { o in
            if o.known { o.unknownSince = lastHeard }
            o.known = false
        }
    }

    /// Baton's command of `ticket` failed: what it asked for will not come of it.
    func dropExpectation(_ ticket: Int) { expected.withLock { $0.list.removeAll { $0.ticket == ticket } } }

    /// The player left (quit, crashed): a change nobody commanded, whatever it showed last. Its next
    /// state, if it comes back, is read afresh.
    func sawLeave() {
        observed.withLock { o in
            o.state = nil
            o.known = false
        }
        change.withLock { $0 = .gone }
        changed()
    }

    /// The player is not there (its name has no owner). If it was seen before, it left — while
    /// nothing could tell (the watcher had no bus): `sawLeave`. Once.
    func sawAbsent() {
        if observed.withLock({ $0.state != nil }) { sawLeave() }
    }

    /// The interface reported `state` now.
    func saw(_ state: String) {
        let (previous, wasKnown, unknownSince) = observed.withLock { o in
            defer {
                o.state = state
                o.known = true
            }
            return o
        }
        guard let previous, previous != state else {
            // Where it was (or the first word): a command of this state that ran, and those before
            // it, are done with soon — a pause and a play folded into one report show no change,
            // and left for 3 s they took the user's next change for Baton's — but not at once: the
            // report may be a stale one that came before the player applied them (a player that
            // repeats its status with other properties), their own still to come.
            let soon = clock() + Self.foldedWithin
            expected.withLock { e in
                guard let i = e.list.lastIndex(where: { $0.state == state && $0.until != nil }) else { return }
                for k in 0...i { e.list[k].until = min(e.list[k].until ?? soon, soon) }
            }
            return
        }
        let now = clock()
        // The first command of this state still in time is the one reported; those before it were
        // overtaken (the player went on to this one before saying so). Seen again after the
        // interface could not be reached: a change to what Baton asked for while it could not (or
        // just before) is Baton's, however long ago (it was done over a connection of its own); an
        // older request is not.
        let ours = expected.withLock { e -> Bool in
            let inTime = { (x: Expectation) in
                x.until.map { $0 >= now || (!wasKnown && $0 >= unknownSince) } ?? true
            }
            guard let i = e.list.firstIndex(where: { $0.state == state && inTime($0) }) else { return false }
            e.list.removeFirst(i + 1)
            return true
        }
        if ours { return }
        let c: PlayerChange = state == paused ? .paused : (state == playing ? .played : .stopped)
        change.withLock { $0 = c }
        changed()
    }
}
