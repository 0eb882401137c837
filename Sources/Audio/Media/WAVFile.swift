import AudioCore

/// Reads RIFF/WAVE files: PCM 8/16/24/32-bit integer and 32/64-bit float, any rate and channel
/// count, including WAVE_FORMAT_EXTENSIBLE. Any thread.
///
/// Written by hand because it is a container of a few dozen bytes around raw samples; every
/// compressed format goes through its library.
public enum WAVFile {
    /// The data size sox and espeak-ng (`--stdout`) write when they cannot seek back to fill it in
    /// (a pipe): 0x7FFFF000, with a RIFF size to match (0x7FFFF024).
    static let pipePlaceholderSize = 0x7FFF_F000

    /// Whether a data chunk's `size` says "to the end": a pipe's writer, which cannot know it,
    /// writes 0xFFFFFFFF, sox's and espeak-ng's placeholder (`pipePlaceholderSize` or more), or 0
    /// with the RIFF size (`riffSize`) unknown too. A 0 with a real RIFF size is an empty data
    /// chunk: the chunks after it (LIST, id3) played as noise. The placeholder read as a size: a
    /// spoken announcement played to its end, then was said to be truncated after N of its
    /// 1073739776 frames.
    static func dataRunsToTheEnd(size: Int, riffSize: Int) -> Bool {
        size >= pipePlaceholderSize || (size == 0 && (riffSize == 0 || riffSize == 0xFFFF_FFFF))
    }

    /// Decodes a whole WAV file held in memory. `name` is used in error messages. `limit`: a file of
    /// more channels, or more samples (frames × channels), is refused before anything is decoded.
    public static func decode(
        _ bytes: [UInt8], name: String, limit: (samples: Int, channels: Int)? = nil
    ) throws(MediaError) -> DecodedPCM {
        func fail(_ problem: String) -> MediaError { MediaError(file: name, problem: problem) }
        func u16(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }
        func u32(_ at: Int) -> Int { u16(at) | u16(at + 2) << 16 }

        guard bytes.count >= 12, bytes[0..<4].elementsEqual("RIFF".utf8), bytes[8..<12].elementsEqual("WAVE".utf8)
        else {
            throw fail("not a WAV file (no RIFF/WAVE header)")
        }
        var format: (code: Int, channels: Int, rate: Int, bits: Int)?
        var offset = 12
        while offset + 8 <= bytes.count {
            let id = bytes[offset..<(offset + 4)]
            let size = u32(offset + 4)
            let body = offset + 8
            if id.elementsEqual("fmt ".utf8) {
                guard size >= 16, body + 16 <= bytes.count else { throw fail("truncated fmt chunk") }
                var code = u16(body)
                if code == 0xFFFE {  // WAVE_FORMAT_EXTENSIBLE: the real code starts the sub-format GUID
                    guard size >= 40, body + 40 <= bytes.count else { throw fail("truncated extensible fmt chunk") }
                    code = u16(body + 24)
                }
                format = (code, u16(body + 2), u32(body + 4), u16(body + 14))
                // Read packed (see `WAVStreamDecoder`): another layout played as noise.
                guard code != 1 && code != 3 || u16(body + 12) == u16(body + 2) * u16(body + 14) / 8 else {
                    throw fail(
                        "block align \(u16(body + 12)) does not match \(u16(body + 2)) channels of \(u16(body + 14))-bit samples"
                    )
                }
            } else if id.elementsEqual("data".utf8) {
                guard let f = format else { throw fail("data chunk before fmt chunk") }
                // Written by a pipe: take what the file holds.
                let available = bytes.count - body
                let streamed = dataRunsToTheEnd(size: size, riffSize: u32(4))
                let length = streamed ? available : min(size, available)
                if let limit, f.channels > limit.channels {
                    throw fail("\(f.channels) channels, more than \(limit.channels)")
                }
                if let limit, f.channels > 0, f.bits >= 8,
                    length / (f.bits / 8) / f.channels * f.channels > limit.samples
                {
                    throw fail("more than \(limit.samples) samples (frames × channels)")
                }
                var pcm = try samples(bytes, at: body, length: length, format: f, fail: fail)
                // Shorter than its header says (a copy cut off): what it holds plays, and is said.
                let frameBytes = max(1, f.channels * f.bits / 8)
                if !streamed && size / frameBytes > available / frameBytes {
                    let truncated =
                        "truncated: its data chunk says \(size / frameBytes) frames, the file holds "
                        + "\(available / frameBytes) (\(DecodedPCM.seconds(available / frameBytes, rate: f.rate)) of "
                        + "\(DecodedPCM.seconds(size / frameBytes, rate: f.rate)) s)"
                    pcm.damage = pcm.damage.map { "\(truncated); \($0)" } ?? truncated
                }
                return pcm
            }
            offset = body + size + (size & 1)
        }
        throw fail(format == nil ? "no fmt chunk" : "no data chunk")
    }

    private static func samples(
        _ bytes: [UInt8], at start: Int, length: Int,
        format f: (code: Int, channels: Int, rate: Int, bits: Int),
        fail: (String) -> MediaError
    ) throws(MediaError) -> DecodedPCM {
        guard (1...32).contains(f.channels) else { throw fail("\(f.channels) channels is not supported") }
        guard (1000...768_000).contains(f.rate) else { throw fail("sample rate \(f.rate) Hz is not supported") }
        let width = f.bits / 8
        guard width > 0, f.bits % 8 == 0 else { throw fail("\(f.bits)-bit samples are not supported") }
        let count = length / width / f.channels * f.channels
        var out = [Float](repeating: 0, count: count)
        switch (f.code, f.bits) {
        case (1, 8):
            for i in 0..<count { out[i] = (Float(bytes[start + i]) - 128) / 128 }
        case (1, 16):
            for i in 0..<count {
                let p = start + 2 * i
                out[i] = Float(Int16(bitPattern: UInt16(bytes[p]) | UInt16(bytes[p + 1]) << 8)) / 32768
            }
        case (1, 24):
            for i in 0..<count {
                let p = start + 3 * i
                let raw = Int32(
                    bitPattern: UInt32(bytes[p]) << 8 | UInt32(bytes[p + 1]) << 16 | UInt32(bytes[p + 2]) << 24)
                out[i] = Float(raw >> 8) / 8_388_608
            }
        case (1, 32):
            for i in 0..<count {
                let p = start + 4 * i
                let raw = Int32(
                    bitPattern: UInt32(bytes[p]) | UInt32(bytes[p + 1]) << 8 | UInt32(bytes[p + 2]) << 16 | UInt32(
                        bytes[p + 3]) << 24)
                out[i] = Float(Double(raw) / 2_147_483_648)
            }
        case (3, 32):
            for i in 0..<count {
                let p = start + 4 * i
                let f = Float(
                    bitPattern: UInt32(bytes[p]) | UInt32(bytes[p + 1]) << 8 | UInt32(bytes[p + 2]) << 16 | UInt32(
                        bytes[p + 3]) << 24)
                out[i] = f
            }
        case (3, 64):
            for i in 0..<count {
                let p = start + 8 * i
                var bits: UInt64 = 0
                for k in 0..<8 { bits |= UInt64(bytes[p + k]) << (8 * k) }
                out[i] = Float(Double(bitPattern: bits))
            }
        default:
            throw fail("WAV format code \(f.code) with \(f.bits)-bit samples is not supported (use PCM or float)")
        }
        var pcm = DecodedPCM(samples: out, channels: f.channels, rate: f.rate)
        if f.code == 3 { try silenceNonFinite(&pcm, fail: fail) }
        return pcm
    }

    /// Puts 0 for each float sample that is not a finite number (NaN, an infinity, a float64 beyond
    /// Float's range: it would poison the resampler and the mix), and says how many and where in
    /// `damage`, in `WAVStreamDecoder`'s words. A file of nothing else is refused: it "played" as
    /// silence, answered `playing` and interrupted the music, without a word.
    private static func silenceNonFinite(_ pcm: inout DecodedPCM, fail: (String) -> MediaError) throws(MediaError) {
        var count = 0
        var first = 0
        for i in pcm.samples.indices where !pcm.samples[i].isFinite {
            if count == 0 { first = i / pcm.channels }
            count += 1
            pcm.samples[i] = 0
        }
        guard count > 0 else { return }
        guard count < pcm.samples.count else {
            throw fail("none of its \(count) samples is a number (all NaN or infinite): nothing to play")
        }
        let damage = DecodeDamage(
            count: count, one: WAVStreamDecoder.nonFiniteOne, many: WAVStreamDecoder.nonFiniteMany,
            firstAtFrame: first, rate: pcm.rate)
        pcm.damage = "\(damage)"
    }
}
