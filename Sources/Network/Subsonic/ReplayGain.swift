import FoundationEssentials
import OSThread

/// OpenSubsonic ReplayGain values of a song, in dB (gains) and linear full-scale units (peaks).
///
/// A plain value: safe to use from any thread.
public struct ReplayGain: Sendable, Equatable, Codable {
    /// The track gain in dB.
    public var trackGain: Double?
    /// The album gain in dB.
    public var albumGain: Double?
    /// The track peak (1.0 = full scale).
    public var trackPeak: Double?
    /// The album peak (1.0 = full scale).
    public var albumPeak: Double?
    /// The loudness the gains aim at, in dB (OpenSubsonic `baseGain`), when given.
    public var baseGain: Double?

    /// Creates values.
    public init(
        trackGain: Double? = nil, albumGain: Double? = nil, trackPeak: Double? = nil,
        albumPeak: Double? = nil, baseGain: Double? = nil
    ) {
        self.trackGain = trackGain
        self.albumGain = albumGain
        self.trackPeak = trackPeak
        self.albumPeak = albumPeak
        self.baseGain = baseGain
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyCodingKey.self)
        self.init(
            trackGain: c.double("trackGain"), albumGain: c.double("albumGain"),
            trackPeak: c.double("trackPeak"), albumPeak: c.double("albumPeak"), baseGain: c.double("baseGain"))
    }

    /// Whether no value is present (servers send `{}` for untagged files).
    public var isEmpty: Bool {
        trackGain == nil && albumGain == nil && trackPeak == nil && albumPeak == nil
    }
}
