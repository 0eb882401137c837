import ALSA
import BatonConfig
import Engine

/// One configured zone as the daemon drives it: its device output and its mixer there.
/// Immutable; shared between threads.
final class ZoneHandle: Sendable {
    let name: String
    let config: ZoneConfig
    let device: DeviceOutput
    let mixer: ZoneMixer

    init(name: String, config: ZoneConfig, device: DeviceOutput, mixer: ZoneMixer) {
        self.name = name
        self.config = config
        self.device = device
        self.mixer = mixer
    }

    var rate: Int { device.spec.pcm.rate }
    var channels: Int { mixer.channels }
    var pcm: String { device.spec.pcm.name }
}

/// The zones and devices of one configuration. Replaced as a whole on reload; any thread reads it.
final class ZoneTable: Sendable {
    let zones: [ZoneHandle]
    let devices: [DeviceOutput]

    init(zones: [ZoneHandle], devices: [DeviceOutput]) {
        self.zones = zones
        self.devices = devices
    }

    func zone(_ name: String) -> ZoneHandle? { zones.first { $0.name == name } }
    var names: [String] { zones.map(\.name) }

    /// The device spec for one configured device and its zones: 10 ms ramps, 8 slots per zone,
    /// 500 ms rings, each zone starting at its configured volume.
    static func deviceSpec(for device: DeviceConfig, zones: [ZoneConfig]) -> DeviceSpec {
        let request = PCMRequest(name: device.pcm, rate: device.rate, channels: device.channels,
                                 format: SampleFormat(device.format),
                                 periodFrames: device.periodFrames, bufferFrames: device.bufferFrames)
        let specs = device.zones.map { z in
            ZoneSpec(name: z.name, deviceChannels: z.deviceChannels, rampFrames: max(1, device.rate / 100),
                     ringFrames: max(device.rate / 2, device.periodFrames * 4),
                     volume: Float(zones.first { $0.name == z.name }?.volume ?? 1))
        }
        if let snapcast = device.snapcast {
            return snapcastSpec(request, snapcast, zones: specs)
        }
        return DeviceSpec(pcm: request, clock: ZoneClock(device.clock), zones: specs)
    }

    /// A Snapcast zone's output: S16_LE into the stream source, paced by the system clock, heard one
    /// server buffer later; 20 ms of silence (one server chunk) after each connect.
    static func snapcastSpec(_ request: PCMRequest, _ snapcast: SnapcastConfig, zones: [ZoneSpec]) -> DeviceSpec {
        var pcm = request
        pcm.name = snapcast.source.description
        pcm.format = .s16LE
        pcm.bufferFrames = 4 * pcm.periodFrames  // a cycle this late counts as late
        let stream = StreamSpec(target: snapcast.source, latencyFrames: snapcast.bufferFrames(rate: pcm.rate),
                                prefillFrames: pcm.rate / 50)
        return DeviceSpec(pcm: pcm, clock: .system, zones: zones, stream: stream)
    }

    /// Builds the zones of `config`: one device output per PCM, carrying every zone on it.
    /// Devices are created, not started.
    static func build(_ config: BatonConfiguration) -> ZoneTable {
        var handles: [String: ZoneHandle] = [:]
        var devices: [DeviceOutput] = []
        for d in config.devices {
            let device = DeviceOutput(deviceSpec(for: d, zones: config.zones))
            devices.append(device)
            for z in d.zones {
                guard let zc = config.zone(named: z.name), let mixer = device.mixer(for: z.name) else { continue }
                handles[z.name] = ZoneHandle(name: z.name, config: zc, device: device, mixer: mixer)
            }
        }
        return ZoneTable(zones: config.zones.compactMap { handles[$0.name] }, devices: devices)
    }

    /// The zones of `new`, keeping every device of this table whose spec is identical (it plays on
    /// untouched): the table, the devices to stop, and the new devices to start.
    func rebuilt(for new: BatonConfiguration) -> (table: ZoneTable, stopped: [DeviceOutput], started: [DeviceOutput]) {
        let devices = ZoneTable.build(new).devices.map { device in self.devices.first { $0.spec == device.spec } ?? device }
        let handles = new.zones.compactMap { zone -> ZoneHandle? in
            guard let device = devices.first(where: { $0.mixer(for: zone.name) != nil }), let mixer = device.mixer(for: zone.name)
            else { return nil }
            return ZoneHandle(name: zone.name, config: zone, device: device, mixer: mixer)
        }
        let stopped = self.devices.filter { d in !devices.contains { $0 === d } }
        let started = devices.filter { d in !self.devices.contains { $0 === d } }
        return (ZoneTable(zones: handles, devices: devices), stopped, started)
    }
}
