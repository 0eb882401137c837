import Arbiter
import BatonConfig
import ControlParts
import Players

/// Admitting a source: every request — a sound, speech, a URL, server music, a call, an external
/// player — becomes a `Playback` that goes through the arbiter by one path, `admit`; the fronts that
/// make the sources (`Announcer`, `MusicControl`, `Calls`, `ExternalPlayers`) all call it.
extension Daemon {
    /// The one admit path: resolves `requested` zones (empty: every zone) to those that can play,
    /// makes the source for them (before the lock: decoding, rendering), gives it an id, and asks
    /// the arbiter. Announcements coalesce by `coalesceKey`. A request made from the configuration
    /// of `configuration` (a `State.configGeneration`) is refused if a reload came since. `ttl`: how
    /// long it may wait in the arbiter's queue (nil: its class's). `paused`: asked with the user's
    /// pause on it, in the same step (queued, it is granted paused; granted, its slots are claimed
    /// paused). `replacing`: a source that ends in the same arbiter step (`sourceVanished(_:replacedBy:)`):
    /// what it silenced and the new one does too is not resumed between; refused if it ended
    /// meanwhile. Any thread.
    func admit(
        _ sourceClass: SourceClass, zones requested: [String], volume: Float, coalesceKey: String? = nil,
        configuration: Int? = nil, ttl: Duration? = nil, paused: Bool = false, replacing: SourceID? = nil,
        before announce: ((SourceID) -> Void)? = nil,
        make: ([ZoneHandle]) throws(ControlError) -> any Source
    ) throws(ControlError) -> Admission {
        guard volume.isFinite, (0...1).contains(volume) else {
            throw ControlError(.badRequest, "volume must be between 0 and 1")
        }
        let table = self.zones
        let (available, skipped) = try table.available(requested.isEmpty ? table.names : try expandZones(requested))
        let source = try make(available.compactMap(table.zone))
        return try state.withLock { (s: inout State) throws(ControlError) in
            // A reload since `table` was read may have removed a zone or changed its rate or channels,
            // which the source was made for (slots are claimed in the current table, by name).
            let current = self.zones
            let changed = available.filter { name in
                guard let was = table.zone(name), let now = current.zone(name) else { return true }
                return was.rate != now.rate || was.channels != now.channels
            }
            // batond is stopping (its last state saved, the zones fading out): nothing starts now.
            // A button's press still rendering its speech then played after the fade-out, a
            // source the last save never saw.
            if s.stopping {
                _ = source.stop()
                throw ControlError(.unavailable, "batond is stopping")
            }
            if let configuration, configuration != s.configGeneration {
                _ = source.stop()
                throw ControlError(.unavailable, "batond's configuration was reloaded meanwhile; ask again")
            }
            guard changed.isEmpty else {
                _ = source.stop()
                throw ControlError(
                    .unavailable,
                    "zone \(changed.joined(separator: ", ")) was changed by a reload while the request was admitted; ask again"
                )
            }
            if let replacing, s.playbacks[replacing] == nil || s.arbiter.state(of: replacing) == nil {
                _ = source.stop()
                throw ControlError(.conflict, "\(replacing) ended meanwhile")
            }
            let id = SourceID("\(Self.prefix(sourceClass))-\(s.nextID)")
            s.nextID += 1
            s.playbacks[id] = Playback(
                id: id, sourceClass: sourceClass, source: source, volume: volume, zones: available,
                skipped: skipped)
            announce?(id)
            let request = Request(
                source: id, sourceClass: sourceClass, zones: available.map { ZoneID($0) },
                coalesceKey: sourceClass == .announcement ? coalesceKey : nil, ttl: ttl)
            var effects =
                replacing.map { s.arbiter.sourceVanished($0, replacedBy: request, at: .now) }
                ?? s.arbiter.handle(.request(request), at: .now)
            if paused { effects += s.arbiter.user(.pause, on: id, at: .now) }
            apply(effects, &s)
            return Admission(id: id.rawValue, outcome: try outcome(of: id, in: effects), skipped: skipped)
        }
    }

    /// Source ids read as what they are: `announce-3`, `music-4`, `call-5`.
    private static func prefix(_ sourceClass: SourceClass) -> String {
        switch sourceClass {
        case .announcement: "announce"
        case .call: "call"
        default: "music"
        }
    }

    /// What the arbiter's answer to a request means for its source: playing, queued (also when the
    /// effects say nothing of it), coalesced, or a conflict naming the rule that rejected it. The
    /// last word on it in the effects decides: a request whose `ttl` is 0 ("now or never") that
    /// cannot play now is queued and expired in one step, and was answered "queued" though it was
    /// already gone.
    private func outcome(of id: SourceID, in effects: [Effect<Instant>]) throws(ControlError) -> Outcome {
        var outcome = Outcome.queued
        var waited: Reason?
        for e in effects where e.action.source == id {
            switch e.action {
            case .granted: outcome = .playing
            case .queued:
                outcome = .queued
                waited = e.reason
            case .coalesced(_, let into): return .coalesced(into: into.rawValue)
            case .rejected: throw ControlError(.conflict, "rejected: \(e.reason)")
            case .expired:
                guard case .ttlElapsed(let ttl) = e.reason else {
                    throw ControlError(.conflict, "expired: \(e.reason)")
                }
                throw ControlError(
                    .conflict,
                    "expired: it cannot play now (\(waited.map { "\($0)" } ?? "its zones are taken")) and its ttl \(ConfigSyntax.format(ttl)) lets it wait no time"
                )
            default: continue
            }
        }
        return outcome
    }

    /// Expands zone and group names (and `all`) to zone names in config order. Any thread.
    func expandZones(_ names: [String]) throws(ControlError) -> [String] {
        do { return try config.expand(names) } catch { throw ControlError(.unknownZone, error.description) }
    }

    /// A user command on a source: `pause`, `play` (resume), `stop`. An announcement cannot be
    /// paused: it ends by itself when played, and paused it did not end — it held its zones, silent,
    /// the music it interrupted kept waiting past its resume-within. (A call can: a call on hold is
    /// the user's, and it still ends when its packets stop.) Any thread.
    public func command(_ command: UserCommand, source: String) throws(ControlError) {
        try state.withLock { (s: inout State) throws(ControlError) in
            let id = SourceID(source)
            guard let p = s.playbacks[id], s.arbiter.state(of: id) != nil else {
                throw ControlError(.notFound, "no source \"\(source)\"")
            }
            if command == .pause && p.sourceClass == .announcement {
                throw ControlError(
                    .conflict, "\(source) is an announcement: announcements cannot be paused; stop them")
            }
            if command == .stop { (p.source as? ExternalPlayer)?.endsForGood() }
            apply(s.arbiter.user(command, on: id, at: .now), &s)
        }
    }

    /// The newest source of `class` still known (for "pause the music" without an id). Any thread.
    public func latestSource(of sourceClass: SourceClass) -> String? {
        state.withLock { s in
            s.playbacks.values.filter { $0.sourceClass == sourceClass && s.arbiter.state(of: $0.id) != nil }
                .max { $0.id < $1.id }?
                .id.rawValue
        }
    }
}
