import Glibc

/// DSP kernels used on the output thread. Each is a free function over raw buffers: no allocation,
/// no locks, real-time safe, callable from any thread on buffers it owns.

/// Adds `source` × a linear gain ramp into `destination` (both interleaved, `channels` per frame).
/// The gain of frame `i` is `startGain + Float(i) * step`, the same for every channel of the frame.
@inline(__always)
public func mixAdd(
    into destination: UnsafeMutablePointer<Float>, from source: UnsafePointer<Float>,
    frames: Int, channels: Int, startGain: Float, step: Float
) {
    if step == 0 {
        if startGain == 0 { return }
        for i in 0..<(frames * channels) { destination[i] += source[i] * startGain }
        return
    }
    var g = startGain
    var i = 0
    for _ in 0..<frames {
        for _ in 0..<channels {
            destination[i] += source[i] * g
            i += 1
        }
        g += step
    }
}

/// Converts Float samples in [-1, 1] to signed 16-bit little-endian, clipping what lies outside,
/// rounding to the nearest (ties to even).
///
/// The rounding adds 1.5 × 2^23: the float addition itself rounds to the nearest integer, ties to
/// even, exactly as `rounded(.toNearestOrEven)` does for |x| < 2^22, and the integer is then read
/// from the low bits. So the loop has no libm call (`rounded` is a `rintf` call per sample on x86-64's
/// baseline SSE2) and vectorizes: 6 % of the music pipeline's CPU measured (docs/PERFORMANCE.md).
/// A NaN sample gives an unspecified value instead of a trap. Bit-identical to the plain rounding:
/// `AudioCoreTests` compares them on edge cases and 4 M pseudo-random samples.
@inline(__always)
public func convertToS16(_ source: UnsafePointer<Float>, _ destination: UnsafeMutablePointer<Int16>, count: Int) {
    for i in 0..<count {
        let s = min(max(source[i], -1), 1) * 32767 + 12_582_912
        destination[i] = Int16(truncatingIfNeeded: Int32(bitPattern: s.bitPattern) &- 0x4B40_0000).littleEndian
    }
}

/// Converts Float samples in [-1, 1] to signed 32-bit little-endian, clipping what lies outside. A
/// NaN sample (which `min`/`max` pass through, and whose conversion to an integer traps: the
/// output thread, the whole daemon) is 0.
@inline(__always)
public func convertToS32(_ source: UnsafePointer<Float>, _ destination: UnsafeMutablePointer<Int32>, count: Int) {
    for i in 0..<count {
        let x = source[i]
        // Double keeps 2^31 - 1 exact; Float would round it to 2^31 and overflow.
        let s = Double(x.isNaN ? 0 : min(max(x, -1), 1)) * 2_147_483_647
        destination[i] = Int32(s.rounded(.toNearestOrEven)).littleEndian
    }
}

/// Decibels to a linear amplitude factor (−∞ dB, or anything ≤ −120 dB, is 0).
@inline(__always)
public func linearGain(decibels: Double) -> Float {
    decibels <= -120 ? 0 : Float(pow(10, decibels / 20))
}
