import BatonConfig
import BatonTesting
import Testing

/// Two mono zones on the two channels of one stereo device.
private let sharedAmp = """
    zones:
      kitchen: {pcm: amp, channels: [left]}
      patio: {pcm: amp, channels: [right]}

    """

@Suite(.ownThread) struct ConfigDeviceTests {
    /// Zones listing channels of one PCM form one device, in file order, each zone a mono zone.
    @Test func groupsZonesSharingAPCMIntoOneDevice() throws {
        let configuration = try load(sharedAmp)
        #expect(
            configuration.devices == [
                DeviceConfig(
                    pcm: "amp", rate: 48000, format: .s16LE, period: .milliseconds(10), buffer: .milliseconds(40),
                    clock: .device, channels: 2,
                    zones: [.init(name: "kitchen", deviceChannels: [0]), .init(name: "patio", deviceChannels: [1])])
            ])
        let kitchen = try #require(configuration.zone(named: "kitchen"))
        #expect(kitchen.channels == 1 && kitchen.deviceChannels == [0] && kitchen.deviceChannelCount == 2)
        #expect(kitchen.bytesPerFrame == 2 && configuration.devices[0].bytesPerFrame == 4)
    }

    /// Zones that own their devices are each a device of their own, channel i on device channel i.
    @Test func makesOneDevicePerWholeDeviceZone() throws {
        let configuration = try load(minimalZone + "  patio:\n    pcm: baton_patio\n    channels: 1\n")
        #expect(configuration.devices.map(\.pcm) == ["baton_kitchen", "baton_patio"])
        #expect(
            configuration.devices.map(\.zones) == [
                [.init(name: "kitchen", deviceChannels: [0, 1])],
                [.init(name: "patio", deviceChannels: [0])],
            ])
        #expect(configuration.devices.map(\.channels) == [2, 1])
        #expect(configuration.zones.map(\.deviceChannels) == [nil, nil])
    }

    /// Channel names follow ALSA's 7.1 order; the device count defaults to the highest index + 1, at least 2.
    @Test(arguments: [
        ("[left]", [0], 2),
        ("[right, left]", [1, 0], 2),
        ("[rear-left, rear-right]", [2, 3], 4),
        ("[center, lfe]", [4, 5], 6),
        ("[side-left, side-right]", [6, 7], 8),
        ("[0, 7]", [0, 7], 8),
        ("[1]", [1], 2),
    ])
    func readsChannelList(list: String, channels: [Int], deviceCount: Int) throws {
        let zone = try load(minimalZone + "    channels: \(list)\n").zones[0]
        #expect(zone.deviceChannels == channels)
        #expect(zone.channels == channels.count)
        #expect(zone.deviceChannelCount == deviceCount)
        #expect(zone.channelMap == channels)
    }

    /// device-channels sets the device's count for a channel list.
    @Test func readsDeviceChannels() throws {
        let zone = try load(minimalZone + "    channels: [left]\n    device-channels: 8\n").zones[0]
        #expect(zone.deviceChannelCount == 8 && zone.channels == 1)
    }

    /// The names and indices are the ALSA channel positions 0...7.
    @Test func namesChannelsInALSAOrder() {
        #expect(
            DeviceChannel.allCases.map(\.name) == [
                "left", "right", "rear-left", "rear-right", "center", "lfe",
                "side-left", "side-right",
            ])
        #expect(DeviceChannel.allCases.map(\.rawValue) == Array(0...7))
        #expect(DeviceChannel(name: "lfe") == .lfe && DeviceChannel(name: "LFE") == nil)
    }

    /// Bad channel lists and device counts each give one exact message.
    @Test(arguments: [
        ("    channels: []\n", "test.yaml:4:15: zones.kitchen.channels: at least one channel is required"),
        (
            "    channels: [left, middle]\n",
            #"test.yaml:4:22: zones.kitchen.channels: "middle" is not a channel (expected 0...7 or left, right, rear-left, rear-right, center, lfe, side-left, side-right)"#
        ),
        ("    channels: [8]\n", "test.yaml:4:16: zones.kitchen.channels: 8 is out of range (expected 0...7)"),
        ("    channels: [left, left]\n", "test.yaml:4:22: zones.kitchen.channels: channel 0 (left) is listed twice"),
        (
            "    channels: {a: 1}\n",
            "test.yaml:4:15: zones.kitchen.channels: expected an integer or a list of channels, found a mapping"
        ),
        ("    channels: [[0]]\n", "test.yaml:4:16: zones.kitchen.channels: expected a channel, found a sequence"),
        (
            "    channels: [center]\n    device-channels: 2\n",
            "test.yaml:4:15: zones.kitchen.channels: channel 4 (center) does not exist on a 2-channel device (expected 0...1)"
        ),
        (
            "    channels: 2\n    device-channels: 8\n",
            "test.yaml:5:22: zones.kitchen.device-channels: 8 differs from channels 2: a zone that owns its device drives all its channels (to drive some, list them, e.g. channels: [left])"
        ),
        (
            "    device-channels: 9\n",
            "test.yaml:4:22: zones.kitchen.device-channels: 9 is out of range (expected 1...8)"
        ),
    ])
    func reportsBadChannels(snippet: String, expected: String) {
        #expect(issueLines(minimalZone + snippet) == [expected])
    }

    /// A zone that takes a whole device another zone uses is told to list its channels, naming both.
    @Test func requiresChannelListsOnASharedDevice() {
        #expect(
            issueLines("zones:\n  kitchen: {pcm: amp, channels: [left]}\n  patio: {pcm: amp, channels: 2}\n") == [
                #"test.yaml:3:31: zones.patio.channels: device "amp" is shared with zone "kitchen", so this zone must list the device channels it drives (e.g. channels: [left]) instead of a count"#
            ])
        // Without a channels key the message points at the zone.
        #expect(
            issueLines("zones:\n  kitchen: {pcm: amp}\n  patio: {pcm: amp, channels: [right]}\n") == [
                #"test.yaml:2:3: zones.kitchen.channels: device "amp" is shared with zone "patio", so this zone must list the device channels it drives (e.g. channels: [left]) instead of a count"#
            ])
    }

    /// Two zones driving the same device channel: the later one is reported, naming the earlier.
    @Test func rejectsOverlappingChannels() {
        #expect(
            issueLines(
                "zones:\n  kitchen: {pcm: amp, channels: [left, right]}\n  patio: {pcm: amp, channels: [right]}\n") == [
                    #"test.yaml:3:31: zones.patio.channels: device channel 1 (right) of "amp" is also driven by zone "kitchen""#
                ])
    }

    /// Zones on one device must agree on every device setting; the message names the key and both zones.
    @Test(arguments: [
        ("rate: 44100", #"44100 differs from zone "kitchen" (48000); zones on device "amp" must agree on rate"#),
        ("format: S32_LE", #"S32_LE differs from zone "kitchen" (S16_LE); zones on device "amp" must agree on format"#),
        ("period: 5ms", #"5ms differs from zone "kitchen" (10ms); zones on device "amp" must agree on period"#),
        ("buffer: 80ms", #"80ms differs from zone "kitchen" (40ms); zones on device "amp" must agree on buffer"#),
        ("clock: system", #"system differs from zone "kitchen" (device); zones on device "amp" must agree on clock"#),
        (
            "render-ahead: true",
            #"true differs from zone "kitchen" (false); zones on device "amp" must agree on render-ahead"#
        ),
        (
            "device-channels: 4",
            #"4 differs from zone "kitchen" (2); zones on device "amp" must agree on device-channels"#
        ),
    ])
    func requiresAgreementOnASharedDevice(setting: String, message: String) {
        let key = setting.prefix { $0 != ":" }
        let column = 40 + key.count + 2  // "  patio: {pcm: amp, channels: [right], " is 39 characters
        let text =
            "zones:\n  kitchen: {pcm: amp, channels: [left]}\n  patio: {pcm: amp, channels: [right], \(setting)}\n"
        #expect(issueLines(text) == ["test.yaml:3:\(column): zones.patio.\(key): \(message)"])
    }

    /// `render-ahead` reaches the device the daemon opens, with either clock, and is refused where
    /// nothing can be taken back: a Snapcast zone.
    @Test func renderAheadReachesTheDeviceButNotSnapcast() throws {
        let ahead = try load("zones:\n  kitchen: {pcm: amp, buffer: 120ms, render-ahead: true}\n")
        #expect(ahead.zones[0].renderAhead && ahead.devices[0].renderAhead)
        #expect(try load("zones:\n  kitchen: {pcm: amp}\n").devices[0].renderAhead == false)
        let system = try load("zones:\n  kitchen: {pcm: \"null\", clock: system, buffer: 120ms, render-ahead: true}\n")
        #expect(system.devices[0].renderAhead && system.devices[0].clock == .system)
        let snapcast =
            "zones:\n  house:\n    render-ahead: true\n    snapcast: {source: \"tcp://127.0.0.1:4953\"}\n"
        #expect(
            issueLines(snapcast) == [
                "test.yaml:3:5: zones.house.render-ahead: not used by a Snapcast zone (snapserver reads its stream "
                    + "in real time: nothing can be taken back)"
            ])
    }

    /// A zone may not be called `all`: every zone list reads it as every zone, as for groups.
    @Test func refusesAZoneNamedAll() {
        #expect(
            issueLines("zones:\n  kitchen: {pcm: a}\n  all: {pcm: b}\n") == [
                #"test.yaml:3:3: zones.all: "all" is reserved: it always means every zone"#
            ])
    }

    /// A hardware mixer written on a zone that shares its device is refused: it would set every
    /// zone's volume on that card.
    @Test func refusesAMixerOnASharedDevice() {
        let text =
            "zones:\n  kitchen: {pcm: amp, channels: [left], mixer: Digital}\n  patio: {pcm: amp, channels: [right]}\n"
        #expect(
            issueLines(text) == [
                #"test.yaml:2:48: zones.kitchen.mixer: device "amp" is shared with other zones, and mixer "Digital" would set the volume of all of them (use software gain: remove mixer, or write mixer: none)"#
            ])
    }

    /// A zone whose own value is already reported is not also reported as disagreeing with its device.
    @Test func skipsDeviceChecksForZonesWithErrors() {
        let text = "zones:\n  kitchen: {pcm: amp, channels: [left]}\n  patio: {pcm: amp, channels: [right], rate: 1}\n"
        #expect(
            issueLines(text) == [
                "test.yaml:3:46: zones.patio.rate: 1 is out of range (expected 8000...384000)"
            ])
    }

    /// The shipped shared-amp example: two mono zones on one HiFiBerry, and groups.
    @Test func readsSharedAmpExample() throws {
        let configuration = try BatonConfiguration.load(path: repositoryRoot + "/config/examples/shared-amp.yaml")
        let device = try #require(configuration.devices.first)
        #expect(configuration.devices.count == 1)
        #expect(device.pcm == "hw:CARD=sndrpihifiberry,DEV=0" && device.channels == 2 && device.format == .s32LE)
        #expect(
            device.zones == [.init(name: "kitchen", deviceChannels: [0]), .init(name: "patio", deviceChannels: [1])])
        #expect(try configuration.expand(["ground-floor"]) == ["kitchen", "patio"])
    }
}
