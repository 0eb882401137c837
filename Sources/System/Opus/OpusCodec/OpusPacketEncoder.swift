import COpus

/// Encodes interleaved `Float` at 48 kHz into raw Opus packets (for test senders and tools; the
/// daemon only decodes).
///
/// Thread: one thread at a time. `init` allocates; `encode` allocates its result.
public final class OpusPacketEncoder {
    /// What libopus tunes for.
    public enum Application: Sendable {
        /// Speech (`OPUS_APPLICATION_VOIP`): favours SILK, which can carry in-band FEC.
        case voip
        /// Music (`OPUS_APPLICATION_AUDIO`).
        case audio
    }

    public static let rate = 48_000
    public let channels: Int
    private let state: OpaquePointer

    /// Creates an encoder. `inbandFEC` makes libopus add LBRR data for the previous frame when it
    /// codes with SILK, sized for `expectedLossPercent` (0…100); `bitrate` is in bits per second.
    /// The corresponding C functions are `opus_encoder_create` and `opus_encoder_ctl`.
    public init(
        channels: Int, application: Application = .voip, bitrate: Int = 32_000, inbandFEC: Bool = false,
        expectedLossPercent: Int = 0
    ) throws(OpusPacketError) {
        var status: Int32 = OPUS_OK
        let app = application == .voip ? OPUS_APPLICATION_VOIP : OPUS_APPLICATION_AUDIO
        guard let state = opus_encoder_create(Int32(Self.rate), Int32(channels), app, &status), status == OPUS_OK else {
            throw OpusPacketError(code: status == OPUS_OK ? OPUS_ALLOC_FAIL : status, operation: "create encoder")
        }
        self.channels = channels
        self.state = state
        for (request, value, name) in [
            (OPUS_SET_BITRATE_REQUEST, bitrate, "set bitrate"),
            (OPUS_SET_INBAND_FEC_REQUEST, inbandFEC ? 1 : 0, "set in-band FEC"),
            (OPUS_SET_PACKET_LOSS_PERC_REQUEST, expectedLossPercent, "set packet loss"),
        ] {
            let rc = baton_opus_encoder_set_int(state, request, Int32(clamping: value))
            guard rc == OPUS_OK else {
                opus_encoder_destroy(state)
                throw OpusPacketError(code: rc, operation: "\(name) to \(value)")
            }
        }
    }

    deinit { opus_encoder_destroy(state) }

    /// Encodes one frame of `pcm` (interleaved; 2.5, 5, 10, 20, 40 or 60 ms: 120 … 2880 frames).
    /// The corresponding C function is `opus_encode_float`.
    public func encode(_ pcm: UnsafeBufferPointer<Float>) throws(OpusPacketError) -> [UInt8] {
        guard let input = pcm.baseAddress, pcm.count % channels == 0 else {
            throw OpusPacketError(code: OPUS_BAD_ARG, operation: "encode (\(pcm.count) samples is not whole frames)")
        }
        var packet = [UInt8](repeating: 0, count: 4_000)
        let n = packet.withUnsafeMutableBufferPointer { out -> Int32 in
            guard let base = out.baseAddress else { return OPUS_BUFFER_TOO_SMALL }
            return opus_encode_float(state, input, Int32(pcm.count / channels), base, Int32(out.count))
        }
        guard n >= 0 else { throw OpusPacketError(code: n, operation: "encode") }
        packet.removeLast(packet.count - Int(n))
        return packet
    }

    /// Encodes `pcm` (interleaved) into packets of `frameSize` frames each; a final partial frame is
    /// padded with silence.
    public func encodeAll(_ pcm: [Float], frameSize: Int = 960) throws(OpusPacketError) -> [[UInt8]] {
        var packets: [[UInt8]] = []
        let block = frameSize * channels
        var offset = 0
        while offset < pcm.count {
            var chunk = Array(pcm[offset..<min(offset + block, pcm.count)])
            if chunk.count < block { chunk += [Float](repeating: 0, count: block - chunk.count) }
            packets.append(try chunk.withUnsafeBufferPointer { (p) throws(OpusPacketError) in try encode(p) })
            offset += block
        }
        return packets
    }
}
