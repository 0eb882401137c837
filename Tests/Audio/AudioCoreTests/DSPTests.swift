import AudioCore
import BatonTesting
import Testing

/// The S16 conversion's rounding by float addition gives exactly what `rounded(.toNearestOrEven)`
/// gives: on edge cases (ties, the clip points, infinities, denormals) and 4 M pseudo-random samples
/// over ±2 (so clipping is exercised too).
@Suite(.ownThread) struct S16ConversionTests {
    @Test func matchesPlainRounding() {
        var x: UInt64 = 0x9E37_79B9_7F4A_7C15
        var input: [Float] = [
            0, -0, 1, -1, 1.5, -1.5, .infinity, -.infinity, 0.5 / 32767, -0.5 / 32767, 1.5 / 32767,
            -1.5 / 32767, 2.5 / 32767, 32766.5 / 32767, -32766.5 / 32767, .leastNonzeroMagnitude,
        ]
        for _ in 0..<(1 << 22) {
            x = x &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            input.append(Float(Int32(truncatingIfNeeded: x >> 32)) / Float(1 << 30))
        }
        var converted = [Int16](repeating: 0, count: input.count)
        converted.withUnsafeMutableBufferPointer { convertToS16(input, $0.baseAddress!, count: input.count) }
        let reference = input.map { Int16((min(max($0, -1), 1) * 32767).rounded(.toNearestOrEven)) }
        #expect(converted == reference)
    }
}

/// The S32 conversion clips, and takes a NaN for silence: converting it to an integer trapped, and
/// a float WAV with one NaN sample (or an infinity, which a resampler turns into NaNs) took the
/// whole daemon down on an S32 zone.
@Suite(.ownThread) struct S32ConversionTests {
    @Test func clipsAndTakesNaNForSilence() {
        let input: [Float] = [0, 0.5, 1, -1, 2, -2, .infinity, -.infinity, .nan, -.nan, .signalingNaN]
        var converted = [Int32](repeating: 7, count: input.count)
        converted.withUnsafeMutableBufferPointer { convertToS32(input, $0.baseAddress!, count: input.count) }
        #expect(
            converted == [
                0, 1_073_741_824, .max, -.max, .max, -.max, .max, -.max, 0, 0, 0,
            ])
    }
}
