import Arbiter
import AudioCore
import BatonConfig
import Intercom
import Media

/// Intercom calls (class `call`): an RTP/Opus receiver on `intercom.rtp.listen`. A call starts on
/// the first valid packets (or by `POST /api/v1/call/start`) and goes through the arbiter like any
/// source — by the default policy it interrupts music and announcements queue behind it. It ends on
/// `silence-timeout` without packets or on `POST /api/v1/call/end`. Audio reaches each zone's slot
/// through an `IntercomPump` (48 kHz → the zone's rate with the calls resampler, src-medium).
extension Daemon {
    /// Binds the receiver when `intercom:` is configured. A port that cannot be bound is logged and
    /// published (`intercom-error`); the daemon runs on without calls. Control thread, at start.
    func startIntercom() {
        guard let config = config.intercom else { return }
        let configuration = RTPReceiver.Configuration(
            host: config.listen.host, port: config.listen.port, channels: config.channels,
            silenceTimeout: Int(config.silenceTimeout.components.seconds) * 1_000_000_000
                + Int(config.silenceTimeout.components.attoseconds / 1_000_000_000),
            jitter: JitterBuffer.Configuration(payloadType: config.payloadType.map { UInt8($0) }))
        do {
            let receiver = try RTPReceiver(configuration: configuration) { [weak self] event in
                // The receiver's thread: short, under the daemon lock.
                switch event {
                case .callStarted: _ = try? self?.startCall(reason: "RTP packets on port \(configuration.port)")
                case .callEnded(let why): self?.endCall(reason: why == .silenceTimeout ? "no packets for \(config.silenceTimeout)" : "ended")
                }
            }
            receiver.start()
            intercom.withLock { $0 = (receiver, nil) }
            logger.info("intercom: listening for RTP/Opus on \(config.listen.host):\(receiver.port)")
        } catch {
            intercom.withLock { $0 = (nil, "\(error)") }
            logger.error("intercom: \(error); calls are off")
            events.publish(type: "intercom-error", reason: "\(error)")
        }
    }

    /// Stops the receiver. Control thread, at stop.
    func stopIntercom() {
        let receiver = intercom.withLock { s -> RTPReceiver? in let r = s.receiver; s.receiver = nil; return r }
        receiver?.stop()
    }

    /// Starts the call source on `intercom.rtp.zones` (silence until packets arrive), unless one
    /// exists. Any thread.
    @discardableResult
    public func startCall(reason: String) throws(RequestError) -> (id: String, outcome: Outcome, skipped: [String]) {
        guard let config = config.intercom, let receiver = intercom.withLock({ $0.receiver }) else {
            throw RequestError(status: 409, message: "no intercom is configured or it could not start (intercom: in the config)")
        }
        if let existing = state.withLock({ s in s.playbacks.values.first { $0.pump != nil || $0.isCall }?.id }) {
            return (existing.rawValue, .playing, [])
        }
        let table = self.zones
        let (available, skipped) = try availableZones(try requestedZones(config.zones, in: table), in: table)
        let parts = available.map { z in Playback.ZonePart(zone: z, samples: [], channels: table.zone(z)!.channels) }
        return try state.withLock { (s: inout State) throws(RequestError) in
            let id = SourceID("call-\(s.nextID)")
            s.nextID += 1
            let p = Playback(id: id, sourceClass: .call, sound: "intercom call", loop: false, volume: 1, parts: parts)
            p.isCall = true
            p.receiver = receiver
            p.skipped = skipped
            s.playbacks[id] = p
            events.publish(type: "call", source: id.rawValue, zones: available, reason: "call started: \(reason)")
            let effects = s.arbiter.handle(.request(Request(source: id, sourceClass: .call, zones: available.map { ZoneID($0) })), at: .now)
            apply(effects, &s)
            return (id.rawValue, try outcome(of: id, in: effects), skipped)
        }
    }

    /// Ends the call source, if any: its pump stops and the arbiter releases it (music resumes).
    /// Any thread.
    @discardableResult
    public func endCall(reason: String) -> String? {
        state.withLock { s in
            guard let p = s.playbacks.values.first(where: { $0.isCall }) else { return nil }
            events.publish(type: "call", source: p.id.rawValue, zones: p.zones, reason: "call ended: \(reason)")
            apply(s.arbiter.release(p.id, at: .now), &s)
            return p.id.rawValue
        }
    }

    /// Ends the call by request: tells the receiver (so a sender that keeps sending does not start a
    /// new call at once) and releases the source. Any thread.
    public func hangUp() throws(RequestError) -> String {
        intercom.withLock { $0.receiver }?.endCall()
        guard let id = endCall(reason: "hung up by request") else { throw RequestError(status: 404, message: "no call is on") }
        return id
    }

    /// Starts feeding a granted call's slots from the receiver. Under the lock.
    func startPump(_ p: Playback) {
        guard let receiver = p.receiver, p.pump == nil else { return }
        var targets: [IntercomPump.Target] = []
        for part in p.parts {
            guard let slot = part.slot, let zone = output(part.zone) else { continue }
            var converter: (any AudioCore.Resampler)?
            if zone.rate != 48_000 {
                converter = try? makeResampler(.callsDefault, inputRate: 48_000, outputRate: zone.rate, channels: zone.channels)
            }
            targets.append(IntercomPump.Target(ring: slot.ring, channels: zone.channels, rate: zone.rate, resampler: converter))
        }
        let pump = IntercomPump(receiver: receiver, targets: targets)
        p.pump = pump
        pump.start()
    }

    /// The intercom part of the status report. Any thread.
    func intercomStatus() -> StatusReport.Intercom? {
        guard let config = config.intercom else { return nil }
        let (receiver, error) = intercom.withLock { ($0.receiver, $0.error) }
        let c = receiver?.counters
        return StatusReport.Intercom(
            listen: "\(config.listen.host):\(receiver?.port ?? config.listen.port)", inCall: receiver?.isInCall ?? false, error: error,
            received: c?.received ?? 0, lost: c?.lost ?? 0, concealed: c?.concealed ?? 0, fecRecovered: c?.fecRecovered ?? 0,
            late: c?.late ?? 0, duplicate: c?.duplicate ?? 0, malformed: c?.malformed ?? 0, foreign: c?.foreign ?? 0,
            targetDelayMs: (receiver?.delays.target ?? 0) / 1_000_000)
    }
}
