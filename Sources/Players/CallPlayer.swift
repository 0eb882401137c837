import AudioCore
import Intercom
import Media
import Synchronization

/// An intercom call (class `call`): live audio from the RTP receiver, pumped into each zone's slot
/// (48 kHz → the zone's rate with the calls resampler) once the arbiter grants it. It never drains by
/// itself: the control plane ends it on `call/end` or when the receiver reports silence (also for a
/// call started by request whose packets never come: `RTPReceiver.expectCall`).
public final class CallPlayer: Source, @unchecked Sendable {
    // @unchecked: `pump` is set in start and cleared in stop, both under the control plane's lock.
    public let label = "intercom call"
    private let receiver: RTPReceiver
    private var pump: IntercomPump?
    private let outputs = Mutex<[SourceOutput]>([])

    /// Told why a zone cannot take the call (under the control plane's lock, from `start`).
    private let report: @Sendable (String) -> Void

    public init(receiver: RTPReceiver, report: @escaping @Sendable (String) -> Void = { _ in }) {
        self.receiver = receiver
        self.report = report
    }

    public func start(_ outputs: [SourceOutput]) {
        guard pump == nil else { return }
        // Timed from now (it ends after the silence timeout without packets), under the control
        // plane's lock as `stop` is: a hang-up right after cannot be undone by it.
        receiver.expectCall()
        self.outputs.withLock { $0 = outputs }
        // A zone whose converter cannot be made is left out, and said: given the call unconverted,
        // it played 48 kHz audio at its own rate (8 % low at 44.1 kHz), the jitter buffer trimming.
        let converted = outputs.compactMap { o -> (SourceOutput, (any Resampler)?)? in
            guard o.rate != 48_000 else { return (o, nil) }
            do {
                return (o, try makeResampler(o.resampler, inputRate: 48_000, outputRate: o.rate, channels: o.channels))
            } catch {
                report(
                    "zone \(o.zone): the call cannot be converted from 48000 Hz to \(o.rate) Hz (\(error)); not played there"
                )
                return nil
            }
        }
        // A zone whose card is lost holds the call as a paused one does: with every zone out (one
        // zone's card lost, or all of them) the pump pulls the call at its pace and drops it, and
        // the call is heard live when a card is back. Nothing pulled it: the door overran the
        // jitter buffer every 2.56 s (each time one packet refused as "far from the call's"), and
        // the card came back up to 2.5 s behind the door, then caught up over seconds, one packet
        // in six dropped.
        // The zones pumped are what a zone left behind is judged among (one left out is never in
        // step: a zone coming back took it for the place to rejoin at).
        let pumped = converted.map(\.0)
        let targets = converted.map { (o, resampler) in
            IntercomPump.Target(
                ring: o.slot.ring, channels: o.channels, rate: o.rate, resampler: resampler, wrote: o.slot.wrote,
                isHeld: { o.slot.isPauseRequested || o.isOut },
                inStep: { o.takesFrames(among: pumped) },
                drop: { o.drop($0) })
        }
        // The rings hold 20 ms beyond what one wake-up of the slowest-waking output takes at once
        // (30 ms at the default period and buffer); the jitter buffer holds that much too, and
        // lets its queue swing by it. The pump refills once per output wake-up (at most every
        // 10 ms). Set for each call, from its zones as they are now: set once, when the intercom
        // started listening, a reload that lengthened a call zone's buffer (40 → 100 ms: 10 → 50 ms
        // at a wake-up) or added such a zone to the calls' left the jitter buffer trimming at the
        // top of each of the pump's swings and concealing at the bottom: the call broke up there
        // until a restart.
        let burst = outputs.map(\.device.burstNanoseconds).max() ?? 0
        receiver.setConsumerBurst(burst)
        let pump = IntercomPump(receiver: receiver, targets: targets, lead: 20_000_000 + burst, interval: burst)
        self.pump = pump
        pump.start()
    }

    public func tick(audible: Bool) {}
    /// Never: the pump feeds the rings, and a call ends through the control plane.
    public var nextTick: Int? { nil }

    /// Stops the pump before the slots it writes are released, and hangs up the receiver's call:
    /// however the source ends (a hang-up, a user's stop, a reload that took its zones), the
    /// receiver does not go on saying a call is on — its stream is ignored until it pauses.
    public func stop() -> Bool {
        pump?.stop()
        pump = nil
        receiver.endCall()
        return true
    }

    public var position: Double? { slotPosition(outputs.withLock { $0 }) }
    public var isDrained: Bool { false }
}
