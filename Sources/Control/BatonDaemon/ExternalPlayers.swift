import Arbiter
import BatonConfig
import ControlParts
import OSThread
import Players

/// External players: ALSA programs writing to a `baton_<name>` PCM. A program that starts writing
/// asks for its zones as that source through `admit`, like every source; an interruption holds it,
/// drops its audio or pauses the player through its control, as `when-interrupted:` says.
struct ExternalPlayers {
    let daemon: Daemon

    /// Starts the socket server when external sources are configured. A socket that cannot be set
    /// up is logged and published (`external-error`); the daemon runs on without them. Control thread.
    func listen() {
        guard let external = daemon.config.externalSources, !external.sources.isEmpty else { return }
        let server = ExternalSourceServer(
            path: external.socketPath, logger: daemon.logger,
            lookup: { [weak d = daemon] name in
                guard let d else { return ExternalPlayers.stopping }
                return ExternalPlayers(daemon: d).lookup(name)
            },
            onFrames: { [weak d = daemon] stream in d.map { ExternalPlayers(daemon: $0).frames(stream) } })
        do {
            try server.start()
            daemon.parts.external.started(server)
        } catch {
            daemon.parts.external.failed(error.description)
            daemon.logger.error("external sources: \(error); ALSA programs cannot play through Baton")
            daemon.events.publish(type: .externalError, reason: error.description)
        }
    }

    /// The refusal of a program that opens its PCM once batond's stop has begun. "try again later"
    /// is what the plugin maps to -EBUSY (a player retries, and finds the batond that follows);
    /// said "batond is stopping" alone it was -ENOENT, no such source, and the player gave up.
    static let stopping = "batond is stopping; try again later"

    /// Nil when `name` is a configured external source, else why not (`stopping` once batond's stop
    /// has begun: the program would be refused at its first frames anyway). Any thread.
    func lookup(_ name: String) -> String? {
        if daemon.state.withLock({ $0.stopping }) { return Self.stopping }
        guard let external = daemon.config.externalSources else { return "no external sources are configured" }
        guard external.source(name) != nil else {
            let names = external.sources.map(\.name).joined(separator: ", ")
            return "unknown source \"\(name)\" (batond's external sources: \(names))"
        }
        return nil
    }

    /// A program's first frames (again): it joins the source of its name if that one still plays,
    /// else asks for the zones as a new source. Stream thread.
    func frames(_ stream: ExternalStream) {
        let name = stream.name
        // The source's settings and the configuration they belong to (a reload swaps it under the lock).
        let (found, generation) = daemon.state.withLock { s in
            (daemon.config.externalSources?.source(name), s.configGeneration)
        }
        guard let source = found else {
            stream.refuse("unknown source \"\(name)\" (it was removed from batond's config)", warning: true)
            return
        }
        let what = "\(stream.peer) writes \(stream.formatDescription) to baton_\(name)"
        let joined = daemon.state.withLock { s -> String? in
            for p in s.playbacks.values {
                guard let x = p.source as? ExternalPlayer, x.name == name, x.acceptsStreams else { continue }
                x.enqueue(stream)
                return p.id.rawValue
            }
            return nil
        }
        let events = daemon.events
        if let joined {
            events.publish(type: .external, source: joined, reason: "\(what) (continues \(joined))")
            return
        }
        let settings = ExternalPlayer.Settings(
            name: name,
            whenInterrupted: ExternalPlayer.WhenInterrupted(source.whenInterrupted),
            idleReleaseNanoseconds: source.idleRelease.wholeNanoseconds,
            control: control(source, pid: stream.peer.pid), wake: wakeMonitor)
        do {
            _ = try daemon.admit(
                SourceClass(source.sourceClass), zones: source.zones, volume: 1, configuration: generation,
                before: { id in events.publish(type: .external, source: id.rawValue, reason: what) }
            ) { _ throws(ControlError) in ExternalPlayer(settings: settings, stream: stream) }
        } catch {
            settings.control?.close()
            stream.refuse("batond refused source \(name): \(error.message)", warning: true)
            events.publish(type: .externalError, reason: "\(what): \(error.message)")
        }
    }

    /// Asks for a monitor pass now: a stream ended, the user changed the player. Any thread.
    private var wakeMonitor: @Sendable () -> Void { { [monitor = daemon.monitor] in monitor.wake() } }

    /// `source`'s control; `pid`: the program writing to it, whose MPRIS instance name is preferred.
    private func control(_ source: ExternalSourceConfig, pid: Int) -> (any PlayerControl)? {
        let events = daemon.events
        let logger = daemon.logger
        let name = source.name
        let report: @Sendable (String) -> Void = { why in
            logger.warning("external \(name): \(why)")
            events.publish(type: .controlError, reason: "external source \(name): \(why)")
        }
        switch source.control {
        case nil: return nil
        case .mpd(let host, let port):
            return MPDControl(host: host, port: port, report: report, userChanged: wakeMonitor)
        case .command(let pause, let resume): return CommandControl(pause: pause, resume: resume, report: report)
        case .mpris(let bus, let system):
            return MPRISControl(busName: bus, systemBus: system, pid: pid, report: report, userChanged: wakeMonitor)
        }
    }

    /// Says (a warning and an `external` event) that `p`'s player, paused by Baton for an
    /// interruption that still lasts, stays paused: `p` ends `why` before the interruption does,
    /// and nothing will tell it to play. Under the lock, before `p` ends.
    func sayLeftPaused(_ p: Playback, why: String) {
        guard let x = p.source as? ExternalPlayer, x.leftPausedByBaton else { return }
        let text =
            "\(x.peer) on baton_\(x.name) stays paused: Baton paused it for an interruption, and \(why) before it ended"
        daemon.logger.warning("external \(x.name): \(text)")
        daemon.events.publish(type: .external, source: p.id.rawValue, reason: text)
    }

    /// Monitor upkeep for external players, under the lock: a change the user made through the
    /// player's own controls is a user command to the arbiter; a program that left before its
    /// source was granted releases it.
    func tick(_ s: inout Daemon.State) {
        var changes: [(SourceID, PlayerChange, UserCommand, String)] = []
        var abandoned: [SourceID] = []
        for p in s.playbacks.values {
            guard let x = p.source as? ExternalPlayer else { continue }
            switch x.takeUserChange() {
            case .paused?: changes.append((p.id, .paused, .pause, "the user gave the player pause"))
            case .played?: changes.append((p.id, .played, .play, "the user gave the player play"))
            case .stopped?:
                changes.append((p.id, .stopped, .stop, "the player stopped (its own controls or the end of its queue)"))
            case .gone?: changes.append((p.id, .gone, .stop, "the player left (quit or crashed)"))
            case nil: break
            }
            if !p.started && x.isAbandoned { abandoned.append(p.id) }
        }
        for (id, change, command, why) in changes {
            daemon.events.publish(type: .external, source: id.rawValue, reason: why)
            let player = s.playbacks[id]?.source as? ExternalPlayer
            player?.applyingPlayerChange(change)
            daemon.apply(s.arbiter.user(command, on: id, at: .now), &s)
            player?.applyingPlayerChange(nil)
        }
        for id in abandoned { daemon.apply(s.arbiter.release(id, at: .now), &s) }
    }
}
