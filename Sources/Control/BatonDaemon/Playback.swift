import Arbiter
import Engine
import Players

/// A source as the control plane holds it: what every kind shares — its id, class, zones and the
/// user's volume — and the source object that fills its slots. Lives in the daemon's state, under
/// its lock; the slots are read by the zones' output threads.
final class Playback {
    /// One zone's share: the slot claimed there once granted.
    final class ZonePart {
        let zone: String
        var slot: SourceSlot?
        init(zone: String) { self.zone = zone }
    }

    let id: SourceID
    let sourceClass: SourceClass
    let source: any Source
    /// The user's volume for this source (linear, 0...1). The duck stage is separate.
    var volume: Float
    var parts: [ZonePart]
    /// Zones that were asked for but skipped because they were unavailable.
    let skipped: [String]
    /// Set once the arbiter granted it and slots were claimed.
    var started = false
    /// Set when every slot drained and the arbiter was told.
    var released = false
    /// Whether the arbiter let it be heard at the last reconcile (nil before the first), and its
    /// state then.
    var audible: Bool?
    var arbiterState: SourceState?
    /// The state reported at the monitor's last look (`AudioTruth.swift`), and the zones it was
    /// heard in then (each zone that begins hearing it gets its `audible`).
    var reported: String?
    var heardZones: Set<String> = []
    /// Whether its frames were heard anywhere at the monitor's last look.
    var heard: Bool { !heardZones.isEmpty }
    /// Why it ends, when whoever ends it says (a call's `call ended: …` event, `finish`).
    var endReason: String?
    /// Since when it waits for a free slot in each of its zones, to start or (music) start again
    /// (`Daemon.slotsReady`); nil when it does not.
    var awaitingSlots: ContinuousClock.Instant?
    /// Music: since when it is held in zones that are all out — a Snapcast server or its speakers
    /// away, a card lost (`Daemon.followStreams`) — or since it was last let be heard while held;
    /// nil when not held. An announcement: since when its zones are all lost cards
    /// (`Daemon.endStaleAnnouncements`).
    var heldSince: ContinuousClock.Instant?
    /// Why it was granted but never started: no slot free in any of its zones. The monitor ends it.
    var noSlot: String?
    /// Started, or granted and waiting for a free slot to start (`awaitingSlots`): what status,
    /// music commands and a reload's resume take as under way.
    var isUnderway: Bool { started || awaitingSlots != nil }

    init(id: SourceID, sourceClass: SourceClass, source: any Source, volume: Float, zones: [String], skipped: [String])
    {
        self.id = id
        self.sourceClass = sourceClass
        self.source = source
        self.volume = volume
        parts = zones.map(ZonePart.init)
        self.skipped = skipped
    }

    var zones: [String] { parts.map(\.zone) }
    /// The server-music player, when this source is one.
    var music: MusicPlayer? { source as? MusicPlayer }
}
