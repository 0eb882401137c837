import Glibc
import OSThread
import Synchronization
import Systemd

/// `control: {mpris: BUS-NAME, bus: session|system}`: the player's MPRIS interface over D-Bus
/// (`org.mpris.MediaPlayer2.Player` on `/org/mpris/MediaPlayer2`), through sd-bus. `Pause` and
/// `Play` run on the control's queue; a watcher thread follows `PlaybackStatus` through the player's
/// `PropertiesChanged` signals, so a pause or play the user gives the player is seen and told apart
/// from Baton's own.
public final class MPRISControl: PlayerControl, @unchecked Sendable {
    // @unchecked: the mutable state is behind Mutexes and atomics; the rest is `let`.
    public let busName: String
    public let systemBus: Bool
    /// The player's pid (the program writing to the source): its `busName.instance<pid>` is the
    /// one to talk to when it has an owner.
    public let pid: Int?
    private let queue = ControlQueue()
    private let report: @Sendable (String) -> Void
    /// The last command's failure (cleared by the next command that succeeds) and the watcher's
    /// (cleared once it follows the player again), apart: a Pause that succeeded cleared the
    /// watcher's "cannot follow", and the watcher getting its bus back never cleared it.
    private let failure = Mutex<(command: String?, watcher: String?)>((nil, nil))
    private let states: PlayerStateWatch
    private let running = Atomic<Bool>(true)
    /// When the control started (monotonic ns), from which `ownerGrace` counts.
    private let started = monotonicNanoseconds()
    static let path = "/org/mpris/MediaPlayer2"
    static let interface = "org.mpris.MediaPlayer2.Player"
    /// How long a name may have no owner after the control starts before it is said (ns): the
    /// control starts at the program's first frames, and a player takes its name when it likes —
    /// mpv after opening its audio, about 0.25 s after its launch under dbus-run-session, so a
    /// player starting normally was reported as "has no owner".
    public static let ownerGrace = 3_000_000_000

    /// `pid`: the player's, when known (`resolve`). `userChanged` runs on the watcher's thread
    /// when it keeps a user change (`takeUserChange`).
    public init(
        busName: String, systemBus: Bool, pid: Int? = nil, report: @escaping @Sendable (String) -> Void,
        userChanged: @escaping @Sendable () -> Void = {}
    ) {
        states = PlayerStateWatch(paused: "Paused", playing: "Playing", changed: userChanged)
        self.busName = busName
        self.systemBus = systemBus
        self.pid = pid
        self.report = report
        OSThread.detach(name: "mpris") { [self] in watch() }
    }

    public var description: String { "mpris \(busName) (\(systemBus ? "system" : "session") bus)" }
    public var lastError: String? { failure.withLock { $0.watcher ?? $0.command } }
    public func takeUserChange() -> PlayerChange? { states.takeUserChange() }
    public func pause() { command("Pause", expecting: "Paused") }
    public func play() { command("Play", expecting: "Playing") }
    public func pauseIfPlaying() { if states.isPlaying { pause() } }
    public var followsPlayer: Bool { true }

    public func close() {
        running.store(false, ordering: .releasing)
        queue.close()
    }

    private func command(_ member: String, expecting state: String) {
        let ticket = states.expect(state)
        // A command replaced before it ran: nothing of it is to be seen.
        queue.run(dropped: { [states] in states.dropExpectation(ticket) }) { [self] in
            do {
                let bus = try DBusConnection(systemBus: systemBus)
                let destination = try resolve(bus)?.name ?? busName
                try bus.call(destination: destination, path: Self.path, interface: Self.interface, member: member)
                states.ran(ticket)
                failure.withLock { $0.command = nil }
            } catch {
                let why = "MPRIS \(member) to \(busName) failed: \(error)"
                failure.withLock { $0.command = why }
                states.dropExpectation(ticket)
                report(why)
            }
        }
    }

    /// Follows `PlaybackStatus` through the player's `PropertiesChanged` signals, and the bus's
    /// `NameOwnerChanged` for its name (a player that starts or restarts is read afresh): between
    /// changes the thread sleeps in the bus, waking once a second only to see whether it should stop.
    /// (It used to read the property every 50 ms: 20 round trips a second through dbus-daemon and
    /// the player, all day, with nothing playing.) Each change the player signals is seen, however
    /// quick the next one (mpv folds a Play and a Pause a few ms apart into one signal, though).
    private func watch() {
        var reported = false
        /// Whether the name (or an instance of it) was seen owned since the control started: a
        /// player that leaves ends its source, and is not said to be missing.
        var everOwned = false
        var saidAbsent = false
        /// Neither the name nor an instance of it had an owner when last read.
        var ownerless = false
        let absentText = "\(busName) has no owner on the \(systemBus ? "system" : "session") bus"
        var lastHeard = monotonicNanoseconds()
        while running.load(ordering: .acquiring) {
            do {
                let bus = try DBusConnection(systemBus: systemBus)
                var owner: String?
                /// The name followed: `busName`, or the instance of it found (`resolve`).
                var followed: String?
                var reread = true
                // The name and those under it (`busName.instance…`).
                try bus.subscribe(
                    "type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',"
                        + "member='NameOwnerChanged',arg0namespace='\(busName)'"
                ) { [states, busName] signal in
                    guard signal.strings.count == 3,
                        signal.strings[0] == busName || signal.strings[0].hasPrefix(busName + ".instance")
                    else { return }
                    reread = true
                    // The player quit or crashed: a source paused or interrupted waited for it for
                    // ever, "paused" in the status, its resume a Play to nobody.
                    if signal.strings[0] == followed && owner != nil && signal.strings[2].isEmpty {
                        owner = nil
                        states.sawLeave()
                    }
                }
                // Every MPRIS player uses the same path: the sender tells this one apart.
                try bus.subscribe(
                    "type='signal',interface='org.freedesktop.DBus.Properties',member='PropertiesChanged',"
                        + "path='\(Self.path)',arg0='\(Self.interface)'"
                ) { [states] signal in
                    guard signal.sender == owner, let state = signal.stringProperties["PlaybackStatus"] else { return }
                    lastHeard = monotonicNanoseconds()
                    states.saw(state)
                }
                while running.load(ordering: .acquiring) {
                    if reread {
                        reread = false
                        let found = try resolve(bus)
                        (followed, owner) = (found?.name, found?.owner)
                        // Not on the bus (yet): nothing to follow until NameOwnerChanged says it came.
                        // Gone while the watcher had no bus (its session ended with the player's): it
                        // left, which no signal will say — a source paused or interrupted waited for
                        // it for ever.
                        if let found {
                            let state = try bus.stringProperty(
                                destination: found.name, path: Self.path, interface: Self.interface,
                                name: "PlaybackStatus")
                            states.saw(state)
                            everOwned = true
                            ownerless = false
                            failure.withLock { $0.watcher = nil }
                        } else {
                            states.sawAbsent()
                            ownerless = true
                            if everOwned || saidAbsent { failure.withLock { $0.watcher = absentText } }
                        }
                        lastHeard = monotonicNanoseconds()
                        reported = false
                    }
                    // Said while it lasts: a name the player does not own (a typo, spotifyd's with
                    // its pid) was accepted and never reported until a doorbell failed. Reported
                    // once, after `ownerGrace` (a player starting takes its name a moment after its
                    // first frames), unless the player was there: one that leaves ends its source.
                    var wait = 1_000_000
                    if ownerless && !everOwned && !saidAbsent {
                        let left = Self.ownerGrace - (monotonicNanoseconds() - started)
                        if left <= 0 {
                            saidAbsent = true
                            failure.withLock { $0.watcher = absentText }
                            report(absentText)
                        } else {
                            wait = min(wait, left / 1000 + 1)
                        }
                    }
                    try bus.process(waitingAtMost: UInt64(wait))
                }
            } catch {
                // Not known while not followed: the state last seen may be long gone.
                states.forget(lastHeard: lastHeard)
                if !reported {
                    reported = true
                    notFollowing("\(error)")
                }
                usleep(1_000_000)
            }
        }
    }

    /// The name to talk to now and its owner: `busName.instance<pid>`, the player's own (spotifyd,
    /// a second mpv: the name carries the player's pid); else `busName`; else the first of
    /// `busName.instance…`, by number, that has an owner; nil while none has. The plain name came
    /// first: with another mpv (the TV's) owning it, and the one writing to Baton its instance
    /// name, Baton paused the TV. (Sorted as text, instance1000 came before instance999.)
    private func resolve(_ bus: DBusConnection) throws(DBusError) -> (name: String, owner: String)? {
        let instance = busName + ".instance"
        if let pid, let owner = try bus.nameOwner(instance + String(pid)) { return (instance + String(pid), owner) }
        if let owner = try bus.nameOwner(busName) { return (busName, owner) }
        let names = try bus.listNames().filter { $0.hasPrefix(instance) }
        for name in names.sorted(by: { ($0.count, $0) < ($1.count, $1) }) {
            if let owner = try bus.nameOwner(name) { return (name, owner) }
        }
        return nil
    }

    private func notFollowing(_ why: String) {
        let text = "cannot follow \(busName)'s PlaybackStatus: \(why)"
        failure.withLock { $0.watcher = text }
        report(text)
    }
}
