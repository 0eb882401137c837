import Glibc

/// Test signals and their analysis. Any thread.
public enum Signals {
    /// An interleaved sine of `frequency` Hz at `amplitude` on every channel.
    public static func sine(frequency: Double, rate: Int, frames: Int, channels: Int, amplitude: Float = 0.5) -> [Float]
    {
        var out = [Float](repeating: 0, count: frames * channels)
        for f in 0..<frames {
            let v = amplitude * Float(sin(2 * Double.pi * frequency * Double(f) / Double(rate)))
            for c in 0..<channels { out[f * channels + c] = v }
        }
        return out
    }

    /// One channel of interleaved samples.
    public static func channel(_ samples: [Float], _ index: Int, of channels: Int) -> [Float] {
        stride(from: index, to: samples.count, by: channels).map { samples[$0] }
    }

    /// The amplitude of `frequency` in `samples` (Goertzel), normalised so a full sine of amplitude A
    /// reads A.
    public static func toneLevel(_ samples: ArraySlice<Float>, frequency: Double, rate: Int) -> Double {
        let n = samples.count
        guard n > 0 else { return 0 }
        let w = 2 * Double.pi * frequency / Double(rate)
        let coeff = 2 * cos(w)
        var s1 = 0.0
        var s2 = 0.0
        for x in samples {
            let s0 = Double(x) + coeff * s1 - s2
            s2 = s1
            s1 = s0
        }
        let power = s1 * s1 + s2 * s2 - coeff * s1 * s2
        return 2 * sqrt(max(power, 0)) / Double(n)
    }

    /// `toneLevel` of `frequency` in each consecutive whole `window` of `samples` (one channel).
    public static func toneLevels(_ samples: [Float], window: Int, frequency: Double, rate: Int) -> [Double] {
        stride(from: 0, to: samples.count - window + 1, by: window).map {
            toneLevel(samples[$0..<($0 + window)], frequency: frequency, rate: rate)
        }
    }

    /// The amplitude of `frequency` in `samples` through a Hann window, so a strong tone at another
    /// frequency leaks far less into the estimate than with `toneLevel` (for short windows).
    public static func windowedToneLevel(_ samples: ArraySlice<Float>, frequency: Double, rate: Int) -> Double {
        let n = samples.count
        guard n > 1 else { return 0 }
        let w = 2 * Double.pi * frequency / Double(rate)
        var re = 0.0
        var im = 0.0
        var sum = 0.0
        for (i, x) in samples.enumerated() {
            let hann = 0.5 - 0.5 * cos(2 * Double.pi * Double(i) / Double(n - 1))
            re += Double(x) * hann * cos(w * Double(i))
            im -= Double(x) * hann * sin(w * Double(i))
            sum += hann
        }
        return 2 * sqrt(re * re + im * im) / sum
    }

    /// The root-mean-square level of `samples`.
    public static func rms(_ samples: ArraySlice<Float>) -> Double {
        guard !samples.isEmpty else { return 0 }
        return sqrt(samples.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(samples.count))
    }

    /// The index of the first sample whose magnitude exceeds `threshold`, or nil.
    public static func onset(_ samples: [Float], threshold: Float = 0.01) -> Int? {
        samples.firstIndex { abs($0) > threshold }
    }
}
