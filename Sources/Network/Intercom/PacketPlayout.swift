import OpusCodec
import Synchronization

/// The play-out side of a receiver: asks the jitter buffer what comes next, decodes it with its own
/// Opus decoder, and hands out 48 kHz frames in whatever block sizes the consumer wants.
///
/// Thread: the consumer's thread only (the one that calls `RTPReceiver.pull`). It takes the
/// receiver's mutex briefly per packet (to copy ≤ 1500 bytes out); decoding happens outside it.
/// Allocates in `init` only.
final class PacketPlayout {
    let channels: Int
    private let decoder: OpusPacketDecoder
    private var pcm: [Float]
    private var pcmStart = 0
    private var pcmEnd = 0
    private var packet: [UInt8]
    private var generation = -1

    init(channels: Int, maximumPayload: Int) throws(OpusPacketError) {
        self.channels = channels
        decoder = try OpusPacketDecoder(channels: channels)
        pcm = [Float](repeating: 0, count: OpusPacket.maximumFrames * channels)
        packet = [UInt8](repeating: 0, count: maximumPayload)
    }

    /// Fills `output` (interleaved, `output.count / channels` frames) entirely: call audio first,
    /// silence where there is none. Returns the frames that came from the call.
    func fill(_ output: UnsafeMutableBufferPointer<Float>, now: Int, state: borrowing Mutex<RTPReceiver.State>) -> Int {
        let wanted = output.count / channels
        var written = 0
        var fromCall = 0
        // What is left decoded belongs to the stream it came from: after a reset (a call ended, a
        // new one began) it was played first — the last caller's voice at the start of the next.
        if pcmStart < pcmEnd, state.withLock({ $0.jitter.generation }) != generation { pcmStart = pcmEnd }
        while written < wanted {
            if pcmStart < pcmEnd {
                let n = min(pcmEnd - pcmStart, (wanted - written) * channels)
                pcm.withUnsafeBufferPointer { src in
                    (output.baseAddress! + written * channels).update(from: src.baseAddress! + pcmStart, count: n)
                }
                pcmStart += n
                written += n / channels
                fromCall += n / channels
                continue
            }
            let (action, length, generation) = state.withLock { s -> (JitterBuffer.Playout, Int, Int) in
                let action = s.jitter.next(now: now)
                var length = 0
                switch action {
                case .decode(let slot, _), .recover(let slot, _):
                    length = s.jitter.withPayload(slot: slot) { bytes in
                        packet.withUnsafeMutableBytes { $0.copyMemory(from: bytes) }
                        return bytes.count
                    }
                case .silence, .conceal:
                    break
                }
                return (action, length, s.jitter.generation)
            }
            if generation != self.generation {
                decoder.reset()
                self.generation = generation
            }
            if action == .silence {
                (output.baseAddress! + written * channels).update(repeating: 0, count: (wanted - written) * channels)
                return fromCall
            }
            pcmStart = 0
            pcmEnd = decode(action, length: length, state: state) * channels
        }
        return fromCall
    }

    /// Carries out one play-out action; returns the frames it produced. A packet libopus rejects is
    /// counted as malformed and concealed instead.
    private func decode(_ action: JitterBuffer.Playout, length: Int, state: borrowing Mutex<RTPReceiver.State>) -> Int {
        pcm.withUnsafeMutableBufferPointer { out in
            packet.withUnsafeBytes { all in
                let bytes = UnsafeRawBufferPointer(rebasing: all[0..<length])
                do {
                    switch action {
                    case .decode: return try decoder.decode(bytes, into: out)
                    case .recover(_, let frames): return try decoder.recover(from: bytes, frames: frames, into: out)
                    case .conceal(let frames): return try decoder.conceal(frames: frames, into: out)
                    case .silence: return 0
                    }
                } catch {
                    state.withLock { $0.jitter.countUndecodable(action) }
                    let frames: Int
                    switch action {
                    case .decode(_, let f), .recover(_, let f), .conceal(let f): frames = f
                    case .silence: frames = 0
                    }
                    return (try? decoder.conceal(frames: max(120, frames), into: out)) ?? 0
                }
            }
        }
    }
}
