import AudioCore
import BatonTesting
import SampleRate
import Soxr
import Testing

/// Every converter, as the daemon can name it in configuration.
let allKinds = ResamplerKind.allCases
/// The source rates Baton meets, to the output rates its zones run at.
let ratePairs = [22050, 44100, 48000].flatMap { input in
    [44100, 48000].map { RatePair(input: input, output: $0) }
}

@Suite("Resampler", .ownThread)
struct ResamplerTests {
    /// Every configuration spelling parses to its kind and prints back the same; others are rejected.
    @Test func parsesConfigurationSpellings() {
        let spellings = [
            "soxr-qq", "soxr-lq", "soxr-mq", "soxr-hq", "soxr-vhq", "src-fastest", "src-medium", "src-best",
        ]
        #expect(allKinds.map(\.rawValue) == spellings)
        for spelling in spellings { #expect(ResamplerKind(rawValue: spelling)?.rawValue == spelling) }
        for wrong in ["soxr", "soxr-", "src-hq", "soxr-best", "SOXR-HQ", "auto", ""] {
            #expect(ResamplerKind(rawValue: wrong) == nil)
        }
        #expect(ResamplerKind.musicDefault == .soxr(.high))
        #expect(ResamplerKind.announcementsDefault == .soxr(.high))  // as RESAMPLING.md and CONFIG.md say
        #expect(ResamplerKind.callsDefault.library == .samplerate)
    }

    /// N input frames fed in uneven blocks and flushed give exactly round-half-up(N × out / in) frames.
    @Test(arguments: allKinds, ratePairs)
    func producesExactOutputFrameCounts(kind: ResamplerKind, rates: RatePair) throws {
        let resampler = try makeResampler(kind: kind, inputRate: rates.input, outputRate: rates.output, channels: 2)
        let blockSizes = [441, 480, 100, 7, 1000, 1, 333]
        // 48080 frames at 48 → 44.1 kHz is 44173.5: the tie case, which must round up.
        for frames in [0, 1, 12345, 44100, 48000, 48080] {
            resampler.reset()
            let input = sine(frequency: 1000, rate: rates.input, frames: frames, channels: 2)
            var index = 0
            let (output, _) = try stream(resampler, input) { _ in
                defer { index += 1 }
                return blockSizes[index % blockSizes.count]
            }
            let expected = ResamplerKind.expectedOutputFrames(
                inputFrames: frames, inputRate: rates.input,
                outputRate: rates.output)
            #expect(output.count == expected * 2, "\(frames) frames")
        }
    }

    /// A 1 kHz sine comes out time-aligned with the ideal one, with THD+N under the converter's floor.
    @Test(
        arguments: allKinds,
        [
            RatePair(input: 44100, output: 48000), RatePair(input: 48000, output: 44100),
            RatePair(input: 22050, output: 48000),
        ])
    func keepsSineDistortionUnderFloor(kind: ResamplerKind, rates: RatePair) throws {
        let resampler = try makeResampler(kind: kind, inputRate: rates.input, outputRate: rates.output, channels: 2)
        let input = sine(frequency: 1000, rate: rates.input, frames: rates.input, channels: 2)
        // 10 ms blocks, as a source's producer thread feeds them; latency read once past 0.2 s.
        let (output, latency) = try stream(resampler, input, warmUpFrames: rates.input / 5) { _ in rates.input / 100 }
        let frames = output.count / 2
        let middle = (frames / 10)..<(frames - frames / 10)
        let fit = SineFit(output, channels: 2, frequency: 1000, rate: rates.output, range: middle)
        let latencyMs = latency / Double(rates.output) * 1000
        print(
            "figure \(kind) \(rates.testDescription): THD+N \(fmt(fit.thdPlusNoise)) dB, "
                + "delay \(fmt(latencyMs, 2)) ms (\(fmt(latency, 1)) frames), alignment \(fmt(fit.delayFrames, 3)) frames"
        )
        #expect(fit.thdPlusNoise < kind.thdPlusNoiseFloor)
        #expect(abs(fit.delayFrames) < 0.05, "output is time-aligned with the input")
        #expect(abs(fit.amplitude - 0.5) < 0.005)
    }

    /// Feeding 1…1000-frame blocks gives the same samples as feeding everything in one call.
    @Test(arguments: allKinds)
    func streamsInBlocksLikeInOneGo(kind: ResamplerKind) throws {
        let input = sine(frequency: 997, rate: 44100, frames: 44100, channels: 2)
        let whole = try stream(makeResampler(kind: kind, inputRate: 44100, outputRate: 48000, channels: 2), input) {
            _ in 44100
        }.output
        let blocks = try stream(makeResampler(kind: kind, inputRate: 44100, outputRate: 48000, channels: 2), input) {
            Int.random(in: 1...1000, using: &$0)
        }.output
        try #require(whole.count == blocks.count)
        let worst = zip(whole, blocks).map { abs($0 - $1) }.max() ?? 0
        #expect(worst <= 1e-6, "largest difference \(worst)")
    }

    /// After warm-up, 1000 `process` calls of 10 ms make no heap allocation, nor does `flush`.
    @Test(arguments: allKinds)
    func processesWithoutAllocating(kind: ResamplerKind) throws {
        let resampler = try makeResampler(kind: kind, inputRate: 48000, outputRate: 44100, channels: 2)
        let input = sine(frequency: 1000, rate: 48000, frames: 480, channels: 2)
        var output = [Float](repeating: 0, count: 2048 * 2)
        try input.withUnsafeBufferPointer { input in
            try output.withUnsafeMutableBufferPointer { output in
                func cycle() throws(ResamplerError) {
                    var offset = 0
                    while offset < input.count {
                        let (consumed, _) = try resampler.process(
                            input: UnsafeBufferPointer(rebasing: input[offset...]), output: output)
                        offset += consumed * 2
                    }
                }
                for _ in 0..<200 { try cycle() }
                let processing = try countAllocations { for _ in 0..<1000 { try cycle() } }
                #expect(processing == 0, "allocations in 1000 process calls")
                let flushing = try countAllocations { while try resampler.flush(output: output) > 0 {} }
                #expect(flushing == 0, "allocations while flushing")
            }
        }
    }

    /// An empty input block is not the end of the stream: it only hands out frames already converted.
    @Test(arguments: allKinds)
    func treatsEmptyInputAsNoInput(kind: ResamplerKind) throws {
        let resampler = try makeResampler(kind: kind, inputRate: 48000, outputRate: 44100, channels: 2)
        let input = sine(frequency: 1000, rate: 48000, frames: 4800, channels: 2)
        var output = [Float](repeating: 0, count: 8192 * 2)
        var produced = 0
        try input.withUnsafeBufferPointer { input in
            try output.withUnsafeMutableBufferPointer { output in
                let empty = UnsafeBufferPointer(rebasing: input[0..<0])
                #expect(try resampler.process(input: empty, output: output) == (0, 0))
                var offset = 0
                while offset < input.count {
                    let room = UnsafeMutableBufferPointer(rebasing: output[(produced * 2)...])
                    let step = try resampler.process(
                        input: UnsafeBufferPointer(rebasing: input[offset...]), output: room)
                    offset += step.consumed * 2
                    produced += step.produced
                }
                let drained = try resampler.process(
                    input: empty,
                    output: UnsafeMutableBufferPointer(rebasing: output[(produced * 2)...]))
                #expect(drained.consumed == 0)
                produced += drained.produced
                while true {
                    let room = UnsafeMutableBufferPointer(rebasing: output[(produced * 2)...])
                    let more = try resampler.flush(output: room)
                    if more == 0 { break }
                    produced += more
                }
            }
        }
        #expect(produced == 4410)
    }

    /// Rates of zero or below, or no channels, are refused with a typed error that says what was wrong.
    @Test(
        arguments: ResamplerLibrary.allCases,
        [
            (0, 48000, 2, ResamplerError.invalidRate(0)),
            (44100, -1, 2, .invalidRate(-1)),
            (-44100, 48000, 2, .invalidRate(-44100)),
            (44100, 48000, 0, .invalidChannelCount(0)),
            (44100, 48000, -2, .invalidChannelCount(-2)),
        ])
    func rejectsInvalidArguments(library: ResamplerLibrary, arguments: (Int, Int, Int, ResamplerError)) {
        let (input, output, channels, expected) = arguments
        let kind: ResamplerKind = library == .soxr ? .soxr(.high) : .samplerate(.medium)
        let error = #expect(throws: ResamplerError.self) {
            try makeResampler(kind: kind, inputRate: input, outputRate: output, channels: channels)
        }
        #expect(error == expected)
        let description = error?.description ?? ""
        #expect(description.contains(expected == .invalidChannelCount(channels) ? "channel" : "sample rate"))
    }

    /// libsamplerate refuses ratios beyond 256; a half frame, or input after flush, is refused by both.
    @Test(arguments: allKinds)
    func rejectsMisuse(kind: ResamplerKind) throws {
        if kind.library == .samplerate {
            #expect(throws: ResamplerError.unsupportedRatio(inputRate: 1000, outputRate: 384_000)) {
                try makeResampler(kind: kind, inputRate: 1000, outputRate: 384_000, channels: 1)
            }
        }
        let resampler = try makeResampler(kind: kind, inputRate: 44100, outputRate: 48000, channels: 2)
        var output = [Float](repeating: 0, count: 4096)
        let input: [Float] = [0.1, 0.2, 0.3]
        try input.withUnsafeBufferPointer { input in
            try output.withUnsafeMutableBufferPointer { output in
                #expect(throws: ResamplerError.partialFrame(samples: 3, channels: 2)) {
                    try resampler.process(input: input, output: output)
                }
                let frame = UnsafeBufferPointer(rebasing: input[0..<2])
                _ = try resampler.process(input: frame, output: output)
                while try resampler.flush(output: output) > 0 {}
                #expect(throws: ResamplerError.finished) { try resampler.process(input: frame, output: output) }
                resampler.reset()
                _ = try resampler.process(input: frame, output: output)
            }
        }
    }

    /// An out-of-range or non-finite ratio is refused with libsamplerate's own `src_strerror` text.
    @Test(arguments: [300.0, 1.0 / 300, 0, -1, .nan, .infinity])
    func rejectsBadRatio(ratio: Double) throws {
        let converter = try SampleRateConverter(quality: .fastest, inputRate: 48000, outputRate: 48000, channels: 1)
        let error = #expect(throws: SampleRateError.self) { try converter.setRatio(ratio) }
        #expect(error?.message == "SRC ratio outside [1/256, 256] range.")
        #expect(converter.ratio == 1)
        #expect(ResamplerError(error!).description.hasPrefix("libsamplerate error 6: SRC ratio outside"))
    }

    /// A ratio raised by 0.1 % (drift correction) lengthens the flushed output by 0.1 %, to within a frame.
    @Test(arguments: [true, false])
    func followsRatioChanges(smoothly: Bool) throws {
        let converter = try SampleRateConverter(quality: .medium, inputRate: 48000, outputRate: 48000, channels: 2)
        try converter.setRatio(1.001, smoothly: smoothly)
        let input = sine(frequency: 1000, rate: 48000, frames: 48000, channels: 2)
        let (output, latency) = try stream(converter, input, warmUpFrames: 4800) { _ in 480 }
        #expect(abs(output.count / 2 - 48048) <= 1)
        #expect(latency > 0 && latency < 100)
    }

    /// `resampleAll` converts a clip to exactly the ideal length and leaves the converter reusable.
    @Test(arguments: [ResamplerKind.announcementsDefault, .samplerate(.best)])
    func resamplesWholeClips(kind: ResamplerKind) throws {
        let resampler = try makeResampler(kind: kind, inputRate: 22050, outputRate: 48000, channels: 1)
        let clip = sine(frequency: 1000, rate: 22050, frames: 22050 / 2, channels: 1)
        let first = try resampler.resampleAll(clip)
        let second = try resampler.resampleAll(clip)
        #expect(first.count == 24000)
        #expect(first == second)
        #expect(throws: ResamplerError.partialFrame(samples: 3, channels: 2)) {
            try makeResampler(kind: kind, inputRate: 22050, outputRate: 48000, channels: 2).resampleAll([0, 0, 0])
        }
    }
}

extension ResamplerKind {
    /// The THD+N a 1 kHz sine must beat through this converter (measured figure plus a margin; see
    /// docs/RESAMPLING.md).
    var thdPlusNoiseFloor: Double {
        switch self {
        case .soxr(.quick): -80  // measured −86.6 … −113.6 dB
        case .soxr(.low): -105  // −113.6 … −119.3
        case .soxr(.medium): -105  // −113.9 … −114.8
        case .soxr(.high): -125  // −132.8 … −134.5
        case .soxr(.veryHigh): -140  // −150.7 … −150.9
        case .samplerate(.fastest): -95  // −103.4 … −120.4
        case .samplerate(.medium): -125  // −135.7 … −142.1
        case .samplerate(.best): -135  // −145.8 … −149.5
        }
    }
}

/// A figure with `digits` decimals, for the printed measurements.
func fmt(_ value: Double, _ digits: Int = 1) -> String {
    var scale = 1.0
    for _ in 0..<digits { scale *= 10 }
    let rounded = (value * scale).rounded() / scale
    return "\(rounded)"
}
