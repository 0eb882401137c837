import FoundationEssentials
import Glibc

/// OpenSubsonic playback reporting (`reportPlayback`, extension `playbackReport`): tells the server
/// what this player is doing, so its "now playing" view is truthful about pauses.
///
/// Blocking, on the calling thread; any thread but an output thread.
extension SubsonicClient {
    /// What a player reports.
    public enum PlaybackState: String, Sendable {
        case starting, playing, paused, stopped
    }

    /// The server's OpenSubsonic extension names, asked once and then remembered (`[]` for a
    /// plain Subsonic server such as Supysonic).
    public func extensionNames() throws(SubsonicError) -> [String] {
        if let known = knownExtensions.withLock({ $0 }) { return known }
        let names = try openSubsonicExtensions()?.map(\.name) ?? []
        knownExtensions.withLock { $0 = names }
        return names
    }

    /// Whether the server takes `reportPlayback`.
    public func supportsPlaybackReport() throws(SubsonicError) -> Bool {
        try extensionNames().contains("playbackReport")
    }

    /// `reportPlayback`: the song, its state and the position heard (ms), with `ignoreScrobble=true`:
    /// the server only shows what plays. Baton scrobbles by what is heard itself (`scrobble`); without
    /// it the server also counted the play from the reports (the spec's default, Navidrome 0.62+), and
    /// every track was counted twice. `playbackRate` is left to its default, 1. Callers check
    /// ``supportsPlaybackReport()`` first; a server without the extension answers an error.
    public func reportPlayback(id: String, state: PlaybackState, positionMilliseconds: Int64) throws(SubsonicError) {
        _ = try call(
            "reportPlayback",
            [
                ("mediaId", id), ("mediaType", "song"), ("positionMs", "\(max(0, positionMilliseconds))"),
                ("state", state.rawValue), ("ignoreScrobble", "true"),
            ], stoppable: false)
    }
}

extension ReplayGain {
    /// A gain beyond this many dB either way is not a ReplayGain value (a raw R128 Q7.8 number, a
    /// server's bug): +512 dB made the speaker play a clipped square wave at full scale, −1536 dB
    /// silence while Baton said the music played, and beyond ±770 dB the factor was infinite — its
    /// NaNs silenced the zone's mix, announcements too. Real tags stay within about ±20 dB.
    public static let plausibleDecibels = 24.0
    /// A peak above this (linear; 1 is full scale) is not a track's: it would turn the track down
    /// by that much (a peak of 1000, −60 dB).
    public static let plausiblePeak = 8.0

    /// The linear factor for a track: the track (or album) gain in dB plus `preampDecibels`,
    /// limited so the peak stays at or below full scale when the peak is known. `album` falls back
    /// to the track values (and `track` to the album's) when one is missing; 1 when there is no
    /// gain. Values that are not plausible (`implausible`) count as missing.
    public func factor(album: Bool, preampDecibels: Double = 0) -> Float {
        let gains = (Self.gain(trackGain), Self.gain(albumGain))
        let peaks = (Self.peak(trackPeak), Self.peak(albumPeak))
        let gain = album ? (gains.1 ?? gains.0) : (gains.0 ?? gains.1)
        let peak = album ? (peaks.1 ?? peaks.0) : (peaks.0 ?? peaks.1)
        guard let gain else { return 1 }
        var linear = pow(10, (gain + preampDecibels) / 20)
        if let peak { linear = min(linear, 1 / peak) }
        return Float(linear)
    }

    /// The values `factor` ignores, said for a log line ("trackGain 512 dB"); nil when none.
    public var implausible: String? {
        let gains = [("trackGain", trackGain), ("albumGain", albumGain)].filter {
            $0.1 != nil && Self.gain($0.1) == nil
        }
        let peaks = [("trackPeak", trackPeak), ("albumPeak", albumPeak)].filter {
            $0.1 != nil && Self.peak($0.1) == nil
        }
        let said = gains.map { "\($0.0) \($0.1!) dB" } + peaks.map { "\($0.0) \($0.1!)" }
        return said.isEmpty ? nil : said.joined(separator: ", ")
    }

    private static func gain(_ decibels: Double?) -> Double? {
        decibels.flatMap { $0.isFinite && abs($0) <= plausibleDecibels ? $0 : nil }
    }

    private static func peak(_ linear: Double?) -> Double? {
        linear.flatMap { $0.isFinite && $0 > 0 && $0 <= plausiblePeak ? $0 : nil }
    }
}
