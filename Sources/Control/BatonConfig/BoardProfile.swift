/// What one Raspberry Pi + DAC combination supports (`boards/NAME.yaml`): its ALSA device, rates,
/// formats, mixer control and timing. A zone with `board: NAME` takes its defaults from it and may only
/// use its rates and formats.
///
/// A plain value: safe to share between threads.
public struct BoardProfile: Sendable, Equatable {
    /// The file name without `.yaml`: what `board:` names (`pi4-hifiberry-dacplus`).
    public var id: String
    /// A human name (`Raspberry Pi 4 + HiFiBerry DAC+ (PCM5122)`).
    public var name: String
    /// The ALSA PCM name.
    public var pcm: String
    /// The sample rates the DAC plays, in file order, at least one.
    public var rates: [Int]
    /// The sample formats it accepts, in file order, at least one.
    public var formats: [ZoneConfig.SampleFormat]
    /// The device's channel count.
    public var channels: Int
    /// The ALSA simple mixer control for hardware volume, if the DAC has one.
    public var mixer: String?
    /// How volume is set on this board: the ALSA `mixer` control (`hardware`) or Baton's own gain
    /// stage (`software`, for DACs and amps without a control, like the MAX98357A).
    public enum VolumeControl: String, Sendable, Equatable, CaseIterable, Codable {
        case hardware
        case software
    }

    /// `volume:` in the profile; defaults to `hardware` when the board names a mixer, else `software`.
    public var volume: VolumeControl = .software

    /// The `config.txt` line that enables the DAC (`dtoverlay=hifiberry-dacplus`), for documentation.
    public var dtoverlay: String?
    public var period: Duration
    public var buffer: Duration
    /// Default `device`.
    public var clock: ZoneConfig.Clock
    /// Free text for people.
    public var notes: String?

    /// Creates a profile.
    public init(
        id: String, name: String, pcm: String, rates: [Int], formats: [ZoneConfig.SampleFormat], channels: Int,
        mixer: String? = nil, dtoverlay: String? = nil, period: Duration, buffer: Duration,
        clock: ZoneConfig.Clock = .device, notes: String? = nil, volume: VolumeControl? = nil
    ) {
        self.id = id
        self.name = name
        self.pcm = pcm
        self.rates = rates
        self.formats = formats
        self.channels = channels
        self.mixer = mixer
        self.dtoverlay = dtoverlay
        self.period = period
        self.buffer = buffer
        self.clock = clock
        self.notes = notes
        self.volume = volume ?? (mixer == nil ? .software : .hardware)
    }

    /// The rate a zone gets when it sets none: 48000 if the board plays it, else its first rate.
    public var defaultRate: Int { rates.contains(48000) ? 48000 : rates[0] }
    /// The format a zone gets when it sets none: S16_LE if the board takes it, else its first format.
    public var defaultFormat: ZoneConfig.SampleFormat { formats.contains(.s16LE) ? .s16LE : formats[0] }

    /// The installed boards directory, searched last.
    public static let systemDirectory = "/usr/share/baton/boards"

    /// Where boards are looked for when `boards-dir` is not set, in order: `<config dir>/../boards`
    /// (the repository's `boards/` for `config/baton.yaml`), then ``systemDirectory``. The first that
    /// exists is used.
    public static func searchDirectories(configDirectory: String) -> [String] {
        [BatonConfiguration.resolve("../boards", against: configDirectory), systemDirectory]
    }
}
