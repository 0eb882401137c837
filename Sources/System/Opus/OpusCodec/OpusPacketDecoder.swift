import COpus

/// Decodes raw Opus packets (as carried by RTP, RFC 7587) to interleaved `Float` at 48 kHz, and
/// fills the gaps lost packets leave: packet-loss concealment, or in-band FEC from the next packet.
///
/// Thread: one thread at a time (the decoder keeps state between packets). `init` allocates; after
/// it, `decode`, `recover` and `conceal` do not allocate.
public final class OpusPacketDecoder {
    /// Opus always decodes at 48 kHz here (RFC 7587: the RTP clock of Opus is always 48 kHz).
    public static let rate = 48_000

    /// Interleaved output channels (1 or 2); libopus up- or down-mixes packets coded otherwise.
    public let channels: Int
    private let state: OpaquePointer

    /// Creates a decoder for `channels` (1 or 2) output channels at 48 kHz.
    /// The corresponding C function is `opus_decoder_create`.
    public init(channels: Int) throws(OpusPacketError) {
        guard channels == 1 || channels == 2 else {
            throw OpusPacketError(code: OPUS_BAD_ARG, operation: "create decoder (\(channels) channels; 1 or 2 only)")
        }
        var status: Int32 = OPUS_OK
        guard let state = opus_decoder_create(Int32(Self.rate), Int32(channels), &status), status == OPUS_OK else {
            throw OpusPacketError(code: status == OPUS_OK ? OPUS_ALLOC_FAIL : status, operation: "create decoder")
        }
        self.channels = channels
        self.state = state
    }

    deinit { opus_decoder_destroy(state) }

    /// Decodes one packet into `output` (room for `OpusPacket.maximumFrames` frames is always
    /// enough). Returns the frames written.
    /// The corresponding C function is `opus_decode_float`.
    public func decode(_ packet: UnsafeRawBufferPointer, into output: UnsafeMutableBufferPointer<Float>)
        throws(OpusPacketError) -> Int
    {
        guard let base = packet.baseAddress, packet.count > 0 else {
            throw OpusPacketError(code: OPUS_BAD_ARG, operation: "decode (empty packet)")
        }
        return try run(base, packet.count, output, frames: output.count / channels, fec: false, operation: "decode")
    }

    /// Rebuilds a lost packet of `frames` frames from the in-band FEC that `next` (the packet after
    /// the lost one) carries. Without FEC in `next` libopus conceals instead (see
    /// `OpusPacket.hasInbandFEC`). Then decode `next` itself as usual.
    /// `frames` must be a multiple of 2.5 ms (120 frames); the lost packet's duration.
    /// The corresponding C function is `opus_decode_float` with `decode_fec` = 1.
    public func recover(from next: UnsafeRawBufferPointer, frames: Int, into output: UnsafeMutableBufferPointer<Float>)
        throws(OpusPacketError) -> Int
    {
        guard let base = next.baseAddress, next.count > 0 else {
            throw OpusPacketError(code: OPUS_BAD_ARG, operation: "recover with FEC (empty packet)")
        }
        return try run(base, next.count, output, frames: frames, fec: true, operation: "recover with FEC")
    }

    /// Conceals `frames` lost frames (a multiple of 120, at most 5760), extrapolating from what was
    /// decoded before. The corresponding C function is `opus_decode_float` with no data.
    public func conceal(frames: Int, into output: UnsafeMutableBufferPointer<Float>) throws(OpusPacketError) -> Int {
        try run(nil, 0, output, frames: frames, fec: false, operation: "conceal")
    }

    /// Forgets all history, as at creation (a new stream). The corresponding C function is
    /// `opus_decoder_init` (the same as `OPUS_RESET_STATE`, without the variadic ctl).
    public func reset() {
        _ = opus_decoder_init(state, Int32(Self.rate), Int32(channels))
    }

    private func run(
        _ data: UnsafeRawPointer?, _ length: Int, _ output: UnsafeMutableBufferPointer<Float>,
        frames: Int, fec: Bool, operation: String
    ) throws(OpusPacketError) -> Int {
        guard let out = output.baseAddress, frames > 0, frames * channels <= output.count else {
            throw OpusPacketError(
                code: OPUS_BUFFER_TOO_SMALL,
                operation: "\(operation) (\(frames) frames into "
                    + "\(output.count / channels))")
        }
        let n = opus_decode_float(
            state, data?.assumingMemoryBound(to: UInt8.self), Int32(clamping: length), out,
            Int32(clamping: frames), fec ? 1 : 0)
        guard n >= 0 else { throw OpusPacketError(code: n, operation: operation) }
        return Int(n)
    }
}
