import AudioCore

/// Everything `batond --config FILE` reads: the control API, the zones, sounds, resamplers and the
/// arbitration policy.
///
/// Relative paths (`sounds`, `alsa-config`, `output-dir`, `state-dir`, `boards-dir` and the
/// secret files) are resolved against the directory that
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
    /// Named sets of zones, in file order.
    public var groups: [GroupConfig]
    /// Streamed music; `nil` when the file has no `music:` section.
    public var music: MusicConfig?
    /// Where the daemon keeps state (volumes, the play queue); `nil`: the daemon decides.
    public var stateDir: String?
    /// The board profile every zone without its own `board:` uses (top-level `board:`).
    public var board: String?
    /// The directory board profiles were read from: `boards-dir` if set, else the one found (see
    /// ``BoardProfile/searchDirectories(configDirectory:)``) when a board was used; else `nil`.
    public var boardsDir: String?
    /// The speaker's name in MQTT topics and Home Assistant (`device:`); default `baton`.
    public var device: String
    /// The MQTT broker, if any.
    public var mqtt: MQTTConfig?
    /// GPIO buttons, in file order.
    public var gpio: [GPIOButtonConfig]
    /// The RTP intercom, if any.
    public var intercom: IntercomConfig?
    /// Spoken announcements (espeak-ng).
    public var speech: SpeechConfig
    /// Announcements from a URL (`announce:`): allowed hosts and caps.
    public var announce: AnnounceConfig
    /// ALSA programs that play through a `baton` PCM (`external-sources:`); nil when not configured.
    public var externalSources: ExternalSourcesConfig?
    /// How long a zone may stay below −70 dBFS while a source is heard there before the daemon
    /// raises `silent-while-playing` (`silence-alarm:`, default 2 s).
    public var silenceAlarm: Duration
    /// What the loader said of the file without refusing it, each at its line and key (a
    /// fractional `mqtt.keepalive` rounded, a `bus` beside `mpd` ignored, an `output-dir` that is a
    /// file): in ``warnings``. Empty for a configuration not loaded from text.
    public var loadWarnings: [ConfigIssue] = []

    /// `silence-alarm:`'s default and its accepted range.
    public static let defaultSilenceAlarm = Duration.seconds(2)
    public static let silenceAlarmRange = Duration.milliseconds(100)...Duration.seconds(3600)

    /// Creates a configuration.
    public init(
        api: APIConfig = .default, zones: [ZoneConfig], sounds: String = "sounds",
        resampler: ResamplerConfig = .default, alsaConfig: String? = nil, outputDir: String? = nil,
        policy: PolicyConfig = .default, groups: [GroupConfig] = [], music: MusicConfig? = nil,
        stateDir: String? = nil, board: String? = nil, boardsDir: String? = nil, device: String = "baton",
        mqtt: MQTTConfig? = nil, gpio: [GPIOButtonConfig] = [], intercom: IntercomConfig? = nil,
        speech: SpeechConfig = .default, announce: AnnounceConfig = .default,
        externalSources: ExternalSourcesConfig? = nil, silenceAlarm: Duration = defaultSilenceAlarm
    ) {
        self.api = api
        self.zones = zones
        self.sounds = sounds
        self.resampler = resampler
        self.alsaConfig = alsaConfig
        self.outputDir = outputDir
        self.policy = policy
        self.groups = groups
        self.music = music
        self.stateDir = stateDir
        self.board = board
        self.boardsDir = boardsDir
        self.device = device
        self.mqtt = mqtt
        self.gpio = gpio
        self.intercom = intercom
        self.speech = speech
        self.announce = announce
        self.externalSources = externalSources
        self.silenceAlarm = silenceAlarm
    }

    /// The zone named `name`, if there is one.
    public func zone(named name: String) -> ZoneConfig? {
        zones.first { $0.name == name }
    }

    /// The resampler for music played in `zone`: its override, else `resampler.music`.
    public func musicResampler(for zone: ZoneConfig) -> ResamplerKind {
        zone.resampler ?? resampler.music
    }

    /// The configuration with secrets replaced by `"<redacted>"`, for `GET /api/v1/config` and logs.
    ///
    /// The configuration holds no secret values, so this returns `self`: the API token
    /// (`api.token-file`), the Subsonic password (`music.subsonic.password-file` / `password-env`) and
    /// API key (`api-key-file`), the MQTT password (`mqtt.password-file`) and TLS client key
    /// (`mqtt.key-file`) are named by path or variable and read by the daemon, which must never
    /// store their contents here. Any secret value added later must be blanked here, and the test
    /// "redacted() hides every secret" extended.
    public func redacted() -> BatonConfiguration {
        self
    }
}
