import BatonConfig
import Intercom
import OSThread
import Synchronization

/// The intercom's RTP/Opus receiver on `intercom.rtp.listen`, or why it could not start. Any thread.
package final class IntercomLine: Sendable {
    private let line = Mutex<(receiver: RTPReceiver?, error: String?)>((nil, nil))
    /// The configuration the line was started with: what runs, whatever a reload says since
    /// (`intercom` needs a restart: `ReloadReport.needsRestart`).
    private let started = Mutex<IntercomConfig?>(nil)

    /// The configuration the line runs with (nil: no intercom was configured at start). Any thread.
    package var config: IntercomConfig? { started.withLock { $0 } }
    /// Held while a call is being started: the look for a running call and the admission are one
    /// step (`Calls.start`), or a request and the first packets could both start one — two pumps
    /// pulling from the one receiver at once under `same: mix`.
    package let starting = Mutex(())

    /// The receiver while it runs.
    package var receiver: RTPReceiver? { line.withLock { $0.receiver } }

    /// Binds and starts the receiver; `onEvent` runs on its thread (short, see `RTPReceiver`). A port
    /// that cannot be bound is logged and published (`intercom-error`); the daemon runs on without
    /// calls. A multicast group that cannot be joined yet (no route to it: the network is not up) is
    /// logged and published too, and shown in status until the receiver has joined it (logged). `burst`: what one wake-up of the slowest-waking output of `intercom.zones` takes from
    /// its slot at once (ns, `DeviceOutput.burstNanoseconds`): the call's pump keeps that in the slot
    /// beyond its own lead, so the jitter buffer must hold it too — its smallest target delay is at
    /// least `burst` + 10 ms (20 ms, as always, at the default 10 ms burst) — and the pump pulls that
    /// much at once, so the buffer's queue swings by it (`consumerBurst`). Each call sets it again
    /// from the zones it plays in (`CallPlayer.start`). Control thread, at start.
    package func start(
        _ config: IntercomConfig, burst: Int, logger: Logger, events: EventLog,
        onEvent: @escaping @Sendable (CallEvent) -> Void
    ) {
        started.withLock { $0 = config }
        let jitter = JitterBuffer.Configuration(payloadType: config.payloadType.map { UInt8($0) })
        let configuration = RTPReceiver.Configuration(
            host: config.listen.host, port: config.listen.port, channels: config.channels,
            silenceTimeout: config.silenceTimeout.wholeNanoseconds,
            jitter: jitter)
        do {
            let host = config.listen.host
            let receiver = try RTPReceiver(
                configuration: configuration,
                onJoined: { tries in
                    logger.info("intercom: joined multicast group \(host) (\(tries) tries); calls are on")
                }, onEvent: onEvent)
            receiver.setConsumerBurst(burst)
            receiver.start()
            line.withLock { $0 = (receiver, nil) }
            if let waiting = receiver.waitingForGroup {
                // A network not up yet (DHCP on Wi-Fi): the receiver joins once it is; until then no
                // datagram comes, and the status says why (`status`).
                logger.warning("intercom: bound \(host):\(receiver.port), \(waiting)")
                events.publish(type: .intercomError, reason: waiting)
            } else {
                logger.info("intercom: listening for RTP/Opus on \(host):\(receiver.port)")
            }
        } catch {
            line.withLock { $0 = (nil, "\(error)") }
            logger.error("intercom: \(error); calls are off")
            events.publish(type: .intercomError, reason: "\(error)")
        }
    }

    /// Stops the receiver. Control thread, at stop.
    package func stop() {
        line.withLock { s in
            defer { s.receiver = nil }
            return s.receiver
        }?.stop()
    }

    /// The intercom part of the status report.
    package func status(_ config: IntercomConfig) -> IntercomStatus {
        let (receiver, error) = line.withLock { ($0.receiver, $0.error) }
        let c = receiver?.counters
        return IntercomStatus(
            listen: "\(config.listen.host):\(receiver?.port ?? config.listen.port)",
            inCall: receiver?.isInCall ?? false, error: error ?? receiver?.waitingForGroup,
            received: c?.received ?? 0, lost: c?.lost ?? 0, concealed: c?.concealed ?? 0,
            fecRecovered: c?.fecRecovered ?? 0,
            late: c?.late ?? 0, duplicate: c?.duplicate ?? 0, malformed: c?.malformed ?? 0, foreign: c?.foreign ?? 0,
            skipped: c?.skipped ?? 0, rebuffers: c?.rebuffers ?? 0, stretched: c?.stretched ?? 0,
            trimmed: c?.trimmed ?? 0, resets: c?.resets ?? 0,
            targetDelayMs: (receiver?.delays.target ?? 0) / 1_000_000, lastRefused: receiver?.lastRefused)
    }
}

/// The RTP intercom (when configured): where it listens, whether a call is on, why it could not
/// start (or, for a multicast group not joined yet, why it hears nothing so far), and the
/// receiver's counters since start (`JitterBuffer.Counters`).
public struct IntercomStatus: Codable, Sendable, Equatable {
    public var listen: String
    public var inCall: Bool
    public var error: String?
    public var received: Int
    /// Packets that never came: concealed, rebuilt from FEC, or skipped.
    public var lost: Int
    public var concealed: Int
    public var fecRecovered: Int
    public var late: Int
    public var duplicate: Int
    public var malformed: Int
    public var foreign: Int
    /// Of `lost`: skipped when play-out started again past them (after a rebuffer, a jump).
    public var skipped: Int
    /// Dry spells longer than the buffer conceals (100 ms): silence until the next packet.
    public var rebuffers: Int
    /// Frames concealed without a loss: to raise the delay, or while the queue was dry.
    public var stretched: Int
    /// Packets dropped: to bring the delay down, or past a full queue.
    public var trimmed: Int
    /// Restarts of the stream: another sender, payload type, or a sequence jump.
    public var resets: Int
    public var targetDelayMs: Int
    /// The last datagram refused: its sender and why (nil: none yet).
    public var lastRefused: String?
}
