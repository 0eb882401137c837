import AudioCore
import BatonTesting
import FLACCodec
import MP3Codec
import Media
import OpusCodec
import Testing

/// One test file: a format, its sample encoding, rate and channel count.
struct Encoded: Sendable, CustomTestStringConvertible {
    var format: StreamFormat
    /// "s16", "s24", "f32" for WAV and FLAC (FLAC has no float); "" for the lossy codecs.
    var sample: String
    var rate: Int
    var channels: Int

    var testDescription: String { "\(format)\(sample.isEmpty ? "" : " " + sample) \(rate) Hz \(channels) ch" }

    /// Makes the file with ffmpeg in `directory`. Returns its path, and for the lossless formats the
    /// WAV it was made from (the reference its samples must equal).
    func make(in directory: String) throws -> (path: String, reference: String?) {
        let tone = toneInput(rate: rate, channels: channels)
        switch format {
        case .wav, .flac:
            let codec = ["s16": "pcm_s16le", "s24": "pcm_s24le", "f32": "pcm_f32le"][sample]!
            let wav = "\(directory)/reference.wav"
            try ffmpeg(tone + ["-c:a", codec, wav])
            if format == .wav { return (wav, wav) }
            let flac = "\(directory)/tone.flac"
            try ffmpeg(["-i", wav, "-c:a", "flac", "-sample_fmt", sample == "s16" ? "s16" : "s32", flac])
            return (flac, wav)
        case .mp3:
            let mp3 = "\(directory)/tone.mp3"
            try ffmpeg(tone + ["-c:a", "libmp3lame", "-b:a", "192k", mp3])
            return (mp3, nil)
        case .oggOpus:
            let opus = "\(directory)/tone.opus"
            try ffmpeg(tone + ["-c:a", "libopus", "-b:a", "128k", opus])
            return (opus, nil)
        }
    }

    /// Makes the file and returns its bytes.
    func bytes() throws -> [UInt8] {
        let directory = TestDirectory.make("codec")
        return try readBytes(make(in: directory).path)
    }
}

let testRates = [22050, 44100, 48000]
let losslessCases: [Encoded] = testRates.flatMap { rate in
    [1, 2].flatMap { channels in
        [("WAV", "s16"), ("WAV", "s24"), ("WAV", "f32"), ("FLAC", "s16"), ("FLAC", "s24")].map {
            Encoded(format: StreamFormat(rawValue: $0.0)!, sample: $0.1, rate: rate, channels: channels)
        }
    }
}
let lossyCases: [Encoded] = testRates.flatMap { rate in
    [1, 2].flatMap { channels in
        [StreamFormat.mp3, .oggOpus].map { Encoded(format: $0, sample: "", rate: rate, channels: channels) }
    }
}
/// One small file of each format, for the error tests.
let oneOfEach: [Encoded] = [
    Encoded(format: .wav, sample: "s16", rate: 44100, channels: 2),
    Encoded(format: .flac, sample: "s16", rate: 44100, channels: 2),
    Encoded(format: .mp3, sample: "", rate: 44100, channels: 2),
    Encoded(format: .oggOpus, sample: "", rate: 48000, channels: 2),
]

/// The format's decoder on `source` (no sniffing).
func decoder(_ format: StreamFormat, _ source: any ByteSource) throws(DecodeError) -> any AudioDecoder {
    try StreamDecoders.open(format, source: source, name: "test.\(format)")
}

@Suite("Stream decoding", .ownThread)
struct StreamDecodingTests {
    /// WAV and FLAC fed 1…1000 bytes at a time decode to exactly the reference WAV's samples: same rate,
    /// channels, frame count and every sample bit-for-bit, with each channel's tone in place.
    @Test(arguments: losslessCases)
    func decodesLosslessExactly(_ file: Encoded) throws {
        let directory = TestDirectory.make("codec")
        let (path, referencePath) = try file.make(in: directory)
        let reference = try WAVFile.decode(readBytes(try #require(referencePath)), name: "reference.wav")
        let decoder = try decoder(file.format, chunked(readBytes(path)))
        #expect(decoder.rate == file.rate)
        #expect(decoder.channels == file.channels)
        if let flac = decoder as? FLACStreamDecoder {
            #expect(flac.bitsPerSample == (file.sample == "s16" ? 16 : 24))
            #expect(flac.totalFrames == file.rate * toneSeconds)
        }
        let samples = try decodeAll(decoder, blockFrames: 777)
        #expect(samples.count == file.rate * toneSeconds * file.channels)
        #expect(samples == reference.samples)
        expectTone(samples, rate: file.rate, channels: file.channels, tolerance: 0.01)
    }

    /// MP3 and Opus fed 1…1000 bytes at a time decode at the right rate (Opus: always 48 kHz) and
    /// channel count (MP3: always stereo, mono on both channels), to the original length within one
    /// codec frame (MP3 1152, Opus 960 frames; both trim their padding from the LAME tag and the
    /// granule positions, and measure exact here), with each channel's tone within 0.05 of its level.
    @Test(arguments: lossyCases)
    func decodesLossyWithinPadding(_ file: Encoded) throws {
        let again = try decoder(file.format, MemoryByteSource(file.bytes()))
        let decoder = try decoder(file.format, chunked(file.bytes()))
        let rate = file.format == .oggOpus ? 48000 : file.rate
        #expect(decoder.rate == rate)
        #expect(decoder.channels == (file.format == .mp3 ? 2 : file.channels))
        let samples = try decodeAll(decoder)
        let frames = samples.count / decoder.channels
        #expect(abs(frames - rate * toneSeconds) <= (file.format == .mp3 ? 1152 : 960))
        if decoder.channels == file.channels {
            expectTone(samples, rate: rate, channels: file.channels, tolerance: 0.05)
        } else {
            let left = Signals.channel(samples, 0, of: 2)
            #expect(left == Signals.channel(samples, 1, of: 2), "mono on both channels")
            expectTone(left, rate: rate, channels: 1, tolerance: 0.05)
        }
        #expect(decoder.damage == nil, "a clean stream said damaged: \(decoder.damage.map { "\($0)" } ?? "")")
        // Read in blocks longer than an MPEG frame (libmpg123 is asked a frame at a time), the same.
        let whole = try decodeAll(again, blockFrames: 8192)
        #expect(whole.count == samples.count && whole == samples)
        #expect(again.damage == nil, "fed in 16 KiB: \(again.damage.map { "\($0)" } ?? "")")
    }
}
