import AudioCore
import BatonTesting
import OpusCodec
import Testing

@testable import Media

/// A 5.1 test signal: each channel (FL, FR, FC, LFE, BL, BR in ffmpeg's and WAVE's order) its own tone.
private let surroundTones = [400.0, 600.0, 800.0, 100.0, 1200.0, 1500.0]
private let surroundAmplitude = 0.2

/// The 5.1 signal, 1 s at 48 kHz, encoded with `codec` into `file` (its ending names the container).
private func makeSurround(_ file: String, codec: [String]) throws -> [UInt8] {
    let expressions = surroundTones.map { "\(surroundAmplitude)*sin(2*PI*\(Int($0))*t)" }
    try ffmpeg(
        ["-f", "lavfi", "-i", "aevalsrc=\(expressions.joined(separator: "|")):c=5.1:s=48000:d=1"] + codec + [file])
    return try readBytes(file)
}

/// Each tone's level in `channel` of `samples`, over the middle half.
private func levels(_ samples: [Float], channel: Int, of channels: Int) -> [Double] {
    let one = Signals.channel(samples, channel, of: channels)
    let middle = one[(one.count / 4)..<(one.count * 3 / 4)]
    return surroundTones.map { Signals.windowedToneLevel(middle, frequency: $0, rate: 48_000) }
}

/// Checks `got` (each tone's level) against `weights` × the test amplitude, within `tolerance` of it.
private func expectLevels(
    _ got: [Double], _ weights: [Double], tolerance: Double, _ what: String,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    let names = ["FL", "FR", "FC", "LFE", "BL", "BR"]
    for (k, weight) in weights.enumerated() {
        let want = weight * surroundAmplitude
        #expect(
            abs(got[k] - want) <= max(0.004, want * tolerance),
            "\(what): \(names[k]) at \(got[k]), expected \(want)", sourceLocation: sourceLocation)
    }
}

@Suite("Surround downmix", .ownThread)
struct SurroundDownmixTests {
    /// A 5.1 track in a stereo zone: the left gets FL, the centre and BL, the right FR, the centre and
    /// BR (−3 dB each, divided by 1 + 0.707 + 0.707), the LFE neither; a mono zone the mean of the
    /// two. Opus came out in Vorbis order and was mapped channel for channel: the stereo zone played
    /// FL and the centre, FR never heard; FLAC and WAV lost the centre (the vocals) and the back pair.
    @Test(arguments: [
        ("flac", ["-c:a", "flac"], StreamFormat.flac, 0.02),
        ("wav", ["-c:a", "pcm_s16le"], .wav, 0.02),
        ("opus", ["-c:a", "libopus", "-mapping_family", "1", "-b:a", "384k"], .oggOpus, 0.15),
    ])
    func aSurroundTrackIsDownmixed(ending: String, codec: [String], format: StreamFormat, tolerance: Double)
        throws
    {
        let directory = TestDirectory.make("surround")
        let bytes = try makeSurround("\(directory)/surround.\(ending)", codec: codec)
        let decoder = try StreamDecoders.open(format, source: chunked(bytes), name: "surround.\(ending)")
        #expect(decoder.channels == 6)
        let outputs = [
            TrackRenderer.Output(channels: 2, rate: 48_000, resampler: .soxr(.high)),
            TrackRenderer.Output(channels: 1, rate: 48_000, resampler: .soxr(.high)),
        ]
        let renderer = try TrackRenderer(decoder: decoder, outputs: outputs)
        var samples: [[Float]] = [[], []]
        while try renderer.step(deliver: { k, frames in
            samples[k] += frames
            return true
        }) {}
        let h = 0.707_106_77
        let sum = 1 + 2 * h
        expectLevels(
            levels(samples[0], channel: 0, of: 2), [1 / sum, 0, h / sum, 0, h / sum, 0], tolerance: tolerance,
            "\(ending), stereo left")
        expectLevels(
            levels(samples[0], channel: 1, of: 2), [0, 1 / sum, h / sum, 0, 0, h / sum], tolerance: tolerance,
            "\(ending), stereo right")
        expectLevels(
            levels(samples[1], channel: 0, of: 1), [0.5 / sum, 0.5 / sum, h / sum, 0, h / 2 / sum, h / 2 / sum],
            tolerance: tolerance, "\(ending), mono")
    }

    /// An announcement in 5.1 Opus decodes in WAVE order too (it went through the same mapping).
    @Test func aSurroundOpusSoundDecodesInWAVEOrder() throws {
        let directory = TestDirectory.make("surround-sound")
        let bytes = try makeSurround(
            "\(directory)/surround.opus", codec: ["-c:a", "libopus", "-mapping_family", "1", "-b:a", "384k"])
        let decoded = try OggOpusFile.decode(bytes, name: "surround.opus")
        #expect(decoded.channels == 6)
        for c in [0, 1, 2, 4, 5] {
            let got = levels(decoded.samples, channel: c, of: 6)
            var weights = [Double](repeating: 0, count: 6)
            weights[c] = 1
            expectLevels(got, weights, tolerance: 0.15, "channel \(c)")
        }
    }

    /// The block-by-block downmix allocates nothing (it runs for every block of a track), after a
    /// first call (the runtime sets up on first use, as for the mapping before).
    @Test func theDownmixDoesNotAllocate() {
        let input = UnsafeMutableBufferPointer<Float>.allocate(capacity: 2048 * 6)
        let output = UnsafeMutableBufferPointer<Float>.allocate(capacity: 2048 * 2)
        defer {
            input.deallocate()
            output.deallocate()
        }
        input.initialize(repeating: 0.25)
        _ = mapChannels(UnsafeBufferPointer(input), from: 6, to: 2, into: output)  // the runtime's first-use set-up
        allocationCountStart()
        let written = mapChannels(UnsafeBufferPointer(input), from: 6, to: 2, into: output)
        let count = allocationCountStop()
        #expect(count == 0, "\(count) allocations")
        #expect(written == 4096)
        #expect(abs(output[0] - 0.25) < 1e-6, "a full-scale mix stays within its inputs: \(output[0])")
    }
}
