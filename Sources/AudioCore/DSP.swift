import Glibc

/// DSP kernels used on the output thread. Each is a free function over raw buffers: no allocation,
/// no locks, real-time safe, callable from any thread on buffers it owns.

/// Adds `source` × a linear gain ramp into `destination` (both interleaved, `channels` per frame).
/// The gain of frame `i` is `startGain + Float(i) * step`, the same for every channel of the frame.
@inline(__always)
public func mixAdd(into destination: UnsafeMutablePointer<Float>, from source: UnsafePointer<Float>,
                   frames: Int, channels: Int, startGain: Float, step: Float) {
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

/// Converts Float samples in [-1, 1] to signed 16-bit little-endian, clipping what lies outside.
@inline(__always)
public func convertToS16(_ source: UnsafePointer<Float>, _ destination: UnsafeMutablePointer<Int16>, count: Int) {
    for i in 0..<count {
        let s = min(max(source[i], -1), 1) * 32767
        destination[i] = Int16(s.rounded(.toNearestOrEven)).littleEndian
    }
}

/// Converts Float samples in [-1, 1] to signed 32-bit little-endian, clipping what lies outside.
@inline(__always)
public func convertToS32(_ source: UnsafePointer<Float>, _ destination: UnsafeMutablePointer<Int32>, count: Int) {
    for i in 0..<count {
        // Double keeps 2^31 - 1 exact; Float would round it to 2^31 and overflow.
        let s = Double(min(max(source[i], -1), 1)) * 2147483647
        destination[i] = Int32(s.rounded(.toNearestOrEven)).littleEndian
    }
}

/// Decibels to a linear amplitude factor (−∞ dB, or anything ≤ −120 dB, is 0).
@inline(__always)
public func linearGain(decibels: Double) -> Float {
    decibels <= -120 ? 0 : Float(pow(10, decibels / 20))
}
