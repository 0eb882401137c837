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
    private let queue = ControlQueue()
    private let report: @Sendable (String) -> Void
    /// The last command's failure (cleared by the next command that succeeds) and the watcher's
    /// (cleared once it follows the player again), apart: a Pause that succeeded cleared the
    /// watcher's "cannot follow", and the watcher getting its bus back never cleared it.
    private let failure = Mutex<(command: String?, watcher: String?)>((nil, nil))
    private let states: PlayerStateWatch
    private let running = Atomic<Bool>(true)
    static let path = "/org/mpris/MediaPlayer2"
    static let interface = "org.mpris.MediaPlayer2.Player"

    /// `userChanged` runs on the watcher's thread when it keeps a user change (`takeUserChange`).
    public init(
        busName: String, systemBus: Bool, report: @escaping @Sendable (String) -> Void,
        userChanged: @escaping @Sendable () -> Void = {}
    ) {
        states = PlayerStateWatch(paused: "Paused", playing: "Playing", changed: userChanged)
        self.busName = busName
        self.systemBus = systemBus
        self.report = report
        OSThread.detach(name: "mpris") { [self] in watch() }
    }

    public var description: String { "mpris \(busName) (\(systemBus ? "system" : "session") bus)" }
    public var lastError: String? { failure.withLock { $0.watcher ?? $0.command } }
    public func takeUserChange() -> PlayerChange? { states.takeUserChange() }
    public func pause() { command("Pause", expecting: "Paused") }
    public func play() { command("Play", expecting: "Playing") }
    public func pauseIfPlaying() { if states.isPlaying { pause() } }

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
                try bus.call(destination: busName, path: Self.path, interface: Self.interface, member: member)
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
        var lastHeard = monotonicNanoseconds()
        while running.load(ordering: .acquiring) {
            do {
                let bus = try DBusConnection(systemBus: systemBus)
                var owner: String?
                var reread = true
                try bus.subscribe(
                    "type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',"
                        + "member='NameOwnerChanged',arg0='\(busName)'"
                ) { [states] signal in
                    let had = owner
                    owner = signal.strings.count == 3 && !signal.strings[2].isEmpty ? signal.strings[2] : nil
                    reread = true
                    // The player quit or crashed: a source paused or interrupted waited for it for
                    // ever, "paused" in the status, its resume a Play to nobody.
                    if had != nil && owner == nil { states.sawLeave() }
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
                        owner = try bus.nameOwner(busName)
                        // Not on the bus (yet): nothing to follow until NameOwnerChanged says it came;
                        // a command meanwhile reports its own failure. Gone while the watcher had
                        // no bus (its session ended with the player's): it left, which no signal
                        // will say — a source paused or interrupted waited for it for ever.
                        if owner == nil {
                            states.sawAbsent()
                        } else {
                            let state = try bus.stringProperty(
                                destination: busName, path: Self.path, interface: Self.interface, name: "PlaybackStatus"
                            )
                            states.saw(state)
                        }
                        lastHeard = monotonicNanoseconds()
                        reported = false
                        failure.withLock { $0.watcher = nil }
                    }
                    try bus.process(waitingAtMost: 1_000_000)
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

    private func notFollowing(_ why: String) {
        let text = "cannot follow \(busName)'s PlaybackStatus: \(why)"
        failure.withLock { $0.watcher = text }
        report(text)
    }
}
