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
    package let speech: Speech
    package let snapcast: SnapcastKeepers
    package let intercom = IntercomLine()
    package let music: MusicConnection
    package let covers: CoverCache
    package let external = ExternalSources()
    /// Set when batond stops: what waits on the network (the music server, a URL announcement) or
    /// on the speech program ends at once, so that the HTTP API's and MQTT's stop, which wait for
    /// the requests they answer, end within systemd's 5 s.
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
        music.configure(config.music)
        speech = Speech(stop: networkStop)
        covers = CoverCache(directory: directory.map { "\($0)/covers" })
    }
}

/// Keeping what the user set across restarts (zone volumes, the play queue at the position heard)
/// in `state-dir`: what was last computed and last written, and whether writing fails. The file is
/// written by a thread of its own (`startWriter`): a disk that takes seconds to answer (an SD card)
/// holds that thread only. Any thread.
package final class Persistence: Sendable {
    package let store: StateStore
    private let logger: Logger
    private let events: EventLog
    fileprivate struct Kept {
        /// The state as last computed, and as last written (or being written).
        var saved = SavedState()
        var written = SavedState()
        var failing = false
        /// The stop's last state was recorded (before the fade-out, which turns the zone volumes
        /// down): nothing computed after it is kept.
        var fadedOut = false
        var fromServer = FromServer.none
        /// Writes asked of the writer thread, and how many it had been asked when it began the
        /// write it last finished (what `saveLast` waits for).
        var asked = 0
        var served = 0
        /// When the write in progress began (monotonic ns); whether its slowness was reported.
        var writingSince: Int?
        /// When the last write began and when the last state was offered (monotonic ns), nil before
        /// the first.
        var lastWriteAt: Int?
        var lastOfferAt: Int?
        var slowReported = false
        /// `saveLast` waits for the writer (which then posts `wrote` after each write).
        var lastAwaited = false
        /// Counts `keep(queue:)`: a state computed before a source kept its queue does not put an
        /// older queue back (`record`).
        var kept = 0
        /// Why nothing may be written (the file could not be read at start), or nil.
        var held: String?
    }
    fileprivate let state = Mutex<Kept>(Kept())
    /// The server's queue at start, asked in the background (`restore`): being asked, kept as the
    /// saved queue and not yet replaced by one of this run's (a save that computed none keeps it),
    /// or not had (the request failed, or was ended by the stop: asked again at the next start).
    fileprivate enum FromServer { case none, asking, held, failed }
    /// Posted once the server has answered (or failed); each waiter posts it again for the next.
    private let serverAnswered = Semaphore()
    /// Held through a write (see `save`).
    private let saving = Mutex<Void>(())
    /// The thread that writes the state (`startWriter`): its own flag and semaphores, so that one
    /// given up at a stop (`stopWriter`) and woken later never takes a newer one's.
    private final class Writer: Sendable {
        var thread: OSThread? { started.withLock { $0 } }
        let started = Mutex<OSThread?>(nil)
        let stopping = Atomic<Bool>(false)
        /// Rung when there is a state to write, and by `stopWriter`.
        let bell = Semaphore()
        /// Posted after each write while `saveLast` waits (`Kept.lastAwaited`), and at the end.
        let wrote = Semaphore()
        let ended = Semaphore()
    }
    private let writer = Mutex<Writer?>(nil)
    /// A write that has not finished after this long is reported (`state-error`).
    static let slowWriteNanoseconds = 5_000_000_000
    /// While music plays its position moves on every second, and the monitor's save each second
    /// wrote the file (a temporary file, `fsync`, a rename) 3,600 times an hour of music — on a
    /// speaker's SD card, wear for nothing. The monitor's saves write a change that is only the
    /// music playing on at most this often (`SavedState.playedOn`); any other change — a seek
    /// too — at once, and the stop's save always: a power cut loses at most this much of the place
    /// heard (MPD's `state_file_interval` is 2 minutes).
    package static let positionWriteNanoseconds = 30_000_000_000

    /// How often a change that is only the music playing on is written, for a queue of `songs`:
    /// `positionWriteNanoseconds`, and as much again for every 500 songs beyond the first 500. The
    /// whole file is written each time (about 450 bytes a song): a 10,000-song playlist rewrote
    /// 4.5 MB every 30 s, half a gigabyte an hour of music on the SD card; now every 10 minutes,
    /// the place a power cut loses growing with it.
    package static func positionWriteNanoseconds(songs: Int) -> Int {
        positionWriteNanoseconds * max(1, (songs + 499) / 500)
    }
    /// Monotonic nanoseconds (a test sets the clock).
    private let clock: @Sendable () -> Int

    package init(
        store: StateStore, logger: Logger, events: EventLog, clock: @escaping @Sendable () -> Int = monotonicNanoseconds
    ) {
        self.store = store
        self.logger = logger
        self.events = events
        self.clock = clock
    }

    /// Writes nothing from now on, for `why` (said as the write's failure).
    private func holdWrites(_ why: String) { state.withLock { $0.held = why } }

    /// The state as last computed (the saved queue `music/resume` plays).
    package var saved: SavedState { state.withLock { $0.saved } }

    /// Keeps `sound` as the announce button's (Home Assistant's select): written with the next
    /// save, and the choice a restart finds. Any thread.
    package func choose(sound: String) { state.withLock { $0.saved.sound = sound } }

    /// Set once the stop's last state is recorded (`saveLast`): the zone volumes are going down
    /// and must not be saved.
    package var fadedOut: Bool { state.withLock { $0.fadedOut } }

    /// Reads the saved state at start: applies each known zone's volume (within its max-volume)
    /// and keeps the queue for `music/resume`; with no file yet, the queue `serverQueue` finds,
    /// asked on a thread of its own (a server that is slow or away must not hold batond's start: up
    /// to its request timeout, 30 s). A damaged file is logged and left alone. Before the output
    /// threads start.
    package func restore(
        _ zones: ZoneTable, serverQueue: @escaping @Sendable () -> Result<SavedQueue?, any Error>
    ) {
        var loaded = store.loadParts()
        // A read the system refused may be passing (too many open files, an interrupted read).
        for _ in 0..<2 {
            guard case .failure(let failure) = loaded, failure.unreadable else { break }
            usleep(100_000)
            loaded = store.loadParts()
        }
        switch loaded {
        case .failure(let failure) where failure.unreadable:
            // Not damage (a file made root's, an I/O error): left as it is and not written over
            // this run, so nothing it holds is lost; set aside, the next save wrote the defaults
            // in its place.
            let why =
                "\(failure); it is left as it is and not written over: batond starts without it "
                + "and saves nothing until it is restarted with the file readable"
            holdWrites(why)
            logger.error("state: \(why)")
            events.publish(type: .stateError, reason: why)
            askServer(serverQueue)
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
        case .success((var saved, let dropped)?):
            if !dropped.isEmpty {
                // The rest is restored; the file is kept for a person to read (the first save
                // would write over what could not be read), and that save comes at once (below).
                // Kept in place too until that save replaces it: the parts read are on disk
                // meanwhile, whatever happens to the save.
                let aside =
                    store.setAside(keeping: true).map { "; the file is kept as \($0)" }
                    ?? "; the file could not be kept aside: the next save writes over it"
                let why =
                    "\(store.path ?? "state"): could not read \(dropped.joined(separator: ", ")): dropped, the rest restored\(aside)"
                logger.error("state: \(why)")
                events.publish(type: .stateError, reason: why)
            }
            var rewrite = !dropped.isEmpty
            if let q = saved.queue, let problem = StateStore.problem(q) {
                rewrite = true  // else the queue stays in the file, and every start says so again
                saved.queue = nil
                saved.askServerQueue = true  // as with no queue: the server's own is asked for
                let why = "\(store.path ?? "state"): the saved queue is dropped: \(problem)"
                logger.error("state: \(why)")
                events.publish(type: .stateError, reason: why)
            }
            if let cut = saved.queue?.cutToMostSongs() {
                rewrite = true  // the file holds what is restored
                logger.warning("state: \(store.path ?? "state"): the saved queue: \(cut)")
            }
            for (name, volume) in saved.volumes.sorted(by: { $0.key < $1.key }) {
                guard let zone = zones.zone(name), let start = zone.config.start(atSaved: volume) else { continue }
                if !zone.config.allows(volume: volume) {
                    // Its max-volume was lowered since: the zone starts at it (as a reload sets it),
                    // not at the configured volume, and says so.
                    logger.warning(
                        "state: zone \(name)'s saved volume \(volume) is above its max-volume \(zone.config.maxVolume): it starts at \(zone.config.maxVolume)"
                    )
                }
                zone.mixer.setInitialVolume(Float(start))
            }
            state.withLock {
                $0.saved = saved
                // What is on disk: the file as read — or, set aside or holding a queue dropped,
                // nothing, so that the first save writes what was restored (else nothing changed
                // wrote nothing, and the next start found no state at all, or the same bad queue).
                $0.written = rewrite ? SavedState() : saved
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
                // Not once a source of this run kept its queue (`keep`: none, when it played out).
                case .success(let q?) where s.saved.queue == nil && s.fromServer == .asking:
                    s.saved.queue = q
                    s.saved.askServerQueue = nil
                    s.fromServer = .held
                case .failure where s.saved.queue == nil && s.fromServer == .asking: s.fromServer = .failed
                default: s.fromServer = .none
                }
            }
            serverAnswered.post()
        }
    }

    /// Starts the thread that writes the state (`state-writer`). Control thread, at start.
    package func startWriter() {
        let new = Writer()
        let isNew = writer.withLock { w -> Bool in
            guard w == nil else { return false }
            w = new
            return true
        }
        guard isNew else { return }
        state.withLock { $0.fadedOut = false }
        new.started.withLock { t in
            t = OSThread.start(name: "state-writer") { [self] in
                defer { new.ended.post() }
                while true {
                    new.bell.wait()
                    new.bell.drain()  // one write serves every ring so far: it writes the newest
                    // At the stop, what `saveLast` recorded is still written if a slow write held it.
                    let stopping = new.stopping.load(ordering: .acquiring)
                    let asked = state.withLock { $0.asked }
                    saving.withLock { _ in _ = write(recording: nil, basis: nil) }
                    let awaited = state.withLock { s in
                        s.served = max(s.served, asked)
                        return s.lastAwaited
                    }
                    if awaited { new.wrote.post() }
                    if stopping { return }
                }
            }
        }
    }

    /// Ends the writer thread, after the write it is in, waiting for it at most `nanoseconds`: a
    /// disk that does not answer keeps it, and batond stops without it. Control thread, at the stop,
    /// after `saveLast`.
    package func stopWriter(within nanoseconds: Int = 500_000_000) {
        let current = writer.withLock { w -> Writer? in
            defer { w = nil }
            return w
        }
        guard let current else { return }
        current.stopping.store(true, ordering: .releasing)
        current.bell.post()
        if current.ended.wait(nanoseconds: nanoseconds) {
            current.thread?.join()
        } else {
            logger.warning("state: the state writer still waits on the disk; stopping without it")
        }
    }

    /// The writer now running, nil when none runs or it is stopping.
    private var runningWriter: Writer? {
        writer.withLock { w in w.flatMap { $0.stopping.load(ordering: .acquiring) ? nil : $0 } }
    }

    /// Records `now` (computed when `keep(queue:)` had been called `basis` times: see `keptCount`)
    /// and, if it changed since the last write, has the writer thread write it; returns at once (the
    /// monitor's save, about once a second: it must go on releasing finished sounds and answering
    /// the watchdog while the disk writes). A change that is only the music playing on, or the
    /// Snapcast speakers set, is written at most every `positionWriteNanoseconds(songs:)`
    /// (`SavedState.waits`). A write that has not
    /// finished after `slowWriteNanoseconds` is reported, once. Returns the queue recorded when the
    /// state differs from the one written (for the server's mirror, which paces itself), written
    /// now or later; nil when it does not.
    package func offer(_ now: SavedState, basis: Int? = nil) -> SavedQueue?? {
        let running = runningWriter
        let clock = self.clock()
        var slow = false
        var ring = false
        let due: SavedQueue?? = state.withLock { s in
            guard !s.fadedOut else { return nil }
            let before = (state: s.saved, at: s.lastOfferAt)
            s.lastOfferAt = clock
            let now = Self.record(now, basis: basis, in: &s)
            if let since = s.writingSince, clock - since >= Self.slowWriteNanoseconds, !s.slowReported {
                s.slowReported = true
                slow = true
            }
            guard running != nil, s.written != now else { return nil }
            // Music that only played on — since the write, and since the last offer (a seek back
            // that stays ahead of the place written did not) — waits for the interval, as does
            // a change of the Snapcast speakers set (`SavedState.waits`).
            var waits = false
            if let last = s.lastWriteAt,
                clock - last < Self.positionWriteNanoseconds(songs: now.queue?.songs.count ?? 0)
            {
                waits =
                    now.waits(after: s.written, within: Double(clock - last) / 1e9 + 2)
                    && (now == before.state
                        || now.waits(after: before.state, within: Double(clock - (before.at ?? last)) / 1e9 + 2))
            }
            if !waits {
                s.asked += 1
                ring = true
            }
            return .some(now.queue)
        }
        if slow {
            let after = Self.slowWriteNanoseconds / 1_000_000_000
            let why = "\(store.path ?? "state"): a write has not finished after \(after) s (the disk does not answer)"
            logger.error("state: \(why); volumes and the queue are kept in memory and saved once it answers")
            events.publish(type: .stateError, reason: why)
        }
        if ring { running?.bell.post() }
        return due
    }

    /// Writes asked of the writer thread so far (by `offer` and `saveLast`).
    package var writesAsked: Int { state.withLock { $0.asked } }

    /// True while the last write failed (it is tried again at the next save).
    package var isFailing: Bool { state.withLock { $0.failing } }

    /// Records `now` as the last state to keep (the stop's, before the fade-out: nothing computed
    /// after it is saved) and has it written, waiting at most `nanoseconds` for the disk: the
    /// fade-out and the stop go on without it (within systemd's 5 s), the file keeping the last
    /// state it took. Without a writer running (a daemon never started), writes it itself, without
    /// that bound. Returns the queue to be written.
    package func saveLast(
        _ now: SavedState, basis: Int? = nil, within nanoseconds: Int = 2_000_000_000
    ) -> SavedQueue?? {
        let running = runningWriter
        let ticket: (number: Int, queue: SavedQueue?)? = state.withLock { s in
            guard !s.fadedOut else { return nil }
            let now = Self.record(now, basis: basis, in: &s)
            s.fadedOut = true
            guard s.written != now || s.writingSince != nil else { return nil }
            s.asked += 1
            s.lastAwaited = running != nil
            return (s.asked, now.queue)
        }
        guard let ticket else { return nil }
        defer { state.withLock { $0.lastAwaited = false } }
        guard let running else { return saving.withLock { _ in write(recording: nil, basis: nil) } }
        running.bell.post()
        let deadline = monotonicNanoseconds() + nanoseconds
        while state.withLock({ $0.served < ticket.number }) {
            let left = deadline - monotonicNanoseconds()
            if left <= 0 || !running.wrote.wait(nanoseconds: left) {
                logger.error(
                    "state: not saved at the stop: the disk did not answer within \(nanoseconds / 1_000_000) ms; \(store.path ?? "the file") keeps the last state it took"
                )
                return .some(ticket.queue)
            }
        }
        if state.withLock({ $0.failing }) {
            logger.error(
                "state: not saved at the stop: the write failed; \(store.path ?? "the file") keeps the last state it took"
            )
        }
        return .some(ticket.queue)
    }

    /// Records `now` and writes it now if it changed since the last write (blocking while the disk
    /// writes). Returns the queue written.
    package func save(_ now: SavedState, basis: Int? = nil) -> SavedQueue?? {
        // One write at a time: the writer's and a caller's may come together, and two writers of
        // `state.json.tmp` could leave it half of each.
        saving.withLock { _ in write(recording: now, basis: basis) }
    }

    /// How many times a source kept its queue (`keep(queue:)`): read with the queue a state is
    /// computed from, under the control plane's lock, and given back with it (`basis`).
    package var keptCount: Int { state.withLock { $0.kept } }

    /// True while a write of the state is in progress (it may be waiting on the disk).
    package var isWriting: Bool { state.withLock { $0.writingSince != nil } }

    /// Keeps `now` as the saved state, completed with what only the store knows (the server's
    /// queue, whether to ask it again at the next start). Under `state`'s lock.
    private static func record(_ now: SavedState, basis: Int?, in s: inout Kept) -> SavedState {
        var now = now
        // The announce button's sound is this object's (`choose`): a look computed before a choice
        // made meanwhile must not put the older one back.
        now.sound = s.saved.sound
        // Computed before a source ended and kept its queue: that queue, not the older look's.
        if let basis, basis != s.kept { now.queue = s.saved.queue }
        // Computed from a look before the server's queue came: that queue stays.
        if s.fromServer == .held && now.queue == nil { now.queue = s.saved.queue }
        if now.queue != nil { s.fromServer = .none }
        // No queue yet and the server's not had: the next start asks it again.
        now.askServerQueue = now.queue == nil && [.asking, .failed].contains(s.fromServer) ? true : nil
        s.saved = now
        return now
    }

    /// Writes the saved state (after recording `now`, unless nil) if it differs from the last
    /// written. A write that fails (full disk, read-only state-dir) is retried at the next save; the
    /// first failure of a streak is logged and published (`state-error`), and the recovery is
    /// logged. Returns the queue written. Under `saving`.
    private func write(recording now: SavedState?, basis: Int?) -> SavedQueue?? {
        let target: (state: SavedState, previous: SavedState, held: String?)? = state.withLock { s in
            // The stop recorded the last state before its fade-out: one computed after it (the
            // monitor's, still running) would keep the volumes turned down by the fade.
            if let now, !s.fadedOut { _ = Self.record(now, basis: basis, in: &s) }
            guard s.written != s.saved else { return nil }
            defer {
                s.written = s.saved
                let now = clock()
                s.writingSince = now
                s.lastWriteAt = now
            }
            return (s.saved, s.written, s.held)
        }
        guard let target else { return nil }
        let held = target.held
        let result =
            held.map { Result<Void, StateStore.Failure>.failure(.init(description: $0)) } ?? store.save(target.state)
        let failed = if case .failure = result { true } else { false }
        let (wasFailing, wasSlow) = state.withLock { s in
            defer {
                s.writingSince = nil
                s.slowReported = false
                s.failing = failed
                if failed && s.written == target.state { s.written = target.previous }  // retry next time
            }
            return (s.failing, s.slowReported)
        }
        switch result {
        case .failure(let failure):
            // (Held: said once at the start, with why.)
            if !wasFailing && held == nil {
                logger.error(
                    "state: \(failure); volumes and the queue are kept in memory and saved again once it works")
                events.publish(type: .stateError, reason: failure.description)
            }
        case .success:
            if wasFailing || wasSlow { logger.info("state: saved again to \(store.path ?? "")") }
        }
        return .some(target.state.queue)
    }
}

extension Persistence {
    /// Keeps `queue` as the saved queue (a music source ended: where it was heard, or nil when it
    /// played to its end).
    package func keep(queue: SavedQueue?) {
        state.withLock {
            $0.saved.queue = queue
            $0.fromServer = .none
            $0.kept += 1
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
