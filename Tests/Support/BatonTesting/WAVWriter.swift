import Glibc

/// Writes 16-bit PCM WAV files for tests (test sounds with known content). Any thread.
public enum WAVWriter {
    /// Writes interleaved Float samples in [-1, 1] as a 16-bit WAV.
    public static func write(_ samples: [Float], rate: Int, channels: Int, to path: String) {
        let bytes = Self.bytes(samples, rate: rate, channels: channels)
        let f = fopen(path, "wb")!
        _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, f) }
        fclose(f)
    }

    /// The bytes of that WAV (no samples: a header whose data is empty).
    public static func bytes(_ samples: [Float], rate: Int, channels: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        func u32(_ v: Int) { for k in 0..<4 { bytes.append(UInt8((v >> (8 * k)) & 0xFF)) } }
        func u16(_ v: Int) { for k in 0..<2 { bytes.append(UInt8((v >> (8 * k)) & 0xFF)) } }
        let data = samples.count * 2
        bytes += Array("RIFF".utf8)
        u32(36 + data)
        bytes += Array("WAVE".utf8)
        bytes += Array("fmt ".utf8)
        u32(16)
        u16(1)
        u16(channels)
        u32(rate)
        u32(rate * channels * 2)
        u16(channels * 2)
        u16(16)
        bytes += Array("data".utf8)
        u32(data)
        for s in samples {
            let v = Int16((min(max(s, -1), 1) * 32767).rounded())
            u16(Int(UInt16(bitPattern: v)))
        }
        return bytes
    }
}
