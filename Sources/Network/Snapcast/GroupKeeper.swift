import OSThread
import Synchronization

/// Keeps one zone's speakers grouped on its stream: a dedicated thread polls `Server.GetStatus`
/// every `interval` and makes the calls ``SnapcastZone/plan(for:volumesSet:)`` asks for, so
/// speakers that reconnect, or that someone moved in Snapweb, come back to the zone.
///
/// Each answer is also proof that the server runs: `answered` gets the time the call was made (the
/// zone's stream output carries audio on a new connection only after that). Between polls the
/// thread sleeps until the interval is over, a stop, or `look()` — which the zone's output calls
/// when its connection changes (`DeviceOutput.connectionObserver`); then `output` says what the
/// output needs: an answer (a new connection waits for one: poll at once, then every
/// `hurryInterval` until it carries audio), or nothing more than the polls at the interval.
///
/// Never stops the daemon: an unreachable server or a bad answer is reported (once per distinct
/// problem, through `log`) and retried at the next poll. Start and stop from the control thread;
/// `state` may be read from any thread.
public final class GroupKeeper: Sendable {
    /// What the keeper last saw. A plain value.
    public struct State: Sendable, Equatable {
        /// Polls that reached the server and found nothing to fix, or fixed it.
        public var polls = 0
        /// Calls made to fix drift, since start.
        public var fixes = 0
        /// The speakers the server reports connected, in zone order; nil when the last poll read
        /// no status (or none was made yet): who is connected is not known then.
        public var connected: [String]?
        /// The last problem (server unreachable, bad answer, unknown stream), nil when all is well.
        public var problem: String?
        /// The speakers whose configured volume was set since they connected (not again until they
        /// reconnect: a listener's change stands).
        public var volumesSet: Set<String> = []
        /// The connected speakers whose latency the server held lower than configured, with what
        /// it answered (`SnapcastControl.setLatency`): not asked again while it reads so (snapserver
        /// holds a latency within its own buffer, and asking every poll changed nothing).
        public var latenciesHeld: [String: Int] = [:]
    }

    /// Who hears the zone's stream, as the server's answer says.
    public enum Listeners: Sendable, Equatable {
        /// At least one of the zone's speakers is connected, on the zone's stream, and heard (not
        /// muted, above 0 %, in a group not muted: ``ServerStatus/hears(_:stream:)``).
        case heard
        /// None of the zone's speakers is connected.
        case noneConnected
        /// Some are connected, none on the zone's stream.
        case elsewhere
        /// Some are connected on the zone's stream, and every one of them is muted, at 0 %, or in
        /// a muted group (someone muted them in Snapweb or Home Assistant).
        case muted

        /// Who hears `stream` among `speakers` in `status`.
        public init(_ status: ServerStatus, speakers: [String], stream: String) {
            let connected = speakers.filter { status.client($0)?.connected == true }
            if connected.contains(where: { status.hears($0, stream: stream) }) {
                self = .heard
            } else if connected.isEmpty {
                self = .noneConnected
            } else if connected.contains(where: { status.group(of: $0)?.streamID == stream }) {
                self = .muted
            } else {
                self = .elsewhere
            }
        }
    }

    /// What the zone's stream output needs from the keeper now.
    public enum OutputNeed: Sendable {
        /// Nothing but the polls at the interval: it carries audio, or it has no connection (the
        /// server away, a connect under way), and its next one calls `look()`.
        case nothing
        /// A new connection waits for an answer: poll at once, then every `hurryInterval`.
        case answer
    }

    public let zone: SnapcastZone
    public let control: SnapcastControl
    public let interval: Duration
    /// What wakes a keeper: `look()` and `stop()` post it.
    public typealias Bell = Semaphore

    /// How often to poll while a connection waits for an answer (the server may be starting).
    public static let hurryInterval = 100_000_000
    private let log: @Sendable (_ isError: Bool, _ message: String) -> Void
    private let answered: @Sendable (_ callStartedAt: Int) -> Void
    private let listeners: @Sendable (Listeners) -> Void
    private let output: @Sendable () -> OutputNeed
    private let name: String
    /// Set by `askToStop` (and so `stop`): the loop ends, and a call that waits on the server ends
    /// at once (`control` looks at it).
    private let stopFlag = StopFlag()
    private let wake: Bell
    private let thread = Mutex<OSThread?>(nil)
    private let shared = Mutex(State())

    /// - Parameters:
    ///   - name: the zone's name, for messages.
    ///   - log: receives one line per change of what is wrong (`isError`) or each fix made.
    ///   - answered: told, after each call the server answered, when (monotonic ns) it was made.
    ///   - listeners: told, after each status read, who hears the zone's stream (see `Listeners`).
    ///   - output: what the zone's stream output needs now (see `OutputNeed`); asked between polls.
    ///   - wake: what `look()` and `stop()` post; given, so that an output started before the
    ///     keeper can post it (`DeviceOutput.connectionObserver`).
    public init(
        name: String, zone: SnapcastZone, control: SnapcastControl, interval: Duration = .seconds(2),
        answered: @escaping @Sendable (_ callStartedAt: Int) -> Void = { _ in },
        listeners: @escaping @Sendable (Listeners) -> Void = { _ in },
        output: @escaping @Sendable () -> OutputNeed = { .nothing }, wake: Bell = Bell(),
        volumesSet: Set<String> = [],
        log: @escaping @Sendable (_ isError: Bool, _ message: String) -> Void
    ) {
        self.wake = wake
        shared.withLock { $0.volumesSet = volumesSet }
        self.name = name
        self.zone = zone
        self.control = control.stopping(at: stopFlag)
        self.interval = interval
        self.answered = answered
        self.listeners = listeners
        self.output = output
        self.log = log
    }

    /// What the keeper last saw. Any thread.
    public var state: State { shared.withLock { $0 } }

    /// Starts polling (the first poll at once). Control thread.
    public func start() {
        let t = OSThread.start(name: "snapcast") { [self] in run() }
        thread.withLock { $0 = t }
    }

    /// Wakes the keeper to look at the output now (its connection changed). Any thread, the
    /// output thread too: a semaphore post.
    public func look() { wake.post() }

    /// Stops polling and waits for the thread (a call that waits on the server ends at libcurl's
    /// next progress call: within a second). Control thread.
    public func stop() {
        askToStop()
        if let t = thread.withLock({ t in
            defer { t = nil }
            return t
        }) {
            t.join()
        }
    }

    /// Tells the thread to stop, without waiting for it (`stop` waits): several keepers stop
    /// together, not one after another. Any thread.
    public func askToStop() {
        stopFlag.set()
        wake.post()
    }

    /// One poll: read the status and fix what differs. Returns the problem, if any. Keeper thread
    /// (or a test).
    @discardableResult
    public func pollOnce(volumesSet: inout Set<String>) -> String? {
        let started = monotonicNanoseconds()
        var read = false
        // The zone's connected speakers already in a group on its stream, who hears it now, and
        // whether that was told before the fixes (when they cannot change it).
        var onStream: [String] = []
        var now = Listeners.noneConnected
        var told = false
        do {
            let status = try control.status()
            read = true
            // Who listens is told before the answer lets a new connection carry audio, so it never
            // carries it for a moment to no one: before the fixes when they cannot change it; else
            // once they are made (as a speaker moved to the zone's stream, or unmuted by its
            // configured volume, hears it). A speaker elsewhere counted at once, and, the fix
            // failing, was taken back after it: the zone read available for that moment at each
            // poll — long enough for a hold to end.
            let ids = zone.speakers.map(\.id)
            let connected = ids.filter { status.client($0)?.connected == true }
            onStream = connected.filter { status.group(of: $0)?.streamID == zone.stream }
            now = Listeners(status, speakers: ids, stream: zone.stream)
            shared.withLock { $0.connected = connected }
            // A speaker that left must get its volume again when it is back, and its latency is
            // asked again once (the server may have another buffer by then).
            volumesSet = volumesSet.filter { status.client($0)?.connected == true }
            var held = shared.withLock { $0.latenciesHeld }.filter { status.client($0.key)?.connected == true }
            let plan = zone.plan(for: status, volumesSet: volumesSet, latenciesHeld: held)
            let then = Listeners(
                plan.actions.reduce(status) { $0.applying($1) }, speakers: ids, stream: zone.stream)
            if now == then {
                told = true
                listeners(now)
                answered(started)
            }
            var fixed = 0
            var heldNow: [String] = []
            defer { shared.withLock { $0.latenciesHeld = held } }
            for action in plan.actions where !stopFlag.isSet {
                switch action {
                case .setClients(let group, let clients): try control.setClients(group: group, clients: clients)
                case .setStream(let group, let stream): try control.setStream(group: group, stream: stream)
                case .setVolume(let client, let percent):
                    try control.setVolume(client: client, percent: percent)
                    volumesSet.insert(client)
                case .setLatency(let client, let ms):
                    let took = try control.setLatency(client: client, milliseconds: ms)
                    held[client] = took < ms ? took : nil
                    if took < ms { heldNow.append(SnapcastZone.latencyHeld(client, asked: ms, held: took)) }
                }
                fixed += 1
                log(false, "zone \(name): snapcast: \(action)")
            }
            if !told {
                // The fixes made, who hears the zone is who they gave it (a stream the server lacks
                // moves none: they listen to another).
                told = true
                listeners(then)
                answered(started)
            }
            let problems = status.problems(of: ids, stream: zone.stream) + plan.problems + heldNow
            let problem = problems.isEmpty ? nil : problems.joined(separator: "; ")
            shared.withLock { s in
                s.polls += 1
                s.fixes += fixed
            }
            return problem
        } catch {
            // Without a good status, who is connected is not known (the last good list stayed,
            // for as long as the server answered badly; then none was shown, as if the speakers
            // were away while the server was). A fix that failed after one: who
            // heard the zone before the fixes still does (one left in another group, on another
            // stream, counted as a listener for as long as the fix failed), and only the speakers
            // already on the zone's stream are shown.
            shared.withLock { s in
                s.connected = read ? onStream : nil
                // Unread, the server may be another (restarted with a larger buffer).
                if !read { s.latenciesHeld = [:] }
            }
            if read && !told { listeners(now) }
            // Any HTTP answer shows the server runs and reads (what the output waits for after a
            // connect): the status read, whatever a fix after it met (only the fix's error was
            // looked at: a fix that got no answer kept a new connection waiting, the zone
            // unavailable "waiting for its JSON-RPC to answer", while it answered).
            if (read || error.serverAnswered) && !told { answered(started) }
            return error.description
        }
    }

    /// `problem` without the time libcurl waited ("after 3001 milliseconds", "after 2001 ms"):
    /// what tells one problem from another (another speaker, another status, is another problem).
    static func shape(_ problem: String) -> String {
        problem.replacing(
            #/after \d+ (milliseconds|ms)( with \d+( out of -?\d+)? bytes received)?/#, with: "after … ms")
    }

    private func run() {
        var volumesSet = shared.withLock { $0.volumesSet }
        var reported: String?
        while !stopFlag.isSet {
            let started = monotonicNanoseconds()
            let problem = pollOnce(volumesSet: &volumesSet)
            if stopFlag.isSet { break }  // a call the stop ended is no problem to tell
            shared.withLock { s in
                s.problem = problem
                s.volumesSet = volumesSet
            }
            // Told once per problem: libcurl's text carries the time it waited ("after 3001 ms"),
            // which made each poll of a hung server a new problem, a warning every 2 s (and up to
            // ten a second while a connection waits for an answer).
            if problem.map(Self.shape) != reported.map(Self.shape) {
                if let problem {
                    log(true, "zone \(name): snapcast: \(problem)")
                } else if reported != nil {
                    log(false, "zone \(name): snapcast: speakers grouped on stream \"\(zone.stream)\" again")
                }
                reported = problem
            }
            let end = monotonicNanoseconds() + interval.wholeNanoseconds
            // Asked to look (`look()`, or a post left from the poll just made): an answer is
            // needed at once; else every `hurryInterval` while one is awaited.
            var asked = false
            while !stopFlag.isSet {
                let now = monotonicNanoseconds()
                if now >= end { break }
                let answer = output() == .answer
                if answer && (asked || now >= started + Self.hurryInterval) { break }
                asked = wake.wait(nanoseconds: answer ? min(end, started + Self.hurryInterval) - now : end - now)
            }
        }
    }
}
