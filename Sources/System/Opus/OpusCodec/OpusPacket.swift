import COpus

/// Questions about one raw Opus packet (RFC 6716), answered from its bytes without a decoder.
/// Any thread; never allocates.
public enum OpusPacket {
    /// The most frames (per channel, at 48 kHz) one packet may hold: 120 ms.
    public static let maximumFrames = 5_760

    /// The packet's duration in frames at 48 kHz (120 … 5760).
    /// The corresponding C function is `opus_packet_get_nb_samples`.
    /// - Throws: `OPUS_BAD_ARG` for an empty packet, `OPUS_INVALID_PACKET` for a corrupt one.
    public static func frameCount(_ packet: UnsafeRawBufferPointer) throws(OpusPacketError) -> Int {
        guard let base = packet.baseAddress, packet.count > 0 else {
            throw OpusPacketError(code: OPUS_BAD_ARG, operation: "read packet duration (empty packet)")
        }
        let n = opus_packet_get_nb_samples(
            base.assumingMemoryBound(to: UInt8.self), Int32(clamping: packet.count), 48_000)
        guard n > 0 else {
            throw OpusPacketError(code: n == 0 ? OPUS_INVALID_PACKET : n, operation: "read packet duration")
        }
        return Int(n)
    }

    /// The channel count the packet was coded with (its TOC byte); 0 for an empty packet.
    /// The corresponding C function is `opus_packet_get_nb_channels`.
    public static func channels(_ packet: UnsafeRawBufferPointer) -> Int {
        guard let base = packet.baseAddress, packet.count > 0 else { return 0 }
        return Int(opus_packet_get_nb_channels(base.assumingMemoryBound(to: UInt8.self)))
    }

    /// Whether the packet carries in-band FEC (SILK LBRR data) for the packet before it, so a lost
    /// predecessor can be rebuilt with `OpusPacketDecoder.recover(from:frames:into:)`.
    ///
    /// libopus 1.5 has `opus_packet_has_lbrr`; Debian 12 ships 1.3.1, which lacks it, so this reads the
    /// same bits (RFC 6716 §4.2.3): CELT-only packets carry none; otherwise the first frame's SILK
    /// header holds, per channel, one VAD flag per 20 ms SILK frame and then the LBRR flag, all coded
    /// with probability ½, so they are the first bits of the range-coded frame.
    public static func hasInbandFEC(_ packet: UnsafeRawBufferPointer) -> Bool {
        guard let base = packet.baseAddress?.assumingMemoryBound(to: UInt8.self), packet.count > 0 else { return false }
        let config = base[0] >> 3
        if config >= 16 { return false }  // CELT-only
        let frameSize = Int(opus_packet_get_samples_per_frame(base, 48_000))
        let silkFrames = frameSize > 960 ? frameSize / 960 : 1
        // Stack buffers for the parser's frame table (48 frames at most): no allocation.
        let byte: UInt8? = withUnsafeTemporaryAllocation(of: UnsafePointer<UInt8>?.self, capacity: 48) { frames in
            withUnsafeTemporaryAllocation(of: Int16.self, capacity: 48) { sizes in
                guard let frameTable = frames.baseAddress, let sizeTable = sizes.baseAddress else { return nil }
                frames.initialize(repeating: nil)
                sizes.initialize(repeating: 0)
                let count = opus_packet_parse(base, Int32(clamping: packet.count), nil, frameTable, sizeTable, nil)
                guard count > 0, sizes[0] > 0, let first = frames[0] else { return nil }
                return first[0]
            }
        }
        guard let byte else { return false }
        var lbrr = (byte >> (7 - silkFrames)) & 1 == 1
        if opus_packet_get_nb_channels(base) == 2 { lbrr = lbrr || (byte >> (6 - 2 * silkFrames)) & 1 == 1 }
        return lbrr
    }
}
