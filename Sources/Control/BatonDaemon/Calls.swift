import Arbiter
import BatonConfig
import ControlParts
import Players

/// Intercom calls (class `call`): a call starts on the first valid RTP packets (or by `call/start`)
/// and goes through the arbiter like any source — by the default policy it interrupts music and
/// announcements queue behind it. It ends on `silence-timeout` without packets or on `call/end`.
/// Any thread.
public struct Calls: Sendable {
    let daemon: Daemon

    /// Binds the receiver when `intercom:` is configured; its calls start and end here. Control thread.
    func listen() {
        guard let config = daemon.config.intercom else { return }
        // What the slowest-waking of the call's zones takes from its slot at once (10 ms at the
        // default period and buffer): the jitter buffer keeps that much more (IntercomLine).
        let zones = (try? daemon.expandZones(config.zones)) ?? []
        let burst = zones.compactMap { daemon.output($0)?.device.burstNanoseconds }.max() ?? 0
        daemon.parts.intercom.start(config, burst: burst, logger: daemon.logger, events: daemon.events) {
            [weak d = daemon] event in
            guard let calls = d?.calls else { return }
            switch event {
            case .callStarted:
                do throws(ControlError) {
                    try calls.start(reason: "RTP packets on port \(config.listen.port)")
                } catch {
                    // Said, and the receiver's call ended: it would say a call is on, and no new
                    // call could start while the stream goes on.
                    calls.daemon.logger.warning("intercom: a call could not start: \(error.message)")
                    calls.daemon.events.publish(
                        type: .intercomError, reason: "a call could not start: \(error.message)")
                    calls.daemon.parts.intercom.receiver?.endCall()
                }
            case .callEnded(.silenceTimeout):
                calls.endAfterSilence(reason: "no packets for \(ConfigSyntax.format(config.silenceTimeout))")
            case .callEnded(.explicit): break  // the call's source ended, and hung up the receiver
            }
        }
    }

    /// Starts the call source on `intercom.rtp.zones` (silence until packets arrive), unless one
    /// exists.
    @discardableResult
    public func start(reason: String) throws(ControlError) -> Admission {
        try start(reason: reason, replacing: nil)
    }

    /// `start`; `replacing`: the call a reload ends, which this one takes the place of in one
    /// arbiter step (`Daemon.admit`'s `replacing`), and which does not count as a call there is.
    func start(reason: String, replacing: SourceID?) throws(ControlError) -> Admission {
        // The intercom as it runs (a reload's new `intercom:` takes effect at the next start).
        guard let config = daemon.parts.intercom.config, daemon.parts.intercom.receiver != nil else {
            throw ControlError(.conflict, "no intercom is configured or it could not start (intercom: in the config)")
        }
        return try daemon.parts.intercom.starting.withLock { _ throws(ControlError) in
            try admitCall(reason: reason, config: config, replacing: replacing)
        }
    }

    /// `start`, under `IntercomLine.starting`.
    private func admitCall(reason: String, config: IntercomConfig, replacing: SourceID?) throws(ControlError)
        -> Admission
    {
        guard let receiver = daemon.parts.intercom.receiver else {
            throw ControlError(.conflict, "the intercom is stopping")
        }
        // The call there is, as it is: heard, waiting for its zones (a policy may queue calls), or
        // granted and not heard (interrupted by what a policy lets over it, or paused).
        if let existing = daemon.state.withLock({ s in
            s.playbacks.values.first { $0.sourceClass == .call && $0.id != replacing }.map {
                ($0.id, s.arbiter.state(of: $0.id))
            }
        }) {
            let outcome: Outcome =
                switch existing.1 {
                case .queued: .queued
                case .interrupted: .interrupted
                case .paused: .paused
                case .playing, .ducked, nil: .playing
                }
            return Admission(id: existing.0.rawValue, outcome: outcome, skipped: [])
        }
        let events = daemon.events
        var zones: [String] = []
        let admission = try daemon.admit(
            // The zones as configured now (a reload renames or removes zones; only the receiver's
            // own settings wait for a restart), else as it started.
            .call, zones: daemon.config.intercom?.zones ?? config.zones, volume: 1, replacing: replacing,
            before: { id in
                events.publish(type: .call, source: id.rawValue, zones: zones, reason: "call started: \(reason)")
            }
        ) { (available: [ZoneHandle]) throws(ControlError) in
            zones = available.map(\.name)
            return CallPlayer(receiver: receiver) { why in
                events.publish(type: .intercomError, reason: why)
            }
        }
        // A call queued (a policy lets something over calls) is the receiver's call too, as a granted
        // one is (`CallPlayer.start`): timed from now, a hang-up not yet carried out taken back, the
        // door's stream the call's again. A reload that reopened a queued call's zone ended it (its
        // source's stop hangs up the receiver) and made it again, queued: the door's packets were
        // then refused as a hung-up stream's, the receiver said no call was on, and the queued call
        // stayed with no silence timeout to end it. Under the state lock, and only while still
        // queued: granted since, its start did it; ended since, its hang-up stands.
        if admission.outcome == .queued {
            daemon.state.withLock { s in
                if s.arbiter.state(of: SourceID(admission.id)) == .queued { receiver.expectCall() }
            }
        }
        return admission
    }

    /// Ends the call source, if any: the arbiter releases it (music resumes).
    @discardableResult
    public func end(reason: String) -> String? {
        daemon.state.withLock { s in endCall(reason: reason, &s) }
    }

    /// Ends the call source after the receiver's silence timeout — unless the receiver is in a call
    /// again. Its receive thread, which calls this, ended its call under its own lock and reports
    /// it after, outside it: between the two, a `call/end` and a `call/start` may have taken the
    /// state lock before it. That new call (its start put the receiver back in a call, under this
    /// lock) was ended at once, "no packets for 2s". The receiver times a call again from its start,
    /// so one whose packets do not come still ends after the silence timeout.
    func endAfterSilence(reason: String) {
        daemon.state.withLock { s in
            guard daemon.parts.intercom.receiver?.isInCall != true else { return }
            endCall(reason: reason, &s)
        }
    }

    @discardableResult
    private func endCall(reason: String, _ s: inout Daemon.State) -> String? {
        guard let p = s.playbacks.values.first(where: { $0.sourceClass == .call }) else { return nil }
        p.endReason = reason  // said by `finish`, whatever ends a call
        daemon.apply(s.arbiter.release(p.id, at: .now), &s)
        return p.id.rawValue
    }

    /// Ends the call by request: releases the source, which hangs up the receiver (`CallPlayer.stop`:
    /// a sender that keeps sending does not start a new call at once). The receiver used to be told
    /// first, and its own end of the call could come before this one: `404 no call is on`.
    public func hangUp() throws(ControlError) -> String {
        guard let id = end(reason: "hung up by request") else { throw ControlError(.notFound, "no call is on") }
        return id
    }
}
