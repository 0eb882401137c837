import AudioCore
import COpusFile

/// Decodes whole Ogg Opus files held in memory (announcement sounds).
/// Any thread; each call uses its own decoder.
public enum OggOpusFile {
    /// Opus always decodes at 48 kHz.
    public static let rate = 48_000

    /// Decodes every link of an Ogg Opus file (surround in WAVE order, ``OpusChannelOrder``). `name`
    /// is used in error messages. What it steps over is said in `damage` (in `WAVFile`'s form): gaps
    /// (lost or corrupt pages, `OP_HOLE`), a file cut short (inside a page, or without its
    /// end-of-stream page), fewer frames than its last page's granule position says.
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
        // libopusfile reads the bytes in place until `op_free`, so open, decode and free all run
        // inside the closure: the pointer is valid only there (the file was opened in it and read
        // after it had returned).
        let cut = truncation(bytes)
        return try bytes.withUnsafeBufferPointer { memory throws(OpusError) in
            try decode(memory, name: name, singleStream: singleStream, limit: limit, truncated: cut)
        }
    }

    /// `decode` over `memory`, which stays valid throughout. `truncated`: how the file is cut short
    /// (`truncation`), if it is.
    private static func decode(
        _ memory: UnsafeBufferPointer<UInt8>, name: String, singleStream: Bool,
        limit: (samples: Int, channels: Int)?, truncated: String?
    ) throws(OpusError) -> DecodedPCM {
        var status: Int32 = 0
        guard let handle = op_open_memory(memory.baseAddress, memory.count, &status) else {
            throw OpusError(code: status == 0 ? OP_EFAULT : status, context: name)
        }
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
        var holes = 0
        var firstHoleAt = 0
        while true {
            var link: Int32 = 0
            let n = buffer.withUnsafeMutableBufferPointer { op_read_float(handle, $0.baseAddress, Int32(block), &link) }
            if n == 0 { break }
            if n == OP_HOLE {  // opusfile reports a gap, then goes on decoding
                if holes == 0 { firstHoleAt = samples.count / channels }
                holes += 1
                continue
            }
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
        let frames = samples.count / channels
        var damage: [String] = []
        if holes > 0 {
            damage.append(
                DecodeDamage(
                    count: holes, one: "gap (a lost or corrupt Ogg page) stepped over",
                    many: "gaps (lost or corrupt Ogg pages) stepped over", firstAtFrame: firstHoleAt, rate: rate
                ).description)
        }
        if let cut = truncated {
            damage.append("truncated: \(cut), after \(DecodedPCM.seconds(frames, rate: rate)) s")
        } else if total > 0, frames < total {
            damage.append(
                "\(holes == 0 ? "truncated: " : "")its last page says \(total) frames, the file holds \(frames) "
                    + "(\(DecodedPCM.seconds(frames, rate: rate)) of \(DecodedPCM.seconds(Int(total), rate: rate)) s)")
        }
        return DecodedPCM(
            samples: samples, channels: channels, rate: rate,
            damage: damage.isEmpty ? nil : damage.joined(separator: "; "))
    }

    /// How the file is cut short, nil when its last Ogg page is whole and ends the stream: a file cut
    /// inside a page (libopusfile drops the part page), or at a page boundary (its last page lacks
    /// the end-of-stream flag). libopusfile decodes either to the last whole page without a word, and
    /// its length (`op_pcm_total`) is that page's.
    static func truncation(_ bytes: [UInt8]) -> String? {
        // The last page starts within the largest page's length (27 + 255 + 255 × 255 bytes) of the end.
        var at = bytes.count - 4
        let lowest = max(0, bytes.count - 65_307)
        while at >= lowest {
            if bytes[at] == 0x4F, bytes[at + 1] == 0x67, bytes[at + 2] == 0x67, bytes[at + 3] == 0x53,
                at + 4 >= bytes.count || bytes[at + 4] == 0
            {
                break
            }
            at -= 1
        }
        guard at >= lowest else { return nil }  // no page near the end: not a case to judge here
        guard at + 27 <= bytes.count, at + 27 + Int(bytes[at + 26]) <= bytes.count else {
            return "the file ends inside an Ogg page's header"
        }
        let segments = Int(bytes[at + 26])
        let body = bytes[(at + 27)..<(at + 27 + segments)].reduce(0) { $0 + Int($1) }
        if at + 27 + segments + body > bytes.count {
            return "the file ends inside an Ogg page (\(bytes.count - at) of its \(27 + segments + body) bytes)"
        }
        if bytes[at + 5] & 4 == 0 { return "its last Ogg page does not end the stream (no end-of-stream flag)" }
        return nil
    }
}
