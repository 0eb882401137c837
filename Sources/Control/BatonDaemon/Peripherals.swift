import BatonConfig
import Glibc
import OSThread
import Synchronization

/// What the control plane drives beside the zones, each its own object with its own lock: the
/// state file, the ALSA mixer controls, speech, the Snapcast speakers, the intercom line and the
/// music server. Made from the configuration at start; any thread.
final class Peripherals: Sendable {
    let persistence: Persistence
    let volumes: HardwareVolumes
    let speech = Speech()
    let snapcast: SnapcastKeepers
    let intercom = IntercomLine()
    let music: MusicConnection
    let covers: CoverCache
    let external = ExternalSources()

    init(config: BatonConfiguration, logger: Logger, events: EventLog) {
        // Without state-dir, systemd's StateDirectory= (STATE_DIRECTORY) is used when set.
        let directory =
            config.stateDir
            ?? getenv("STATE_DIRECTORY").flatMap {
                String(cString: $0).split(separator: ":").first.map(String.init)
            }
        persistence = Persistence(store: StateStore(directory: directory), logger: logger, events: events)
        volumes = HardwareVolumes(logger: logger, events: events)
        snapcast = SnapcastKeepers(logger: logger)
        music = MusicConnection(logger: logger)
        covers = CoverCache(directory: directory.map { "\($0)/covers" })
    }
}

/// The monitor thread: runs the control plane's upkeep (`Daemon.tick`) when something needs it and
/// sleeps otherwise — no polling. It wakes at the soonest of: the deadline the last tick returned
/// (a source's ring falls to its watermark, a source's last frame is played, the next track begins,
/// an arbiter timer is due), a `wake()` (the control plane's state changed, a zone's availability
/// changed), and the next state save (about once a second, which also bounds how late a change
/// nobody announced is noticed). Idle, that is one wake-up a second instead of 200.
final class Monitor: Sendable {
    private let running = Atomic<Bool>(false)
    private let thread = Mutex<OSThread?>(nil)
    private let lastTick = Atomic<Int>(0)
    private let doorbell = Semaphore()
    /// How often the state is saved (and the longest the monitor sleeps).
    static let saveInterval = 1_000_000_000
    /// The shortest sleep between two ticks, whatever a source asks for (no spinning).
    static let minimumSleep = 1_000_000

    /// Marks the monitor as starting; false when it already runs. Control thread.
    func begin() -> Bool { !running.exchange(true, ordering: .acquiringAndReleasing) }

    /// Makes the monitor tick now (or right after the tick it is in). Any thread but an output
    /// thread; does not block.
    func wake() { doorbell.post() }

    /// Starts the thread. `tick` returns the nanoseconds until it needs to run again, or nil when
    /// only a `wake()` or the next save needs it. Control thread, after `begin()`.
    func launch(tick: @escaping @Sendable () -> Int?, save: @escaping @Sendable () -> Void) {
        let started = OSThread.start(name: "monitor") { [self] in
            var lastSave = monotonicNanoseconds()
            while running.load(ordering: .acquiring) {
                lastTick.store(monotonicNanoseconds(), ordering: .releasing)
                doorbell.drain()  // what woke it is served by this tick; a wake() during it makes another
                let next = tick()
                let now = monotonicNanoseconds()
                if now - lastSave >= Self.saveInterval {
                    lastSave = now
                    save()
                }
                let untilSave = lastSave + Self.saveInterval - monotonicNanoseconds()
                doorbell.wait(nanoseconds: max(Self.minimumSleep, min(untilSave, next ?? Int.max)))
            }
        }
        thread.withLock { $0 = started }
    }

    /// Ends the thread and waits for it; false when it was not running. Control thread.
    func stop() -> Bool {
        guard running.exchange(false, ordering: .acquiringAndReleasing) else { return false }
        doorbell.post()
        thread.withLock { t in
            defer { t = nil }
            return t
        }?.join()
        return true
    }

    /// True while the thread has run within the last 2 s (it runs at least once a second). Any thread.
    var isAlive: Bool { monotonicNanoseconds() - lastTick.load(ordering: .acquiring) < 2_000_000_000 }
}

/// Keeping what the user set across restarts (zone volumes, the play queue at the position heard)
/// in `state-dir`: what was last computed and last written, and whether writing fails. Any thread.
final class Persistence: Sendable {
    let store: StateStore
    private let logger: Logger
    private let events: EventLog
    fileprivate let state = Mutex<(saved: SavedState, written: SavedState, failing: Bool, fadedOut: Bool)>(
        (SavedState(), SavedState(), false, false))

    init(store: StateStore, logger: Logger, events: EventLog) {
        self.store = store
        self.logger = logger
        self.events = events
    }

    /// The state as last computed (the saved queue `music/resume` plays).
    var saved: SavedState { state.withLock { $0.saved } }

    /// Set by the fade-out (after saving): the zone volumes are down and must not be saved.
    var fadedOut: Bool {
        get { state.withLock { $0.fadedOut } }
        set { state.withLock { $0.fadedOut = newValue } }
    }

    /// Reads the saved state at start: applies each known zone's volume (within its max-volume)
    /// and keeps the queue for `music/resume`; with no file yet, the queue `serverQueue` finds. A
    /// damaged file is logged and left alone. Before the output threads start.
    func restore(_ zones: ZoneTable, serverQueue: () -> SavedQueue?) {
        switch store.load() {
        case .failure(let failure):
            logger.error("state: \(failure)")
            events.publish(type: "state-error", reason: failure.description)
        case .success(nil):
            if store.path == nil {
                logger.info("state: no state-dir configured: volumes and the play queue are not kept across restarts")
            }
            if let q = serverQueue() {
                state.withLock {
                    $0.saved.queue = q
                    $0.written.queue = q
                }
            }
        case .success(let saved?):
            for (name, volume) in saved.volumes.sorted(by: { $0.key < $1.key }) {
                guard let zone = zones.zone(name), volume.isFinite, (0...zone.config.maxVolume).contains(volume) else {
                    continue
                }
                zone.mixer.setInitialVolume(Float(volume))
            }
            state.withLock {
                $0.saved = saved
                $0.written = saved
            }
            if let q = saved.queue, q.index < q.songs.count {
                logger.info(
                    "state: restored volumes and a queue of \(q.songs.count) songs at \(q.songs[q.index].title) \(Int(q.position)) s (music/resume plays it)"
                )
            }
        }
    }

    /// Records `now` and writes it if it changed since the last write. A write that fails (full
    /// disk, read-only state-dir) is retried at the next call; the first failure of a streak is
    /// logged and published (`state-error`), and the recovery is logged. Returns the queue written.
    func save(_ now: SavedState) -> SavedQueue?? {
        let previous: SavedState? = state.withLock { s in
            s.saved = now
            guard s.written != now else { return nil }
            defer { s.written = now }
            return s.written
        }
        guard let previous else { return nil }
        switch store.save(now) {
        case .failure(let failure):
            let first = state.withLock { s -> Bool in
                if s.written == now { s.written = previous }  // retry next time
                defer { s.failing = true }
                return !s.failing
            }
            if first {
                logger.error(
                    "state: \(failure); volumes and the queue are kept in memory and saved again once it works")
                events.publish(type: "state-error", reason: failure.description)
            }
        case .success:
            if state.withLock({ s in
                defer { s.failing = false }
                return s.failing
            }) {
                logger.info("state: saved again to \(store.path ?? "")")
            }
        }
        return .some(now.queue)
    }
}

extension Persistence {
    /// Keeps `queue` as the saved queue (a music source ended: where it was heard, or nil when it
    /// played to its end).
    func keep(queue: SavedQueue?) { state.withLock { $0.saved.queue = queue } }
}
