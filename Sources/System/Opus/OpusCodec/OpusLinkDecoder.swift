import COpus
import COpusFile

/// Decodes the packets of an Ogg Opus file whose links each carry one Opus stream (channel mapping
/// family 0: mono or stereo, which is nearly every music file) with libopus's single-stream decoder,
/// in libopusfile's place (`op_set_decode_callback`). Other links (surround, families 1 and 255) are
/// left to libopusfile's own multistream decoder.
///
/// Why: every `opus_multistream_decode_float` asks its decoder for the sample rate through
/// `opus_multistream_decoder_ctl`, which sizes the per-stream decoders with `opus_decoder_get_size`
/// on every call; in Debian's libopus (built with custom modes) that runs `opus_custom_mode_create`,
/// which starts with `opus_select_arch()` — the `cpuid` instruction, four times a packet. On a
/// virtual machine every `cpuid` traps to the hypervisor: measured here it was 37 % of the music
/// stream thread's time (docs/PERFORMANCE.md). `opus_decode_float` on a single-stream decoder does
/// none of that; MPD decodes stereo Opus the same way.
///
/// The output is libopusfile's own, sample for sample: a link with one stream decodes to the same
/// samples through either decoder, the gain is the one libopusfile set on its decoder for the link
/// (the header's output gain; read back with `OPUS_GET_GAIN`), and the decoder starts afresh where
/// libopusfile's does — at each new link (another link index, serial number or multistream
/// decoder). libopusfile also resets its decoder at a seek, which this cannot see: Baton never seeks
/// an `OggOpusFile` (streams are unseekable; a start offset is reached by decoding and dropping).
///
/// Thread: the thread that reads the file. Owned by the file's reader, and outlives its handle.
final class OpusLinkDecoder {
    private let file: OpaquePointer
    private var decoder: OpaquePointer?
    private var decoderChannels: Int32 = 0
    /// The link the decoder was set up for: its index, serial number and libopusfile's decoder.
    private var link: (index: Int32, serial: UInt32, multistream: OpaquePointer?)?
    /// How many packets the single-stream decoder decoded (0 when every link was left to libopusfile).
    private(set) var packetsDecoded = 0

    /// Takes over decoding for `file` (an open `OggOpusFile`). It must stay alive until the file
    /// is freed. The corresponding C function is `op_set_decode_callback`.
    init(installingOn file: OpaquePointer) {
        self.file = file
        op_set_decode_callback(
            file,
            { context, multistream, pcm, packet, samples, channels, format, link in
                guard let context, let pcm, let packet else { return OP_DEC_USE_DEFAULT }
                return Unmanaged<OpusLinkDecoder>.fromOpaque(context).takeUnretainedValue().decode(
                    packet, into: pcm, samples: samples, channels: channels, format: format, link: link,
                    multistream: multistream)
            }, Unmanaged.passUnretained(self).toOpaque())
    }

    deinit {
        if let decoder { opus_decoder_destroy(decoder) }
    }

    /// One packet: 0 when `samples` frames were written to `pcm`, `OP_DEC_USE_DEFAULT` for
    /// libopusfile to decode it, or a negative libopus error.
    private func decode(
        _ packet: UnsafePointer<ogg_packet>, into pcm: UnsafeMutableRawPointer, samples: Int32, channels: Int32,
        format: Int32, link index: Int32, multistream: OpaquePointer?
    ) -> Int32 {
        let serial = op_serialno(file, index)
        if link?.index != index || link?.serial != serial || link?.multistream != multistream {
            startLink(index: index, serial: serial, multistream: multistream, channels: channels)
        }
        guard let decoder, channels == decoderChannels else { return OP_DEC_USE_DEFAULT }
        let bytes = Int32(clamping: packet.pointee.bytes)
        let n =
            format == OP_DEC_FORMAT_FLOAT
            ? opus_decode_float(
                decoder, packet.pointee.packet, bytes, pcm.assumingMemoryBound(to: Float.self), samples, 0)
            : opus_decode(decoder, packet.pointee.packet, bytes, pcm.assumingMemoryBound(to: Int16.self), samples, 0)
        guard n == samples else { return n < 0 ? n : OPUS_INVALID_PACKET }
        packetsDecoded += 1
        return 0
    }

    /// A new link (or libopusfile's first packet): decode it here if it carries one stream, as a
    /// fresh decoder with libopusfile's gain for it; otherwise leave it to libopusfile.
    private func startLink(index: Int32, serial: UInt32, multistream: OpaquePointer?, channels: Int32) {
        link = (index, serial, multistream)
        guard let head = op_head(file, index), head.pointee.mapping_family == 0, head.pointee.stream_count == 1,
            head.pointee.channel_count == channels, channels == 1 || channels == 2
        else {
            dropDecoder()
            return
        }
        if let decoder, decoderChannels == channels {
            // What libopusfile does to its decoder when the new link has the same layout.
            guard baton_opus_decoder_reset(decoder) == OPUS_OK else { return dropDecoder() }
        } else {
            dropDecoder()
            var status: Int32 = OPUS_OK
            guard let made = opus_decoder_create(Int32(OggOpusFile.rate), channels, &status), status == OPUS_OK else {
                return
            }
            decoder = made
            decoderChannels = channels
        }
        var gain: Int32 = 0
        if let multistream, baton_opus_multistream_decoder_get_int(multistream, OPUS_GET_GAIN_REQUEST, &gain) != OPUS_OK
        {
            return dropDecoder()
        }
        if let decoder, baton_opus_decoder_set_int(decoder, OPUS_SET_GAIN_REQUEST, gain) != OPUS_OK {
            dropDecoder()
        }
    }

    private func dropDecoder() {
        if let decoder { opus_decoder_destroy(decoder) }
        decoder = nil
        decoderChannels = 0
    }
}
