import AudioCore
import Glibc
import Synchronization

/// The level of a zone's final mix, as it goes to the device: peak and RMS over the last period
/// (clipped at full scale, as the conversion to the device format clips), and when it was last
/// above and below the silence threshold.
///
/// `measure` runs on the zone's output thread after the mix is complete: one pass over the period,
/// no allocation, results published through atomics. Readers use `level` and `loudness` on any
/// thread.
// @unchecked: every shared field is an `Atomic` (or the `Timeline`, itself atomics); `wasLoud`
// belongs to the output thread.
public final class Meter: @unchecked Sendable {
    /// Below this peak (dBFS) a period counts as silent: −70 dBFS, about 10 LSB of 16-bit audio.
    public static let silenceThresholdDb: Double = -70
    static let silenceThreshold = Float(linearGain(decibels: silenceThresholdDb))

    /// One period's level, linear (0...1) and in dBFS (−∞ as −200).
    public struct Level: Sendable, Equatable {
        public var peak: Float
        public var rms: Float
        public var peakDb: Double { Meter.decibels(peak) }
        public var rmsDb: Double { Meter.decibels(rms) }
    }

    private let peakBits = Atomic<UInt32>(0)
    private let rmsBits = Atomic<UInt32>(0)
    /// On from the first period at or above the threshold, off from the end of the last one.
    public let loudness = Timeline()
    private var wasLoud = false
    /// `silenceThreshold`, copied: a `static let` is read through `swift_once` on every period.
    private let threshold = Meter.silenceThreshold

    /// A meter for one zone's mix. Control thread, before its output thread starts.
    public init() {}

    /// dBFS of a linear level, floored at −200 (for silence) and rounded to 0.1 dB.
    public static func decibels(_ linear: Float) -> Double {
        guard linear > 1e-10 else { return -200 }
        return (200 * log10(Double(linear))).rounded() / 10
    }

    /// The level of the last period measured. Any thread.
    public var level: Level {
        Level(
            peak: Float(bitPattern: peakBits.load(ordering: .relaxed)),
            rms: Float(bitPattern: rmsBits.load(ordering: .relaxed)))
    }

    /// Measures `frames` frames of `mix` (interleaved, `channels` each), rendered at zone frame
    /// `frame`. Output thread only (the zone's mixer calls it; public for baton-bench --meter).
    /// Real-time safe.
    @inline(__always)
    /// Returns true when the zone's loudness crossed the threshold in this period.
    @discardableResult
    public func measure(_ mix: UnsafePointer<Float>, frames: Int, channels: Int, frame: Int) -> Bool {
        let samples = frames * channels
        var peak: Float = 0
        var sum: Float = 0
        for i in 0..<samples {
            let a = min(abs(mix[i]), 1)
            peak = max(peak, a)
            sum += a * a
        }
        peakBits.store(peak.bitPattern, ordering: .relaxed)
        rmsBits.store((samples > 0 ? (sum / Float(samples)).squareRoot() : 0).bitPattern, ordering: .relaxed)
        let loud = peak >= threshold
        if loud != wasLoud {
            wasLoud = loud
            if loud { loudness.record(on: frame, off: nil) } else { loudness.record(on: nil, off: frame) }
            return true
        }
        return false
    }
}
