/// One ALSA device as the daemon opens it: a PCM and the zones that play on it.
///
/// A zone that owns its device is the only zone on it. Zones that share a device (`channels:` lists on
/// the same `pcm`) agree on rate, format, period, buffer, clock and device channel count, and drive
/// disjoint channels; channels no zone drives play silence.
///
/// A plain value: safe to share between threads.
public struct DeviceConfig: Sendable, Equatable {
    /// One zone on the device.
    public struct Zone: Sendable, Equatable {
        /// The zone's name.
        public var name: String
        /// The device channel of each zone channel (`[0, 1]` for a stereo zone owning a stereo device).
        public var deviceChannels: [Int]

        /// Creates a zone entry.
        public init(name: String, deviceChannels: [Int]) {
            self.name = name
            self.deviceChannels = deviceChannels
        }
    }

    /// The ALSA PCM name.
    public var pcm: String
    public var rate: Int
    public var format: ZoneConfig.SampleFormat
    public var period: Duration
    public var buffer: Duration
    public var clock: ZoneConfig.Clock
    /// Render ahead and take back (`ZoneConfig.renderAhead`).
    public var renderAhead: Bool
    /// The device's channel count: every frame written has this many samples.
    public var channels: Int
    /// The zones on the device, in file order.
    public var zones: [Zone]
    /// For a Snapcast zone's "device" (its one zone): the stream it writes into instead of a PCM.
    public var snapcast: SnapcastConfig?

    /// Creates a device.
    public init(
        pcm: String, rate: Int, format: ZoneConfig.SampleFormat, period: Duration, buffer: Duration,
        clock: ZoneConfig.Clock, renderAhead: Bool = false, channels: Int, zones: [Zone],
        snapcast: SnapcastConfig? = nil
    ) {
        self.renderAhead = renderAhead
        self.pcm = pcm
        self.rate = rate
        self.format = format
        self.period = period
        self.buffer = buffer
        self.clock = clock
        self.channels = channels
        self.zones = zones
        self.snapcast = snapcast
    }

    /// The period in frames, rounded to the nearest frame.
    public var periodFrames: Int { ZoneConfig.frames(period, rate: rate) }
    /// The buffer in frames, rounded to the nearest frame.
    public var bufferFrames: Int { ZoneConfig.frames(buffer, rate: rate) }
    /// Bytes in one device frame: channels × bytes per sample.
    public var bytesPerFrame: Int { channels * format.bytesPerSample }
}

extension BatonConfiguration {
    /// The devices to open, one per distinct `pcm`, in the order their first zone appears.
    ///
    /// For a loaded configuration the zones on one device agree on every device setting (the loader
    /// checks it); the device takes them from its first zone.
    public var devices: [DeviceConfig] {
        var devices: [DeviceConfig] = []
        var index: [String: Int] = [:]
        for zone in zones {
            let entry = DeviceConfig.Zone(name: zone.name, deviceChannels: zone.channelMap)
            if let position = index[zone.pcm] {
                devices[position].zones.append(entry)
            } else {
                index[zone.pcm] = devices.count
                devices.append(
                    DeviceConfig(
                        pcm: zone.pcm, rate: zone.rate, format: zone.format, period: zone.period,
                        buffer: zone.buffer, clock: zone.clock, renderAhead: zone.renderAhead,
                        channels: zone.deviceChannelCount,
                        zones: [entry], snapcast: zone.snapcast))
            }
        }
        return devices
    }
}
