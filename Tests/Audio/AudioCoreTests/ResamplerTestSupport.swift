import AudioCore
import Glibc
import SampleRate
import Soxr
import Testing

/// The factory the daemon will have: AudioCore names the kind, this switch builds it.
func makeResampler(kind: ResamplerKind, inputRate: Int, outputRate: Int, channels: Int)
    throws(ResamplerError) -> any Resampler
{
    switch kind {
    case .soxr(let quality):
        try SoxrResampler(quality: quality, inputRate: inputRate, outputRate: outputRate, channels: channels)
    case .samplerate(let quality):
        try SampleRateConverter(quality: quality, inputRate: inputRate, outputRate: outputRate, channels: channels)
    }
}

/// An input rate and an output rate, printed as "44100→48000".
struct RatePair: Sendable, CustomTestStringConvertible {
    let input: Int
    let output: Int
    var testDescription: String { "\(input)→\(output)" }
}

/// A deterministic pseudo-random generator (SplitMix64), so block-size tables repeat run to run.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Interleaved sine: the same `frequency` on every channel, `amplitude` peak.
func sine(frequency: Double, rate: Int, frames: Int, channels: Int, amplitude: Double = 0.5) -> [Float] {
    var samples = [Float](repeating: 0, count: frames * channels)
    for frame in 0..<frames {
        let value = Float(amplitude * sin(2 * Double.pi * frequency * Double(frame) / Double(rate)))
        for channel in 0..<channels { samples[frame * channels + channel] = value }
    }
    return samples
}

/// Streams `input` through `resampler` in blocks whose frame counts `nextBlock` chooses, then flushes.
/// Returns the whole output, and the mean of `latencyFrames` read after each block once `warmUpFrames`
/// input frames have gone in.
func stream(
    _ resampler: any Resampler, _ input: [Float], warmUpFrames: Int = 0,
    nextBlock: (inout SplitMix) -> Int
) throws -> (output: [Float], meanLatency: Double) {
    let channels = resampler.channels
    let inputFrames = input.count / channels
    var output = [Float](
        repeating: .nan,
        count: (resampler.expectedOutputFrames(inputFrames: inputFrames) + 64)
            * channels)
    var written = 0
    var latencySum = 0.0
    var latencyReads = 0
    var generator = SplitMix(state: 42)
    try input.withUnsafeBufferPointer { all in
        try output.withUnsafeMutableBufferPointer { out in
            var offset = 0  // frames
            while offset < inputFrames {
                let end = min(offset + max(1, nextBlock(&generator)), inputFrames)
                var blockOffset = offset
                while blockOffset < end {  // feed the whole block, as a producer thread would
                    let block = UnsafeBufferPointer(rebasing: all[(blockOffset * channels)..<(end * channels)])
                    let room = UnsafeMutableBufferPointer(rebasing: out[(written * channels)...])
                    let (consumed, produced) = try resampler.process(input: block, output: room)
                    blockOffset += consumed
                    written += produced
                    precondition(consumed > 0 || produced > 0, "resampler made no progress")
                }
                offset = end
                if offset >= warmUpFrames {
                    latencySum += resampler.latencyFrames
                    latencyReads += 1
                }
            }
            while true {
                let room = UnsafeMutableBufferPointer(rebasing: out[(written * channels)...])
                let produced = try resampler.flush(output: room)
                if produced == 0 { break }
                written += produced
            }
        }
    }
    output.removeLast(output.count - written * channels)
    return (output, latencyReads > 0 ? latencySum / Double(latencyReads) : 0)
}

/// A least-squares fit of `a·sin(ωn) + b·cos(ωn) + c` to one channel of `samples` over `range` (frames).
struct SineFit {
    /// Residual power over fitted-sine power, in dB: THD+N of the conversion.
    let thdPlusNoise: Double
    /// How far the output lags the ideal sine, in output frames (0 = time-aligned).
    let delayFrames: Double
    /// Fitted peak amplitude.
    let amplitude: Double

    init(_ samples: [Float], channels: Int, channel: Int = 0, frequency: Double, rate: Int, range: Range<Int>) {
        let omega = 2 * Double.pi * frequency / Double(rate)
        // Normal equations for the basis (sin, cos, 1).
        var m = [[Double]](repeating: [0, 0, 0], count: 3)
        var v = [0.0, 0.0, 0.0]
        for n in range {
            let basis = [sin(omega * Double(n)), cos(omega * Double(n)), 1.0]
            let y = Double(samples[n * channels + channel])
            for i in 0..<3 {
                v[i] += basis[i] * y
                for j in 0..<3 { m[i][j] += basis[i] * basis[j] }
            }
        }
        let (a, b, c) = Self.solve(m, v)
        var residual = 0.0
        var signal = 0.0
        for n in range {
            let fitted = a * sin(omega * Double(n)) + b * cos(omega * Double(n))
            let y = Double(samples[n * channels + channel])
            residual += (y - fitted - c) * (y - fitted - c)
            signal += fitted * fitted
        }
        thdPlusNoise = 10 * log10(residual / signal)
        // a·sin(ωn) + b·cos(ωn) = A·sin(ωn + φ) with φ = atan2(b, a); a lag of d frames is φ = −ωd.
        delayFrames = -atan2(b, a) / omega
        amplitude = (a * a + b * b).squareRoot()
    }

    /// Cramer's rule for the 3×3 system.
    private static func solve(_ m: [[Double]], _ v: [Double]) -> (Double, Double, Double) {
        func det(_ a: [[Double]]) -> Double {
            a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1])
                - a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0])
                + a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0])
        }
        let d = det(m)
        func replaced(_ column: Int) -> [[Double]] {
            var r = m
            for row in 0..<3 { r[row][column] = v[row] }
            return r
        }
        return (det(replaced(0)) / d, det(replaced(1)) / d, det(replaced(2)) / d)
    }
}
