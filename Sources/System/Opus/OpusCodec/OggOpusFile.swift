import AudioCore
import COpusFile

/// Decodes whole Ogg Opus files held in memory (announcement sounds).
/// Any thread; each call uses its own decoder.
public enum OggOpusFile {
    /// Opus always decodes at 48 kHz.
    public static let rate = 48_000

    /// Decodes every link of an Ogg Opus file (surround in WAVE order, ``OpusChannelOrder``). `name`
    /// is used in error messages.
    /// The corresponding C functions are `op_open_memory` and `op_read_float`.
    ///
    /// `limit`: a file of more channels, or more samples (frames × channels), is refused
    /// (`OP_EIMPL`, the limit said) before more than that is decoded — the file's own length (its last page's granule position) is
    /// only a hint, which a crafted file sets to anything.
    public static func decode(
        _ bytes: [UInt8], name: String, limit: (samples: Int, channels: Int)? = nil
    ) throws(OpusError) -> DecodedPCM {
        try decode(bytes, name: name, singleStream: true, limit: limit)
    }

    /// `singleStream`: mono and stereo links are decoded by ``OpusLinkDecoder`` (the same samples);
    /// false leaves all decoding to libopusfile.
    static func decode(
        _ bytes: [UInt8], name: String, singleStream: Bool, limit: (samples: Int, channels: Int)? = nil
    ) throws(OpusError) -> DecodedPCM {
        var status: Int32 = 0
        let handle: OpaquePointer? = bytes.withUnsafeBufferPointer { op_open_memory($0.baseAddress, $0.count, &status) }
        guard let handle else { throw OpusError(code: status == 0 ? OP_EFAULT : status, context: name) }
        let linkDecoder = singleStream ? OpusLinkDecoder(installingOn: handle) : nil
        defer {
            op_free(handle)
            withExtendedLifetime(linkDecoder) {}
        }
        let channels = Int(op_channel_count(handle, -1))
        if let limit, channels > limit.channels {
            throw OpusError(code: OP_EIMPL, context: name, detail: "\(channels) channels, more than \(limit.channels)")
        }
        let maxFrames = limit.map { $0.samples / max(1, channels) } ?? Int.max
        var samples: [Float] = []
        let total = op_pcm_total(handle, -1)
        if total > 0, total <= Int64(min(maxFrames, Int(Int32.max))) { samples.reserveCapacity(Int(total) * channels) }
        let block = 5760 * max(channels, 2)  // 120 ms at 48 kHz, the largest Opus frame
        var buffer = [Float](repeating: 0, count: block)
        while true {
            var link: Int32 = 0
            let n = buffer.withUnsafeMutableBufferPointer { op_read_float(handle, $0.baseAddress, Int32(block), &link) }
            if n == 0 { break }
            if n == OP_HOLE { continue }  // opusfile reports a gap, then goes on decoding
            if n < 0 { throw OpusError(code: n, context: name) }
            guard Int(op_channel_count(handle, link)) == channels else {
                throw OpusError(code: OP_EIMPL, context: name, detail: "links with different channel counts")
            }
            buffer.withUnsafeMutableBufferPointer {
                OpusChannelOrder.toWAVE($0.baseAddress!, frames: Int(n), channels: channels, file: handle, link: link)
            }
            samples.append(contentsOf: buffer[0..<(Int(n) * channels)])
            if samples.count / channels > maxFrames {
                throw OpusError(
                    code: OP_EIMPL, context: name,
                    detail: "more than \(maxFrames * channels) samples (frames × channels)")
            }
        }
        return DecodedPCM(samples: samples, channels: channels, rate: rate)
    }
}
