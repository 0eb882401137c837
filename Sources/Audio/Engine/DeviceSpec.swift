import ALSA
import AudioCore

/// Who paces a zone.
public enum ZoneClock: String, Sendable {
    /// The device blocks in `snd_pcm_writei` when its buffer is full (a real sound card).
    case device
    /// Baton paces the zone period by period from CLOCK_MONOTONIC, for PCMs that never block
    /// (ALSA `null` and `file` PCMs, pipes).
    case system
}

/// One zone on a device: its name and which device channels it drives.
public struct ZoneSpec: Sendable, Equatable {
    public var name: String
    /// Device channel for each of the zone's channels (zone channel i → device channel `deviceChannels[i]`).
    public var deviceChannels: [Int]
    /// Frames a full 0↔1 gain change takes (click-free ramps).
    public var rampFrames: Int
    /// How many sources the zone can mix at once.
    public var slotCount: Int
    /// Each slot's ring, in frames.
    public var ringFrames: Int
    /// The zone's volume when it starts (linear).
    public var volume: Float

    public init(
        name: String, deviceChannels: [Int], rampFrames: Int, slotCount: Int = 8, ringFrames: Int, volume: Float = 1
    ) {
        self.name = name
        self.deviceChannels = deviceChannels
        self.rampFrames = rampFrames
        self.slotCount = slotCount
        self.ringFrames = ringFrames
        self.volume = volume
    }

    /// The zone's own channel count.
    public var channels: Int { deviceChannels.count }
}

/// Everything a device output needs to start: the PCM, who paces it, and its zones.
public struct DeviceSpec: Sendable, Equatable {
    /// The PCM; `pcm.channels` is the device's channel count.
    public var pcm: PCMRequest
    public var clock: ZoneClock
    /// SCHED_FIFO priority to ask for (0: do not ask).
    public var realtimePriority: Int32
    /// The zones, whose channel sets must not overlap.
    public var zones: [ZoneSpec]
    /// When set, the periods go to a Snapcast stream source instead of the ALSA PCM; `pcm` then
    /// gives only the format (S16_LE) and a display name, and the zone is paced by the system clock.
    public var stream: StreamSpec?
    /// Stop the PCM while every zone is idle for half a second — each slot free or paused (its
    /// fade over: `ZoneMixer.isIdle`): drain it and wait, costing nothing, until the doorbell
    /// rings (`DeviceOutput.wake()` for a new source, a resume) for something to play; then prepare
    /// it and play from the next period. A volume change rings it too, but is taken at once with
    /// nothing to ramp over: the PCM stays stopped.
    /// The zone's frame counter pauses meanwhile. Never for a stream output (snapserver is fed
    /// without a break).
    public var stopsWhenIdle: Bool
    /// Keep the device's whole buffer filled and wake only when it holds 30 ms, instead of once a
    /// period; when something changes (a new source, a gain, a pause, the volume), take back what
    /// the device has not started playing (`snd_pcm_rewind`, `ZoneMixer.rewind`) and render it
    /// again, so a request is heard as soon as with a short buffer. An ALSA zone only; with
    /// `clock: system` the device buffer is the output's own ``ClockedBuffer``.
    public var rendersAhead: Bool

    public init(
        pcm: PCMRequest, clock: ZoneClock, realtimePriority: Int32 = 70, zones: [ZoneSpec],
        stream: StreamSpec? = nil, stopsWhenIdle: Bool = false, rendersAhead: Bool = false
    ) {
        self.pcm = pcm
        self.rendersAhead = rendersAhead && stream == nil
        self.stopsWhenIdle = stopsWhenIdle && stream == nil
        self.clock = stream == nil ? clock : .system
        self.realtimePriority = realtimePriority
        self.zones = zones
        self.stream = stream
    }

    /// Whether a device made from this spec can play `wanted` as it is: the same in everything but
    /// its zones' slot rings, which are at least as long (a longer ring only holds more).
    public func serves(_ wanted: DeviceSpec) -> Bool {
        guard zones.count == wanted.zones.count,
            zip(zones, wanted.zones).allSatisfy({ $0.ringFrames >= $1.ringFrames })
        else { return false }
        var same = wanted
        for i in same.zones.indices { same.zones[i].ringFrames = zones[i].ringFrames }
        return same == self
    }

    /// A device with one zone that owns every channel: 10 ms ramps, 8 slots, 500 ms rings.
    public init(zone: String, pcm: PCMRequest, clock: ZoneClock, realtimePriority: Int32 = 70) {
        self.init(
            pcm: pcm, clock: clock, realtimePriority: realtimePriority,
            zones: [
                ZoneSpec(
                    name: zone, deviceChannels: Array(0..<pcm.channels), rampFrames: max(1, pcm.rate / 100),
                    ringFrames: max(pcm.rate / 2, pcm.periodFrames * 4))
            ])
    }
}
