/// A whole decoded sound: interleaved Float samples with their rate and channel count.
public struct DecodedPCM: Sendable, Equatable {
    public var samples: [Float]
    /// Interleaved channels per frame, surround in WAVE order (as `AudioDecoder.channels`).
    public var channels: Int
    public var rate: Int
    /// What was wrong with the file though it decoded (a WAV shorter than its header says: what it
    /// holds is played), to be said when it plays; nil when nothing was.
    public var damage: String?

    public init(samples: [Float], channels: Int, rate: Int, damage: String? = nil) {
        self.samples = samples
        self.channels = channels
        self.rate = rate
        self.damage = damage
    }

    /// Frames held (samples per channel).
    public var frames: Int { channels == 0 ? 0 : samples.count / channels }
}

extension DecodedPCM {
    /// `frames` at `rate` as seconds with two decimals (`41.20`), for what a damage text says. In
    /// Double: a length claimed by a crafted header or last page may be near Int's largest.
    public static func seconds(_ frames: Int, rate: Int) -> String {
        let hundredths = Int(min(Double(max(0, frames)) * 100 / Double(max(1, rate)), 1e15))
        return "\(hundredths / 100).\(hundredths % 100 < 10 ? "0" : "")\(hundredths % 100)"
    }
}
