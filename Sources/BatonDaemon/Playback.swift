import Arbiter
import Engine
import Intercom
import Subsonic

/// A source that plays samples held in memory on one or more zones: an announcement (a sound file,
/// played once) or local music (a sound file, possibly looped). Lives in the daemon's state, under
/// its lock; the slots it writes are read by the zones' output threads.
final class Playback {
    /// One zone's share: the samples at the zone's rate and channel count, and where feeding is.
    final class ZonePart {
        let zone: String
        let samples: [Float]
        let channels: Int
        var slot: SourceSlot?
        /// Next sample index to write into the slot's ring.
        var offset = 0
        /// How many times the samples were written in full (loops).
        var passes = 0
        init(zone: String, samples: [Float], channels: Int) {
            self.zone = zone
            self.samples = samples
            self.channels = channels
        }
    }

    let id: SourceID
    let sourceClass: SourceClass
    let sound: String
    let loop: Bool
    /// The user's volume for this source (linear, 0...1). The duck stage is separate.
    var volume: Float
    var parts: [ZonePart]
    /// Zones that were asked for but skipped because they were unavailable.
    var skipped: [String] = []
    /// Set once the arbiter granted it and slots were claimed.
    var started = false
    /// Set when every slot drained and the arbiter was told.
    var released = false
    /// Subsonic songs streamed into the slots (music from the server), or empty for a sound file.
    var songs: [Song] = []
    var startIndex = 0
    /// Where in the start track the streamer began (seconds): a seek or a restored queue.
    var startOffset: Double = 0
    /// The state and track last reported with OpenSubsonic `reportPlayback`.
    var reported: (state: SubsonicClient.PlaybackState, index: Int)?
    /// The streamer feeding the slots while songs play.
    var streamer: MusicStreamer?
    /// Scrobbling: the track last announced as now playing, and whether it was submitted.
    var scrobbledIndex: Int?
    var submitted = false
    /// The streamer's giving up was published as a `stream-error` event.
    var gaveUpReported = false
    /// An intercom call: live audio from `receiver`, fed by `pump` once granted.
    var isCall = false
    var receiver: RTPReceiver?
    var pump: IntercomPump?

    init(id: SourceID, sourceClass: SourceClass, sound: String, loop: Bool, volume: Float, parts: [ZonePart]) {
        self.id = id
        self.sourceClass = sourceClass
        self.sound = sound
        self.loop = loop
        self.volume = volume
        self.parts = parts
    }

    var zones: [String] { parts.map(\.zone) }

    /// Tops up every slot's ring from the samples; marks the end when a one-shot sound is all written.
    /// Control thread (under the daemon lock).
    func feed() {
        guard songs.isEmpty else { return }  // a streamer feeds its own slots
        for part in parts {
            guard let slot = part.slot, !part.samples.isEmpty else { continue }
            while true {
                if part.offset >= part.samples.count {
                    if loop { part.offset = 0; part.passes += 1 } else { break }
                }
                let wrote = part.samples[part.offset...].withUnsafeBufferPointer {
                    slot.ring.write($0.baseAddress!, count: $0.count)
                }
                part.offset += wrote
                if wrote == 0 { break }
            }
            if !loop && part.offset >= part.samples.count { slot.finish() }
        }
    }

    /// True when every claimed slot played its last frame.
    var drained: Bool {
        let slots = parts.compactMap(\.slot)
        return !slots.isEmpty && slots.allSatisfy(\.isDrained)
    }
}
