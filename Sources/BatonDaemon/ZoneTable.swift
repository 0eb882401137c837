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

    /// The device spec a zone's config asks for.
    static func deviceSpec(for zone: ZoneConfig) -> DeviceSpec {
        let request = PCMRequest(name: zone.pcm, rate: zone.rate, channels: zone.channels,
                                 format: SampleFormat(rawValue: zone.format.rawValue) ?? .s16LE,
                                 periodFrames: zone.periodFrames, bufferFrames: zone.bufferFrames)
        return DeviceSpec(zone: zone.name, pcm: request, clock: ZoneClock(rawValue: zone.clock.rawValue) ?? .device)
    }

    /// Builds the zones of `config`, one device per zone. Devices are created, not started.
    static func build(_ config: BatonConfiguration) -> ZoneTable {
        var zones: [ZoneHandle] = []
        var devices: [DeviceOutput] = []
        for zone in config.zones {
            let device = DeviceOutput(deviceSpec(for: zone))
            devices.append(device)
            zones.append(ZoneHandle(name: zone.name, config: zone, device: device, mixer: device.mixer))
        }
        return ZoneTable(zones: zones, devices: devices)
    }
}
