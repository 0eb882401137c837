import BatonTesting
import Glibc
import OpusCodec
import Synchronization
import Testing

@testable import Intercom

let ms = 1_000_000

/// Opus packets of a 440 Hz tone at amplitude 0.5, 20 ms each, from the real libopus encoder.
/// `fec`: VOIP at 24 kb/s with in-band FEC (SILK), so lost packets can be rebuilt from the next one.
func tonePackets(seconds: Double, fec: Bool = false, frequency: Double = 440) throws -> [[UInt8]] {
    let frames = Int(seconds * 48_000)
    let pcm = Signals.sine(frequency: frequency, rate: 48_000, frames: frames, channels: 1)
    let encoder =
        fec
        ? try OpusPacketEncoder(
            channels: 1, application: .voip, bitrate: 24_000, inbandFEC: true,
            expectedLossPercent: 10)
        : try OpusPacketEncoder(channels: 1, application: .audio, bitrate: 64_000)
    return try encoder.encodeAll(pcm, frameSize: 960)
}

/// The RTP datagram of packet `index` of a stream.
func datagram(
    _ payload: [UInt8], index: Int, firstSeq: UInt16 = 1000, ssrc: UInt32 = 0x1234_5678,
    payloadType: UInt8 = 96
) -> [UInt8] {
    RTPPacket.datagram(
        payloadType: payloadType, sequenceNumber: firstSeq &+ UInt16(truncatingIfNeeded: index),
        timestamp: 90_000 &+ UInt32(index * 960), ssrc: ssrc, payload: payload)
}

/// Drives a jitter buffer like an output that consumes 20 ms every 20 ms, with the real decoder, and
/// keeps every play-out action and the decoded audio.
final class PlayoutSimulation {
    var buffer: JitterBuffer
    let decoder: OpusPacketDecoder
    var audio: [Float] = []
    var actions: [JitterBuffer.Playout] = []
    private var owed = 0
    private let scratch = UnsafeMutableBufferPointer<Float>.allocate(capacity: OpusPacket.maximumFrames)

    init(configuration: JitterBuffer.Configuration = .init()) throws {
        buffer = JitterBuffer(configuration: configuration)
        decoder = try OpusPacketDecoder(channels: 1)
    }

    deinit { scratch.deallocate() }

    @discardableResult
    func insert(_ bytes: [UInt8], at now: Int) -> JitterBuffer.InsertOutcome {
        bytes.withUnsafeBytes { buffer.insert(datagram: $0, now: now) }
    }

    /// The output consumes `frames` at `now`: asks the buffer for as many packets as that takes.
    func consume(frames: Int = 960, at now: Int) throws {
        owed += frames
        while owed > 0 {
            let action = buffer.next(now: now)
            actions.append(action)
            let n: Int
            switch action {
            case .silence:
                audio += [Float](repeating: 0, count: owed)
                owed = 0
                return
            case .decode(let slot, _):
                n = try buffer.withPayload(slot: slot) { p in Result { try decoder.decode(p, into: scratch) } }.get()
            case .recover(let slot, let frames):
                n = try buffer.withPayload(slot: slot) { p in
                    Result { try decoder.recover(from: p, frames: frames, into: scratch) }
                }.get()
            case .conceal(let frames):
                n = try decoder.conceal(frames: frames, into: scratch)
            }
            audio += scratch[0..<n]
            owed -= n
        }
    }

    /// Sends `packets` (datagrams) at 20 ms intervals from `start`, each arriving `delay(i)` later,
    /// and consumes `every` ns of audio at once every `every` ns (20 ms: one packet a tick; an
    /// `IntercomPump` for a zone whose output takes 50 ms per wake-up pulls 50 ms at once), until
    /// `until`. `observe` is called after each tick with the time since `start` in 20 ms packets.
    func run(
        _ datagrams: [[UInt8]], start: Int = 0, until end: Int? = nil, every: Int = 20 * ms,
        observe: (Int) -> Void = { _ in }, delay: (Int) -> Int = { _ in 0 }
    ) throws {
        let arrivals = datagrams.indices.map { (time: start + $0 * 20 * ms + delay($0), index: $0) }
            .sorted { $0.time < $1.time }
        var next = 0
        var now = start
        let stop = end ?? (start + datagrams.count * 20 * ms + 400 * ms)
        while now < stop {
            while next < arrivals.count && arrivals[next].time <= now {
                insert(datagrams[arrivals[next].index], at: arrivals[next].time)
                next += 1
            }
            try consume(frames: every / 1_000_000 * 48, at: now)
            observe((now - start) / (20 * ms))
            now += every
        }
    }
}

/// A UDP socket that sends datagrams to `port` on loopback, or to a multicast group `host`: looped
/// back to this host with a TTL of 0, so that none leaves it.
final class UDPSender {
    let fd: Int32
    var address = sockaddr_in()

    init(port: UInt16, host: String = "127.0.0.1") {
        fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr(host)
        if UInt32(bigEndian: address.sin_addr.s_addr) >> 28 == 0xE {
            var loop: UInt8 = 1
            var ttl: UInt8 = 0
            precondition(setsockopt(fd, Int32(IPPROTO_IP), IP_MULTICAST_LOOP, &loop, 1) == 0)
            precondition(setsockopt(fd, Int32(IPPROTO_IP), IP_MULTICAST_TTL, &ttl, 1) == 0)
        }
    }

    deinit { close(fd) }

    /// The local port (bound by the first `send`).
    var port: UInt16 {
        var local = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return UInt16(bigEndian: local.sin_port)
    }

    func send(_ bytes: [UInt8]) {
        let n = bytes.withUnsafeBytes { b in
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, b.baseAddress, b.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        precondition(n == bytes.count, "sendto failed")
    }
}

/// A clock the test sets by hand, readable from the receiver's thread.
final class ManualClock: Sendable {
    private let value = Atomic<Int>(1_000_000_000)
    var now: Int { value.load(ordering: .acquiring) }
    func set(_ ns: Int) { value.store(ns, ordering: .releasing) }
    func advance(_ ns: Int) { value.add(ns, ordering: .acquiringAndReleasing) }
}

/// Collects a receiver's call events.
final class EventLog: Sendable {
    private let events = Mutex<[CallEvent]>([])
    func append(_ e: CallEvent) { events.withLock { $0.append(e) } }
    var all: [CallEvent] { events.withLock { $0 } }
}

/// The 440 Hz level in consecutive `window`-frame windows of `audio` (48 kHz mono).
func toneLevels(_ audio: [Float], window: Int = 960, frequency: Double = 440) -> [Double] {
    Signals.toneLevels(audio, window: window, frequency: frequency, rate: 48_000)
}
