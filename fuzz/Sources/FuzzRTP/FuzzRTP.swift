import FuzzSupport
import OpusCodec
import Synchronization

@testable import Intercom

// The intercom's receive path on a sequence of arbitrary datagrams: RTP parsing, the jitter buffer
// (insert on the receive side, `next` on the play-out side) and the real Opus decoder behind
// `PacketPlayout`, exactly as `RTPReceiver` wires them, without the socket and threads.
//
// Input: one options byte (bit 0: stereo output; bit 1: a fixed payload type 111), then records of
//   [control] [length high] [length low] [datagram: length mod 1600 bytes]
// where control's low 5 bits advance the clock by that many ms, bit 5 pulls 20 ms of audio after the
// datagram, bit 6 ends the call (as a hang-up does). The input ends with 300 ms of pulls.

/// Pulls 20 ms of audio, as the pump does.
func pull(_ playout: PacketPlayout, _ state: borrowing Mutex<RTPReceiver.State>, _ output: inout [Float], now: Int) {
    let frames = output.withUnsafeMutableBufferPointer { playout.fill($0, now: now, state: state) }
    precondition(frames >= 0 && frames <= 960, "pulled \(frames) frames of 960")
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRTP(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = UnsafeRawBufferPointer(start: data, count: size)
    guard let options = input.first else { return 0 }
    let channels = options & 1 == 0 ? 1 : 2
    var jitter = JitterBuffer.Configuration(payloadType: options & 2 == 0 ? nil : 111)
    jitter.slots = 32
    let state = Mutex(
        RTPReceiver.State(
            jitter: JitterBuffer(configuration: jitter),
            monitor: CallMonitor(silenceTimeout: 2_000_000_000)))
    guard let playout = try? PacketPlayout(channels: channels, maximumPayload: jitter.maximumPayload) else {
        fatalError("no Opus decoder")
    }
    var output = [Float](repeating: 0, count: 960 * channels)
    var now = 1_000_000_000

    var at = 1
    while at + 3 <= size {
        let control = input[at]
        let length = min((Int(input[at + 1]) << 8 | Int(input[at + 2])) % 1_600, size - at - 3)
        let datagram = UnsafeRawBufferPointer(rebasing: input[(at + 3)..<(at + 3 + length)])
        at += 3 + length
        now += Int(control & 0x1f) * 1_000_000
        if let packet = try? RTPPacket(parsing: datagram) {
            precondition(
                packet.payload.lowerBound >= RTPPacket.headerSize && packet.payload.upperBound <= length,
                "payload \(packet.payload) outside a \(length)-byte datagram")
        }
        state.withLock { s in
            switch s.jitter.insert(datagram: datagram, now: now) {
            case .started, .accepted, .reset, .duplicate, .late:
                if let ssrc = s.jitter.ssrc { _ = s.monitor.packet(ssrc: ssrc, now: now) }
            case .malformed, .foreign:
                break
            }
            // What the status report reads.
            _ = (s.jitter.targetDelay, s.jitter.bufferedDelay, s.jitter.counters)
            if control & 0x40 != 0 {
                _ = s.monitor.end()
                s.jitter.reset(now: now, ignoreUntilQuietFor: 2_000_000_000)
            }
        }
        if control & 0x20 != 0 { pull(playout, state, &output, now: now) }
    }
    for _ in 0..<15 {
        now += 20_000_000
        pull(playout, state, &output, now: now)
    }
    return 0
}

@main
struct FuzzRTPMain {
    static func main() { runLibFuzzer(fuzzRTP) }
}
