import AudioCore
import OSThread

/// One zone: a named ALSA output with its stream format and timing (`zones.<name>:` in the file).
public struct ZoneConfig: Sendable, Equatable {
    /// The sample format written to the device.
    public enum SampleFormat: String, Sendable, Equatable, CaseIterable, Codable {
        case s16LE = "S16_LE"
        case s32LE = "S32_LE"

        /// Bytes in one sample of one channel.
        public var bytesPerSample: Int {
            switch self {
            case .s16LE: 2
            case .s32LE: 4
            }
        }
    }

    /// What paces the zone's output thread.
    public enum Clock: String, Sendable, Equatable, CaseIterable, Codable {
        /// The device blocks until it has room: it paces the zone (real sound cards).
        case device
        /// Baton paces the zone from the system clock: for PCMs that never block (`file`, `null`).
        case system
    }

    /// The zone's name: `[a-z0-9_-]+`, used in URLs and MQTT topics.
    public var name: String
    /// The ALSA PCM name (`hw:CARD=sndrpihifiberry,DEV=0`, `baton_kitchen`).
    public var pcm: String
    /// Frames per second, 8000...384000. Default 48000.
    public var rate: Int
    /// The zone's own channels, 1...8. Default 2. For a zone that drives a list of device channels
    /// (`channels: [left]`) this is the length of the list.
    public var channels: Int
    /// The device channels the zone drives, in zone channel order: zone channel `i` plays on device
    /// channel `deviceChannels[i]` (ALSA order, see ``DeviceChannel``). `nil` when the zone owns the
    /// whole device and zone channel `i` is device channel `i`.
    public var deviceChannels: [Int]?
    /// The device's channel count (`device-channels`): `channels` for a whole-device zone; for a list
    /// zone the board's channels, else the highest listed index + 1, at least 2.
    public var deviceChannelCount: Int
    /// Sample format. Default S16_LE.
    public var format: SampleFormat
    /// The ALSA period: how much is written at a time. Default 10 ms.
    public var period: Duration
    /// The ALSA buffer, at least two periods. Default 40 ms.
    public var buffer: Duration
    /// What paces the output. Default `device`.
    public var clock: Clock
    /// Keep the whole `buffer` filled and take back what the device has not started playing when
    /// something changes (`render-ahead`, a `clock: device` zone only): the output wakes when 30 ms
    /// are left instead of once a period, and a request is still heard within about two periods.
    /// Default false.
    public var renderAhead: Bool
    /// Overrides `resampler.music` for this zone; `nil` (written `auto`) uses the global choice.
    public var resampler: ResamplerKind?
    /// The user volume the zone starts at, 0...1 (`volume: 80%` or `0.8`): the one written, else
    /// `maxVolume`. Setting it writes it (`configuredVolume`).
    public var volume: Double {
        get { configuredVolume ?? maxVolume }
        set { configuredVolume = newValue }
    }
    /// The `volume` written in the file; nil when it is not, and the zone starts at its cap. Kept
    /// apart from the cap it defaults to: a reload compares it to tell whether the configured
    /// volume changed. Read as the volume itself, a change of only `max-volume` changed it, and the
    /// reload dropped the volume the listener set (30 % back at a new cap of 100 %).
    public var configuredVolume: Double?
    /// The highest user volume the zone accepts, 0...1 (`max-volume`). Default 1 (no cap).
    public var maxVolume: Double

    /// Whether `volume` is at most `maxVolume`, within a Float's rounding: 0.6 as a Float is
    /// 0.6000000238, which refused a volume equal to `max-volume: 60%` (Home Assistant's slider at
    /// its top), and skipped one saved at max-volume at a restore.
    public func allows(volume: Double) -> Bool { volume <= maxVolume + 1e-6 }
    /// A saved user volume as the zone starts at it: within `maxVolume`; nil for one that is no
    /// volume (NaN, negative).
    public func start(atSaved volume: Double) -> Double? {
        volume.isFinite && volume >= 0 ? min(volume, maxVolume) : nil
    }
    /// The ALSA simple mixer control that sets the zone's hardware volume (`Digital`); `nil` means
    /// Baton applies the volume as a software gain.
    public var mixer: String?
    /// The board profile the zone's defaults came from (its own `board:` or the top-level one).
    public var board: String?
    /// Set for a zone heard on Snapcast speakers: its audio goes to this snapserver source instead
    /// of an ALSA PCM (`pcm` then holds the source, for display), paced by the system clock.
    public var snapcast: SnapcastConfig?

    /// Creates a zone; the defaults are those of the file format (`volume`: the one written, nil
    /// when not, and the zone starts at `maxVolume`).
    ///
    /// When `deviceChannels` is given, `channels` is its length (the `channels` argument is ignored)
    /// and `deviceChannelCount` defaults to the highest index + 1, at least 2; otherwise
    /// `deviceChannelCount` defaults to `channels`.
    public init(
        name: String, pcm: String, rate: Int = 48000, channels: Int = 2, format: SampleFormat = .s16LE,
        period: Duration = .milliseconds(10), buffer: Duration = .milliseconds(40),
        clock: Clock = .device, renderAhead: Bool = false, resampler: ResamplerKind? = nil,
        deviceChannels: [Int]? = nil,
        deviceChannelCount: Int? = nil, volume: Double? = nil, maxVolume: Double = 1, mixer: String? = nil,
        board: String? = nil, snapcast: SnapcastConfig? = nil
    ) {
        self.name = name
        self.pcm = pcm
        self.rate = rate
        self.channels = deviceChannels?.count ?? channels
        self.deviceChannels = deviceChannels
        self.deviceChannelCount =
            deviceChannelCount
            ?? deviceChannels.map { Self.defaultDeviceChannelCount(for: $0) } ?? channels
        self.format = format
        self.period = period
        self.buffer = buffer
        self.clock = clock
        self.renderAhead = renderAhead
        self.resampler = resampler
        self.configuredVolume = volume
        self.maxVolume = maxVolume
        self.mixer = mixer
        self.board = board
        self.snapcast = snapcast
    }

    /// The accepted sample rates.
    public static let rateRange = 8000...384_000
    /// The accepted channel counts.
    public static let channelRange = 1...8
    /// The accepted periods.
    public static let periodRange = Duration.milliseconds(1)...Duration.seconds(1)
    /// The accepted buffers (also at least two periods).
    public static let bufferRange = Duration.milliseconds(2)...Duration.seconds(10)

    /// The period in frames: `rate × period`, rounded to the nearest frame (441 for 10 ms at 44100 Hz).
    public var periodFrames: Int { Self.frames(period, rate: rate) }
    /// The buffer in frames: `rate × buffer`, rounded (1764 for 40 ms at 44100 Hz).
    public var bufferFrames: Int { Self.frames(buffer, rate: rate) }
    /// Bytes in one frame of the zone's own channels: channels × bytes per sample.
    public var bytesPerFrame: Int { channels * format.bytesPerSample }
    /// The device channel of each zone channel: `deviceChannels`, or `0..<channels` for a zone that
    /// owns its device.
    public var channelMap: [Int] { deviceChannels ?? Array(0..<channels) }
    /// True when the zone drives a list of channels of a device it may share with other zones.
    public var usesChannelList: Bool { deviceChannels != nil }

    /// The accepted volumes and volume caps.
    public static let volumeRange = 0.0...1.0

    /// The device channel count assumed for a channel list without `device-channels` or a board:
    /// the highest index + 1, at least 2 (a stereo device for `[left]`).
    static func defaultDeviceChannelCount(for channels: [Int]) -> Int {
        max((channels.max() ?? 0) + 1, 2)
    }

    /// True when `name` may be used as a zone name: non-empty, only `a-z`, `0-9`, `_` and `-`.
    public static func isValidName(_ name: String) -> Bool {
        !name.isEmpty
            && name.unicodeScalars.allSatisfy { scalar in
                ("a"..."z").contains(scalar) || ("0"..."9").contains(scalar) || scalar == "_" || scalar == "-"
            }
    }

    static func frames(_ duration: Duration, rate: Int) -> Int {
        let nanoseconds = duration.wholeNanoseconds
        return (nanoseconds * rate + 500_000_000) / 1_000_000_000
    }
}
