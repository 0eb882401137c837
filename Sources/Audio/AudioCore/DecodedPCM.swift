/// A whole decoded sound: interleaved Float samples with their rate and channel count.
public struct DecodedPCM: Sendable, Equatable {
    public var samples: [Float]
    public var channels: Int
    public var rate: Int

    public init(samples: [Float], channels: Int, rate: Int) {
        self.samples = samples
        self.channels = channels
        self.rate = rate
    }

    /// Frames held (samples per channel).
    public var frames: Int { channels == 0 ? 0 : samples.count / channels }
}
