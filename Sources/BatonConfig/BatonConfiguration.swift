/// Everything `batond --config FILE` reads: the control API, the zones, sounds, resamplers and the
/// arbitration policy.
///
/// Relative paths (`sounds`, `alsa-config`, `output-dir`) are resolved against the directory that
/// contains the configuration file when it is loaded; the properties hold the resolved paths.
///
/// A plain value: safe to share between threads.
public struct BatonConfiguration: Sendable, Equatable {
    public var api: APIConfig
    /// At least one zone, in file order, with unique names.
    public var zones: [ZoneConfig]
    /// The directory of named announcement sounds. Default `sounds` next to the config file.
    public var sounds: String
    public var resampler: ResamplerConfig
    /// An ALSA configuration file the daemon loads before opening PCMs, if any.
    public var alsaConfig: String?
    /// Where `file` PCMs write (informational), if set.
    public var outputDir: String?
    public var policy: PolicyConfig

    /// Creates a configuration.
    public init(api: APIConfig = .default, zones: [ZoneConfig], sounds: String = "sounds",
                resampler: ResamplerConfig = .default, alsaConfig: String? = nil, outputDir: String? = nil,
                policy: PolicyConfig = .default) {
        self.api = api
        self.zones = zones
        self.sounds = sounds
        self.resampler = resampler
        self.alsaConfig = alsaConfig
        self.outputDir = outputDir
        self.policy = policy
    }

    /// The zone named `name`, if there is one.
    public func zone(named name: String) -> ZoneConfig? {
        zones.first { $0.name == name }
    }

    /// The resampler for music played in `zone`: its override, else `resampler.music`.
    public func musicResampler(for zone: ZoneConfig) -> Resampler {
        zone.resampler ?? resampler.music
    }

    /// The configuration with secrets replaced by `"<redacted>"`, for `GET /api/v1/config` and logs.
    ///
    /// There are no secrets yet, so this returns `self`. Any secret added later (an MQTT password,
    /// an API token) must be blanked here, and the test "redacted() hides every secret" extended.
    public func redacted() -> BatonConfiguration {
        self
    }
}
