import BatonConfig
import Glibc
import OSThread
import Synchronization

/// What the control plane drives beside the zones, each its own object with its own lock: the
/// state file, the ALSA mixer controls, speech, the Snapcast speakers, the intercom line and the
/// music server. Made from the configuration at start; any thread.
package final class Peripherals: Sendable {
    package let persistence: Persistence
    package let volumes: HardwareVolumes
    package let speech = Speech()
    package let snapcast: SnapcastKeepers
    package let intercom = IntercomLine()
    package let music: MusicConnection
    package let covers: CoverCache
    package let external = ExternalSources()
    /// Set when batond stops: what waits on the network (the music server, a URL announcement) ends
    /// at once, so that the HTTP API's and MQTT's stop, which wait for the requests they answer,
    /// end within systemd's 5 s.
    package let networkStop = StopFlag()

    package init(config: BatonConfiguration, logger: Logger, events: EventLog) {
        // Without state-dir, systemd's StateDirectory= (STATE_DIRECTORY) is used when set.
        let directory =
            config.stateDir
            ?? getenv("STATE_DIRECTORY").flatMap {
                String(cString: $0).split(separator: ":").first.map(String.init)
            }
        persistence = Persistence(store: StateStore(directory: directory), logger: logger, events: events)
        volumes = HardwareVolumes(logger: logger, events: events)
        snapcast = SnapcastKeepers(logger: logger)
        music = MusicConnection(logger: logger, stop: networkStop)
        covers = CoverCache(directory: directory.map { "\($0)/covers" })
    }
}

/// Keeping what the user set across restarts (zone volumes, the play queue at the position heard)
/// in `state-dir`: what was last computed and last written, and whether writing fails. Any thread.
package final class Persistence: Sendable {
    package let store: StateStore
    private let logger: Logger
    private let events: EventLog
    fileprivate typealias Kept = (
        saved: SavedState, written: SavedState, failing: Bool, fadedOut: Bool, fromServer: FromServer
    )
    fileprivate let state = Mutex<Kept>((SavedState(), SavedState(), false, false, .none))
    /// The server's queue at start, asked in the background (`restore`): being asked, kept as the
    /// saved queue and not yet replaced by one of this run's (a save that computed none keeps it),
    /// or not had (the request failed, or was ended by the stop: asked again at the next start).
    fileprivate enum FromServer { case none, asking, held, failed }
    /// Posted once the server has answered (or failed); each waiter posts it again for the next.
    private let serverAnswered = Semaphore()
    /// Held through a save (see `save`).
    private let saving = Mutex<Void>(())
    /// The thread that writes what `offer` hands it (`startWriter`), and whether it should end.
    private let writer = Mutex<(thread: OSThread?, stopping: Bool)>((nil, false))
    /// Rung by `offer` when the state changed, and by `stopWriter`.
    private let writerBell = Semaphore()

    package init(store: StateStore, logger: Logger, events: EventLog) {
        self.store = store
        self.logger = logger
        self.events = events
    }

    /// The state as last computed (the saved queue `music/resume` plays).
    package var saved: SavedState { state.withLock { $0.saved } }

    /// Set by the fade-out (after saving): the zone volumes are down and must not be saved.
    package var fadedOut: Bool {
        get { state.withLock { $0.fadedOut } }
        set { state.withLock { $0.fadedOut = newValue } }
    }

    /// Reads the saved state at start: applies each known zone's volume (within its max-volume)
    /// and keeps the queue for `music/resume`; with no file yet, the queue `serverQueue` finds,
    /// asked on a thread of its own (a server that is slow or away must not hold batond's start: up
    /// to its request timeout, 30 s). A damaged file is logged and left alone. Before the output
    /// threads start.
    package func restore(
        _ zones: ZoneTable, serverQueue: @escaping @Sendable () -> Result<SavedQueue?, any Error>
    ) {
        switch store.load() {
        case .failure(let failure):
            // Kept for a person to read (the first save wrote over it), and the server's queue
            // asked for as with no file.
            let aside = store.setAside().map { "; kept as \($0)" } ?? ""
            logger.error("state: \(failure)\(aside)")
            events.publish(type: .stateError, reason: failure.description + aside)
            askServer(serverQueue)
        case .success(nil):
            if store.path == nil {
                logger.info("state: no state-dir configured: volumes and the play queue are not kept across restarts")
            }
            askServer(serverQueue)
        case .success(var saved?):
            if let q = saved.queue, let problem = StateStore.problem(q) {
                saved.queue = nil
                let why = "\(store.path ?? "state"): the saved queue is dropped: \(problem)"
                logger.error("state: \(why)")
                events.publish(type: .stateError, reason: why)
            }
            for (name, volume) in saved.volumes.sorted(by: { $0.key < $1.key }) {
                guard let zone = zones.zone(name), volume.isFinite, volume >= 0, zone.config.allows(volume: volume)
                else { continue }
                zone.mixer.setInitialVolume(Float(min(volume, zone.config.maxVolume)))
            }
            state.withLock {
                $0.saved = saved
                $0.written = saved
            }
            if let q = saved.queue, q.index < q.songs.count {
                logger.info(
                    "state: restored volumes and a queue of \(q.songs.count) songs at \(q.songs[q.index].title) \(Int(q.position)) s (music/resume plays it)"
                )
            } else if saved.askServerQueue == true {
                // The server's queue could not be had last time (it failed, or batond stopped first).
                askServer(serverQueue)
            }
        }
    }

    /// Asks the server for its queue on a thread of its own (see `restore`).
    private func askServer(_ serverQueue: @escaping @Sendable () -> Result<SavedQueue?, any Error>) {
        state.withLock { $0.fromServer = .asking }
        OSThread.detach(name: "server-queue") { [self] in
            let answer = serverQueue()
            state.withLock { s in
                // A queue of this run's, saved meanwhile, is newer. Saved, not marked written: the
                // next save writes it to the file (the first may have been written without).
                switch answer {
                case .success(let q?) where s.saved.queue == nil:
                    s.saved.queue = q
                    s.saved.askServerQueue = nil
                    s.fromServer = .held
                case .failure where s.saved.queue == nil: s.fromServer = .failed
                default: s.fromServer = .none
                }
            }
            serverAnswered.post()
        }
    }

    /// Starts the thread `offer` hands its writes to (`state-writer`). Control thread, at start.
    package func startWriter() {
        writer.withLock { w in
            guard w.thread == nil else { return }
            w.stopping = false
            w.thread = OSThread.start(name: "state-writer") { [self] in
                while true {
                    writerBell.wait()
                    writerBell.drain()  // one write serves every ring so far: it writes the newest
                    if writer.withLock({ $0.stopping }) { return }
                    _ = save(state.withLock { $0.saved })
                }
            }
        }
    }

    /// Ends the writer thread, after the write it is in (a disk that does not answer holds this as
    /// long). Control thread, at the stop, before the last `save`.
    package func stopWriter() {
        let thread = writer.withLock { w in
            w.stopping = true
            defer { w.thread = nil }
            return w.thread
        }
        writerBell.post()
        thread?.join()
    }

    /// Records `now` and, if it changed since the last write, has the writer thread write it; returns
    /// at once (the monitor's save: an `fsync` on a slow SD card can take seconds, and the monitor
    /// must go on releasing finished sounds and answering the watchdog meanwhile). Without a writer
    /// running, writes it itself (`save`). Returns the queue to be written.
    package func offer(_ now: SavedState) -> SavedQueue?? {
        guard writer.withLock({ $0.thread != nil && !$0.stopping }) else { return save(now) }
        let due: SavedQueue?? = state.withLock { s in
            guard !s.fadedOut else { return nil }
            let now = Self.record(now, in: &s)
            return s.written == now ? nil : .some(now.queue)
        }
        if due != nil { writerBell.post() }
        return due
    }

    /// Records `now` and writes it if it changed since the last write. A write that fails (full
    /// disk, read-only state-dir) is retried at the next call; the first failure of a streak is
    /// logged and published (`state-error`), and the recovery is logged. Returns the queue written.
    /// Blocks while the disk writes (the stop's save, and the writer thread's).
    package func save(_ now: SavedState) -> SavedQueue?? {
        // One save at a time: the monitor's and the stop's own (fadeOut) may come together, and two
        // writers of `state.json.tmp` could leave it half of each.
        saving.withLock { _ in saveLocked(now) }
    }

    /// Keeps `now` as the saved state, completed with what only the store knows (the server's
    /// queue, whether to ask it again at the next start). Under `state`'s lock.
    private static func record(_ now: SavedState, in s: inout Kept) -> SavedState {
        var now = now
        // Computed from a look before the server's queue came: that queue stays.
        if s.fromServer == .held && now.queue == nil { now.queue = s.saved.queue }
        if now.queue != nil { s.fromServer = .none }
        // No queue yet and the server's not had: the next start asks it again.
        now.askServerQueue = now.queue == nil && [.asking, .failed].contains(s.fromServer) ? true : nil
        s.saved = now
        return now
    }

    private func saveLocked(_ now: SavedState) -> SavedQueue?? {
        // The stop saved before its fade-out: a save after it (the monitor's, still running) would
        // keep the volumes turned down by the fade.
        guard !state.withLock({ $0.fadedOut }) else { return nil }
        var now = now
        let previous: SavedState? = state.withLock { s in
            now = Self.record(now, in: &s)
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
                events.publish(type: .stateError, reason: failure.description)
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
    package func keep(queue: SavedQueue?) {
        state.withLock {
            $0.saved.queue = queue
            $0.fromServer = .none
        }
    }

    /// Returns once the server's queue asked at start has come (or failed); at once when none is
    /// being asked. Not the control plane's lock: it may take the server's request timeout.
    package func awaitServerQueue() {
        guard state.withLock({ $0.fromServer == .asking }) else { return }
        serverAnswered.wait()
        serverAnswered.post()
    }
}
