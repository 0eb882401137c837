import ALSA
import BatonConfig
import BatonDaemon
import ControlParts
import Glibc
import HTTPServer
import OSThread
import Synchronization
import Systemd

/// The daemon process: start the parts in order — the control plane, its triggers (MQTT, GPIO), the
/// HTTP API, systemd — wait for SIGTERM/SIGINT, stop in reverse. SIGHUP reloads.
public enum Service {
    /// How often the watchdog is petted for systemd's `WatchdogSec=` (`interval`): at a quarter of
    /// it, at most a second apart and at least 10 ms (`usleep`'s `UInt32` of µs trapped on a
    /// `WatchdogSec=` over 2.4 hours, at start, and systemd restarted batond into the same trap).
    /// Petted at half the interval, a pet skipped for a monitor slow for a moment left the next one
    /// due just at systemd's deadline.
    static func petMicroseconds(watchdog interval: Duration) -> UInt32 {
        guard interval < .seconds(4) else { return 1_000_000 }
        return UInt32(max(interval.wholeNanoseconds / 4_000, 10_000))
    }

    /// How long the monitor may go without a tick before the watchdog is no longer petted: half the
    /// interval (5 s of `WatchdogSec=10s`), so that a moment's stall (a loaded single-core Pi) is not
    /// a kill, and a wedged daemon still is, within about one and a half intervals; never less than
    /// 2 s, since the monitor, idle, ticks only once a second (half of `WatchdogSec=1s` missed pets
    /// every second).
    static func monitorGrace(watchdog interval: Duration) -> Duration { max(interval / 2, .seconds(2)) }

    /// Runs until SIGTERM or SIGINT; returns the process exit status. Main thread only, before any
    /// other thread exists (it blocks the signals so that every thread inherits the mask).
    public static func run(config: BatonConfiguration, configPath: String?, logger: Logger) -> Int32 {
        var signals = sigset_t()
        sigemptyset(&signals)
        for s in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&signals, s) }
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        signal(SIGPIPE, SIG_IGN)

        // One daemon per configuration, decided before anything (a PCM, a port, a file) is touched.
        let (lock, unwritable) = lockPath(config: config, configPath: configPath)
        if let unwritable {
            let taken = lock.hasPrefix(config.stateDir ?? "\0") ? "is taken read-only there" : "is \(lock) instead"
            logger.warning("state-dir \(unwritable): nothing is saved; the instance lock \(taken)")
        }
        switch FileLock.acquire(lock) {
        case .success: break
        case .failure(.held(let pid)):
            logger.error(
                "another batond (pid \(pid.map(String.init) ?? "unknown")) runs this configuration (lock \(lock)); not starting"
            )
            return 1
        case .failure(.failed(let error)):
            logger.error("cannot take the instance lock: \(error); not starting")
            return 1
        }

        if let dir = config.outputDir {
            setenv("BATON_OUTPUT_DIR", dir, 1)
            if case .failure(let error) = FileIO.makeDirectory(dir) {
                logger.error("output-dir \(error)")
                return 1
            }
            logger.info("file PCMs write into \(dir)")
        }
        if let alsa = config.alsaConfig {
            guard access(alsa, R_OK) == 0 else {
                logger.error("alsa-config \(alsa): cannot read: \(String(cString: strerror(errno)))")
                return 1
            }
            ALSAConfiguration.use(file: alsa)
        }
        PCM.silenceLibraryErrors()
        // Read now, not in the first output thread to open its PCM: so that what reading it runs and
        // loads (a PulseAudio hook's libraries) is given back below with the rest of the start. At
        // most 2 s: a hook may wait on a server (PulseAudio's), and the API must come up all the same;
        // the outputs then wait for it as before.
        let alsaRead = Semaphore()
        OSThread.detach(name: "alsa-config") {
            ALSAConfiguration.load()
            alsaRead.post()
        }
        if !alsaRead.wait(nanoseconds: 2_000_000_000) {
            logger.warning(
                "ALSA's configuration takes more than 2 s to read (a hook waiting on a server?): starting on")
        }
        // MCL_ONFAULT: lock pages as they are touched instead of faulting in every mapping whole
        // (each thread's 8 MiB stack would otherwise become resident: ~100 MiB RSS measured).
        let locked = mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) == 0
        if !locked {
            logger.warning(
                "cannot lock memory (mlockall: \(String(cString: strerror(errno)))): audio may glitch under memory pressure"
            )
        }
        // What reading the configuration ran, before the daemon starts.
        giveBackCode(locked: locked, logger)

        var token: String?
        if let file = config.api.tokenFile {
            guard let text = FileIO.firstLine(file) else {
                logger.error("api.token-file \(file): cannot read: \(String(cString: strerror(errno)))")
                return 1
            }
            guard !text.isEmpty else {
                logger.error("api.token-file \(file) is empty")
                return 1
            }
            token = text
        }
        // The API's address before anything is set going: one that cannot be had stopped batond
        // only after the zones had opened their cards, MQTT had said "online" and the state had
        // been read — every 2 s, for as long as systemd started it again.
        var limits = HTTPServer.Limits()
        limits.maxConnectionsPerClient = config.api.connectionsPerClient
        let listener: HTTPListener
        do {
            listener = try HTTPListener(host: config.api.listen.host, port: Int(config.api.listen.port), limits: limits)
        } catch {
            let status = apiExitStatus(error)
            logger.error(
                "control API: \(error); "
                    + (status == 1
                        ? "exiting with status 1 (not started again: api.listen must change, or batond be given the right to it)"
                        : "exiting with status 3 (to be started again)"))
            return status
        }
        let systemd = SystemdNotifier()
        let daemon = Daemon(config: config, configPath: configPath, logger: logger)
        // systemd's status line again after each reload (SIGHUP, the API, MQTT): `systemctl status`
        // said the zones of the start. From before the API and MQTT serve, whose reloads in the
        // first seconds went unseen.
        if systemd.isUnderSystemd {
            daemon.events.subscribe(StatusLineKeeper(systemd: systemd, config: config, logger: logger), after: nil)
        }
        daemon.start()
        let triggers = Triggers(daemon: daemon, logger: logger)
        triggers.start()
        let api = API(daemon: daemon, token: token, triggers: triggers)
        let server: HTTPServer
        do {
            server = try HTTPServer(
                serving: listener, maxBodyBytes: config.api.maxBody, limits: limits, admit: { api.admit($0) }
            ) { api.handle($0) }
        } catch {
            // libmicrohttpd out of threads or memory: may pass at the next start.
            logger.error("control API: \(error); exiting with status 3 (to be started again)")
            triggers.stop()
            daemon.stop()
            return 3
        }
        logger.info(
            "control API on http://\(config.api.listen.host):\(server.port)/ (web app), /api/v1/...\(token == nil ? "" : " (bearer token required)")"
        )
        // What starting ran (OpenSSL's set-up, the outputs' opening on threads of their own), once
        // every zone has opened its output or failed to: what is still used comes back at its next use.
        giveBackCode(locked: locked, logger, once: ZonesOpened(daemon), within: .seconds(5), unless: daemon)
        notify(systemd, logger) { try systemd.ready() }
        notify(systemd, logger) { try systemd.status(statusLine(zones: daemon.zoneNames.count, config)) }
        if let interval = systemd.watchdogInterval {
            // Pet the watchdog only while the monitor thread is alive: a wedged daemon gets restarted.
            let pet = petMicroseconds(watchdog: interval)
            let grace = monitorGrace(watchdog: interval)
            OSThread.detach(name: "watchdog") {
                while true {
                    usleep(pet)
                    if daemon.monitorTicked(within: grace) { _ = try? systemd.watchdog() }
                }
            }
        }

        while true {
            var received: Int32 = 0
            sigwait(&signals, &received)
            if received == SIGHUP {
                logger.info("SIGHUP: reloading \(configPath ?? "the configuration")")
                notify(systemd, logger) { try systemd.reloading() }
                _ = daemon.reload()
                notify(systemd, logger) { try systemd.ready() }
                continue
            }
            logger.info("signal \(received): stopping")
            break
        }
        notify(systemd, logger) { try systemd.stopping() }
        // A request waiting on the music server (up to 30 s) would hold the API's stop, which waits
        // for it, past systemd's 5 s: it ends now, with an error.
        daemon.stopNetwork()
        api.sessions.endDelays()
        server.stop()
        triggers.stop()
        daemon.fadeOut()
        daemon.stop()
        logger.info("stopped")
        return 0
    }

    /// The exit status for an API address that cannot be had: 3 (systemd starts batond again) when it
    /// may come (an address DHCP has not given yet, a port another program frees), 1 (not started
    /// again: the configuration or the unit must change) when it cannot: a port below 1024 without
    /// CAP_NET_BIND_SERVICE (EACCES), or what the kernel refuses outright.
    static func apiExitStatus(_ error: HTTPServerError) -> Int32 {
        switch error.kind {
        case .invalidAddress: return 1
        case .cannotListen: return [EACCES, EPERM, EINVAL, EAFNOSUPPORT].contains(error.errno) ? 1 : 3
        case .cannotStart: return 3
        }
    }

    /// The file whose `flock` makes a configuration's daemon the only one: `batond.lock` in the
    /// `state-dir` (a state directory belongs to one daemon; created here if missing). Without a
    /// state-dir, or when it cannot be created or written (`why`): `batond-HASH.lock`, HASH naming
    /// the configuration file's absolute path, in `$RUNTIME_DIRECTORY` (systemd's
    /// `RuntimeDirectory=`), else in `/run/baton` when writable, else in `/tmp` — unless the lock file
    /// is there already, which is then taken read-only. A state-dir that exists on a file system
    /// remounted read-only (an SD card after an ext4 error) was taken for the lock, whose open then
    /// failed: batond exited 1 and systemd never started it again, while the state is meant only to
    /// stop being saved.
    static func lockPath(config: BatonConfiguration, configPath: String?) -> (path: String, why: String?) {
        var why: String?
        if let dir = config.stateDir {
            switch FileIO.makeDirectory(dir) {
            case .success:
                // Or, not writable, with the lock file there already (a file system remounted
                // read-only; another user's batond, the service's): `FileLock` takes it opened for
                // reading, so that a second batond is still refused.
                if access(dir, W_OK) == 0 { return (dir + "/batond.lock", nil) }
                why = "\(dir) cannot be written: \(String(cString: strerror(errno)))"
                if access(dir + "/batond.lock", R_OK) == 0 { return (dir + "/batond.lock", why) }
            case .failure(let error): why = error.description
            }
        }
        var absolute = configPath ?? "(built-in configuration)"
        if let configPath, let resolved = realpath(configPath, nil) {
            absolute = String(cString: resolved)
            free(resolved)
        }
        let name = "batond-" + absolute.fnv1aHex + ".lock"
        if let runtime = getenv("RUNTIME_DIRECTORY").map({ String(cString: $0) }),
            let first = runtime.split(separator: ":").first, access(String(first), W_OK) == 0
        {
            return ("\(first)/\(name)", why)
        }
        if access("/run/baton", W_OK) == 0 { return ("/run/baton/" + name, why) }
        return ("/tmp/" + name, why)
    }

    /// Gives back the pages of code and read-only data the process ran once and no longer runs
    /// (`LoadedCode`): after the start, `mlockall` would keep them resident for good. `locked`: the
    /// process is locked, and stays so. Not while music plays: a page an output thread still needs
    /// then comes back through a page fault in it.
    private static func giveBackCode(locked: Bool, _ logger: Logger, saying when: String? = nil) {
        let before = when == nil ? nil : ProcessStatus.kib()["VmRSS"]
        if let failure = LoadedCode.pin().release(relock: locked) {
            logger.warning("cannot give back the start's pages of code (\(failure)): batond's memory stays larger")
        } else if let when, let before, let after = ProcessStatus.kib()["VmRSS"] {
            logger.info(
                "gave back the pages of code the start ran, \(when): resident \(before / 1024) → \(after / 1024) MiB")
        }
    }

    /// The same on a thread of its own, once `opened` says every zone's first open is done, or
    /// after `limit` (a Snapcast zone waits for its server) — unless something plays by then (a
    /// request in the first seconds): its output threads would take the faults.
    private static func giveBackCode(
        locked: Bool, _ logger: Logger, once opened: ZonesOpened, within limit: Duration, unless daemon: Daemon
    ) {
        OSThread.detach(name: "give-back") {
            let allOpened = opened.done.wait(nanoseconds: limit.wholeNanoseconds)
            opened.stop()
            guard daemon.status().sources.isEmpty else {
                logger.debug("the start's pages of code are kept: something plays already")
                return
            }
            giveBackCode(
                locked: locked, logger,
                saying: allOpened ? "once every zone opened" : "after \(limit) without every zone opened")
        }
    }

    /// systemd's one-line status (`systemctl status`): the zones and the API's address.
    static func statusLine(zones: Int, _ config: BatonConfiguration) -> String {
        "\(zones) zones; API on \(config.api.listen)"
    }

    /// Sends systemd the status line again at each `reloaded` event, with the zones it names (the
    /// API's address needs a restart). On the thread that publishes it: one datagram, not blocking.
    private final class StatusLineKeeper: EventSubscriber {
        let systemd: SystemdNotifier
        let config: BatonConfiguration
        let logger: Logger
        init(systemd: SystemdNotifier, config: BatonConfiguration, logger: Logger) {
            self.systemd = systemd
            self.config = config
            self.logger = logger
        }
        func deliver(_ event: Event) -> Bool {
            if event.type == EventType.reloaded.rawValue, let zones = event.zones {
                notify(systemd, logger) { try systemd.status(statusLine(zones: zones.count, config)) }
            }
            return true
        }
    }

    private static func notify(_ systemd: SystemdNotifier, _ logger: Logger, _ body: () throws -> Bool) {
        do { _ = try body() } catch { logger.warning("systemd: \(error)") }
    }
}

/// Posts `done` when every zone has said that its output opened or could not (`zone-available`,
/// `zone-unavailable`), counting the events published before it subscribed.
final class ZonesOpened: EventSubscriber {
    let done = Semaphore()
    private let waiting: Mutex<Set<String>>
    private let events: EventLog
    private let id = Atomic<Int>(0)

    init(_ daemon: Daemon) {
        waiting = Mutex(Set(daemon.zoneNames))
        events = daemon.events
        id.store(events.subscribe(self, after: 0), ordering: .releasing)
    }

    func deliver(_ event: Event) -> Bool {
        guard event.type == EventType.zoneAvailable.rawValue || event.type == EventType.zoneUnavailable.rawValue
        else { return true }
        let all = waiting.withLock { w in
            guard !w.isEmpty else { return false }
            w.subtract(event.zones ?? [])
            return w.isEmpty
        }
        if all { done.post() }
        return true
    }

    func stop() { events.unsubscribe(id.load(ordering: .acquiring)) }
}
