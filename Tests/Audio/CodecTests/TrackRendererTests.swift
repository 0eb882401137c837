import AudioCore
import BatonTesting
import Testing

@testable import Media

/// Every output's samples when `outputs` render the file together, block by block.
private func render(_ bytes: [UInt8], _ outputs: [TrackRenderer.Output]) throws -> (samples: [[Float]], groups: [[Int]])
{
    let decoder = try StreamDecoders.open(.wav, source: MemoryByteSource(bytes), name: "tone.wav")
    let renderer = try TrackRenderer(decoder: decoder, outputs: outputs, gain: 0.8)
    var samples = Array(repeating: [Float](), count: outputs.count)
    while try renderer.step(deliver: { k, frames in
        samples[k] += frames
        return true
    }) {}
    return (samples, renderer.groups)
}

@Suite("Track rendering", .ownThread)
struct TrackRendererTests {
    /// Outputs that want the same channels, rate and resampler share one conversion, and each gets
    /// exactly the samples it would get rendered alone (bit for bit, to the last flushed frame);
    /// outputs that differ in any of the three get their own.
    @Test func outputsAlikeShareOneConversion() throws {
        let directory = TestDirectory.make("track-renderer")
        try ffmpeg(toneInput(rate: 48_000, channels: 2, seconds: 1) + ["-c:a", "pcm_s16le", "\(directory)/tone.wav"])
        let bytes = try readBytes("\(directory)/tone.wav")
        let outputs = [
            TrackRenderer.Output(channels: 2, rate: 44_100, resampler: .soxr(.high)),
            TrackRenderer.Output(channels: 2, rate: 48_000, resampler: .soxr(.high)),
            TrackRenderer.Output(channels: 2, rate: 44_100, resampler: .soxr(.high)),
            TrackRenderer.Output(channels: 1, rate: 44_100, resampler: .soxr(.high)),
            TrackRenderer.Output(channels: 2, rate: 44_100, resampler: .samplerate(.medium)),
            TrackRenderer.Output(channels: 2, rate: 48_000, resampler: .samplerate(.medium)),
        ]
        let together = try render(bytes, outputs)
        #expect(together.groups == [[0, 2], [1, 5], [3], [4]])
        for (k, output) in outputs.enumerated() {
            let alone = try render(bytes, [output]).samples[0]
            let same =
                alone.count == together.samples[k].count
                && alone.elementsEqual(together.samples[k]) {
                    $0.bitPattern == $1.bitPattern
                }
            #expect(same, "output \(k): \(together.samples[k].count) samples together, \(alone.count) alone")
            #expect(alone.count > output.rate * output.channels * 99 / 100, "output \(k): about 1 s")
        }
    }

    /// A large upsampling gives every frame: a block of 2048 frames at 8 kHz is 24 576 at 96 kHz,
    /// more than the conversion's buffer holds, and 44.1 kHz to an 8-channel 96 kHz zone is 4 458
    /// frames of 8 channels. What did not fit was dropped without a word (a third of an 8 kHz
    /// track, clicks every 43 ms in the 8-channel zone).
    @Test(arguments: [(8_000, 2), (44_100, 8), (11_025, 6)])
    func aLargeUpsamplingGivesEveryFrame(rate: Int, channels: Int) throws {
        let directory = TestDirectory.make("track-renderer-up")
        try ffmpeg(toneInput(rate: rate, channels: 1, seconds: 1) + ["-c:a", "pcm_s16le", "\(directory)/tone.wav"])
        let bytes = try readBytes("\(directory)/tone.wav")
        for resampler in [ResamplerKind.soxr(.high), .samplerate(.medium)] {
            let samples = try render(
                bytes, [TrackRenderer.Output(channels: channels, rate: 96_000, resampler: resampler)]
            )
            .samples[0]
            #expect(abs(samples.count / channels - 96_000) < 100, "\(resampler): \(samples.count / channels) frames")
        }
    }

    /// A decode error midway leaves `position` where decoding got to (the streamer says "stopped …
    /// at 0:02"): two MP3s joined, 2 s at 44.1 kHz then 48 kHz, fail a second into the second part.
    @Test func aDecodeErrorMidwayLeavesThePositionWhereItStopped() throws {
        let directory = TestDirectory.make("track-renderer-fail")
        var joined: [UInt8] = []
        for (k, rate) in [44_100, 48_000].enumerated() {
            try ffmpeg(
                toneInput(rate: rate, channels: 2)
                    + ["-c:a", "libmp3lame", "-write_xing", "0", "-id3v2_version", "0", "\(directory)/\(k).mp3"])
            joined += try readBytes("\(directory)/\(k).mp3")
        }
        let decoder = try StreamDecoders.open(.mp3, source: MemoryByteSource(joined), name: "joined.mp3")
        let renderer = try TrackRenderer(
            decoder: decoder, outputs: [TrackRenderer.Output(channels: 2, rate: 44_100, resampler: .soxr(.high))])
        #expect(throws: DecodeError.self) { while try renderer.step(deliver: { _, _ in true }) {} }
        let seconds = Double(renderer.position) / 44_100
        #expect(seconds > 1.9 && seconds < 2.2, "stopped at \(seconds) s")
        #expect(renderer.framesDelivered[0] > 80_000)
    }

    /// A track's stream sent again from its start (a new transcode) keeps the damage the first
    /// decoder stepped over: the frames it gave were heard. Only the new decoder's was reported,
    /// so a gap before the server's restart was never said.
    @Test func aRestartKeepsTheEarlierDecodersDamage() throws {
        let gap = DecodeDamage(count: 2, one: "gap", many: "gaps", firstAtFrame: 48_000, rate: 48_000)
        let first = SilentDecoder(frames: 96_000, damage: gap)
        let renderer = try TrackRenderer(
            decoder: first, outputs: [TrackRenderer.Output(channels: 2, rate: 48_000, resampler: .soxr(.high))])
        for _ in 0..<30 { _ = try renderer.step { _, _ in true } }
        #expect(renderer.damage == gap)
        try renderer.restart(with: SilentDecoder(frames: 96_000, damage: nil))
        #expect(renderer.damage == gap, "the first decoder's damage, after the restart")
        try renderer.restart(
            with: SilentDecoder(
                frames: 96_000,
                damage: DecodeDamage(count: 1, one: "gap", many: "gaps", firstAtFrame: 72_000, rate: 48_000)))
        #expect(renderer.damage == DecodeDamage(count: 3, one: "gap", many: "gaps", firstAtFrame: 48_000, rate: 48_000))
        // Sent again from its start, the same damage met again at the same place counts once.
        try renderer.restart(
            with: SilentDecoder(
                frames: 96_000,
                damage: DecodeDamage(count: 2, one: "gap", many: "gaps", firstAtFrame: 48_000, rate: 48_000)))
        #expect(renderer.damage == DecodeDamage(count: 3, one: "gap", many: "gaps", firstAtFrame: 48_000, rate: 48_000))
    }

    /// A resume or a seek far into a long track starts at its frame: 15:00:00 into a 20-hour
    /// audiobook at 48 kHz is frame 2 592 000 000, past Int32.max. The frames skipped were capped
    /// there, and the book played from 12:25:39 while the status and the saved place said 15:00:00.
    @Test func aSeekPastInt32FramesStartsAtItsFrame() throws {
        let target = 15 * 3_600 * 48_000
        let decoder = MarkedDecoder(frames: 20 * 3_600 * 48_000, markFrom: target - 1_000)
        let renderer = try TrackRenderer(
            decoder: decoder, outputs: [TrackRenderer.Output(channels: 2, rate: 48_000, resampler: .soxr(.high))],
            skipSeconds: 15 * 3_600)
        #expect(renderer.position == target)
        var first: Float?
        while first == nil,
            try renderer.step(deliver: { _, frames in
                first = frames.first
                return false
            })
        {}
        // The first frame heard is the target's (1 000 frames past the mark), none from before it.
        #expect(first == 1_000)
        #expect(renderer.framesDecoded > target && renderer.framesDecoded <= target + 2_048)
    }
}

/// Gives `frames` frames of stereo at 48 kHz: each frame from `markFrom` on is its distance from
/// there (both channels), each before it -1, so a frame delivered says where it was in the track.
/// Blocks wholly before the mark are left unwritten (a seek drops them), to go through hours fast.
private final class MarkedDecoder: AudioDecoder {
    let rate = 48_000
    let channels = 2
    private let frames: Int
    private let markFrom: Int
    private var at = 0

    init(frames: Int, markFrom: Int) {
        self.frames = frames
        self.markFrom = markFrom
    }

    func read(into output: UnsafeMutableBufferPointer<Float>) throws(DecodeError) -> Int {
        let n = min(frames - at, output.count / channels)
        if at + n > markFrom {
            for f in 0..<n {
                let value: Float = at + f >= markFrom ? Float(at + f - markFrom) : -1
                output[2 * f] = value
                output[2 * f + 1] = value
            }
        }
        at += n
        return n
    }
}

/// Gives `frames` frames of stereo silence at 48 kHz, and says `damage`.
private final class SilentDecoder: AudioDecoder {
    let rate = 48_000
    let channels = 2
    let damage: DecodeDamage?
    private var left: Int

    init(frames: Int, damage: DecodeDamage?) {
        left = frames
        self.damage = damage
    }

    func read(into output: UnsafeMutableBufferPointer<Float>) throws(DecodeError) -> Int {
        let n = min(left, output.count / channels)
        for i in 0..<(n * channels) { output[i] = 0 }
        left -= n
        return n
    }
}
