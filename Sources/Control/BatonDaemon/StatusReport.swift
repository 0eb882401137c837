import ControlParts

/// What `GET /api/v1/status` answers: every zone with its counters and who holds it, every source
/// with its true state. A plain value; any thread.
public struct StatusReport: Codable, Sendable, Equatable {
    public struct Zone: Codable, Sendable, Equatable {
        public var name: String
        public var pcm: String
        public var rate: Int
        public var channels: Int
        public var format: String
        public var clock: String
        /// `available`, `unavailable`, or `silent`: a source is heard here but the output stayed
        /// below −70 dBFS for longer than `silence-alarm`.
        public var state: String
        /// Why the zone is unavailable.
        public var error: String?
        public var periodFrames: Int
        public var bufferFrames: Int
        /// Frames written to the device since start.
        public var framesPlayed: Int
        /// The frame heard now (`framesPlayed` minus the device's delay).
        public var audibleFrame: Int
        public var delayFrames: Int
        public var xruns: Int
        public var suspends: Int
        public var lateCycles: Int
        public var reopens: Int
        /// Memory of the zone's slot rings the kernel holds, in bytes: a slot's ring is paged in when
        /// the slot is first used (one per source the zone mixes at once), and stays.
        public var ringBytes: Int
        /// A `clock: device` zone: the card's rate against CLOCK_MONOTONIC, in ppm from its nominal
        /// rate (positive: it plays fast), from what it consumed; absent until measured.
        public var rateEstimatePPM: Double?
        public var realtime: Bool
        /// A zone set to `render-ahead`: true while it renders ahead and takes back; false once its
        /// output found that the PCM cannot rewind (it then plays as without the setting). Absent
        /// on other zones.
        public var rendersAhead: Bool?
        /// The user's zone volume (linear 0...1) and the one the output thread applied last.
        public var volume: Double
        public var appliedVolume: Double
        /// The highest user volume the zone takes (its `max-volume`).
        public var maxVolume: Double
        /// `software` (Baton's gain stage), or `hardware: CONTROL on DEVICE` (an ALSA mixer control).
        public var volumeControl: String
        /// The final mix's level over the last period: what was written to the device.
        public var level: Level
        /// Sources heard here now (full level or ducked: their frames are in the mix at the frame
        /// heard now, at a gain above 0), highest priority first.
        public var audible: [String]
        public var ducked: [Ducked]
        /// Granted sources not heard here, and who silences them.
        public var silenced: [Silenced]
        /// Sources waiting for this zone.
        public var queued: [String]
        /// Each source's slot in this zone: the gain the output thread applied last.
        public var sources: [SlotGain]
        /// A Snapcast zone: its speakers and how its stream fares.
        public var snapcast: Snapcast?
    }

    public typealias Snapcast = SnapcastStatus

    /// Peak and RMS of one period, in dBFS (−200 for digital silence).
    public struct Level: Codable, Sendable, Equatable {
        public var peakDb: Double
        public var rmsDb: Double

        public init(peakDb: Double, rmsDb: Double) {
            self.peakDb = peakDb
            self.rmsDb = rmsDb
        }
    }

    public struct Ducked: Codable, Sendable, Equatable {
        public var source: String
        public var levelDb: Double
        public var by: String
    }

    public struct Silenced: Codable, Sendable, Equatable {
        public var source: String
        public var by: String
    }

    public struct SlotGain: Codable, Sendable, Equatable {
        public var source: String
        /// Linear gain applied at the end of the last period (user volume × duck × mute).
        public var gain: Double
        public var targetGain: Double
        /// True once a pause or interruption has faded it out and it stopped consuming frames.
        public var paused: Bool
        /// Frames of the source heard here so far (mixed, less what the device still holds).
        public var positionFrames: Int
        public var starvedPeriods: Int
    }

    public struct Source: Codable, Sendable, Equatable {
        public var id: String
        public var `class`: String
        public var sound: String
        public var loop: Bool
        public var volume: Double
        /// What is heard: `queued`, `starting` (granted, its first frame not heard yet), `playing`,
        /// `ducked`, `buffering` (its audio ran out before its end: the stream is late),
        /// `interrupted` or `paused`. `playing` and `ducked` only while its frames are heard.
        public var state: String
        /// `true` on a `queued` source the user paused while it waits: it will be granted paused
        /// (and play at the user's play). Absent otherwise.
        public var paused: Bool?
        public var zones: [String]
        public var skippedZones: [String]?
        public var interruptedBy: String?
        /// Position of the audible frame in the current sound or track.
        public var positionSeconds: Double?
        /// Music from the server: the track heard now, its place in the queue, the queue's length.
        public var track: Track?
        public var trackIndex: Int?
        public var queueLength: Int?
        /// Music from the server: the number of edits made to its queue (the `version` of
        /// `GET /api/v1/music/queue`): a client showing the queue sees another's move by it.
        public var queueVersion: Int?
        /// The stream is waiting for the server now (reconnecting after a failure); the message says
        /// why.
        public var buffering: String?
        /// Why the track heard now (or the last one, when nothing came after it) could not be
        /// played; gone once a later track is heard.
        public var streamError: String?
        /// An external player: the program writing to `baton_<name>`, its pid, and its control.
        public var program: String?
        public var pid: Int?
        public var format: String?
        public var control: String?
        public var controlError: String?
    }

    public struct Track: Codable, Sendable, Equatable {
        public var id: String
        public var title: String
        public var artist: String?
        public var album: String?
        public var durationSeconds: Int?
        /// The server's cover art id (`GET /api/v1/library/cover/<id>`).
        public var coverArt: String?
    }

    /// The music queue kept across restarts (`state-dir`): what `music/resume` plays when no music
    /// source exists.
    public struct SavedQueue: Codable, Sendable, Equatable {
        public var track: Track
        public var trackIndex: Int
        public var queueLength: Int
        public var positionSeconds: Double
        public var zones: [String]
        public var playing: Bool
    }

    public var zones: [Zone]
    public var sources: [Source]
    public var uptimeMs: Int
    /// This run of the daemon (``EventLog/run``): a new one at each start, when event ids begin
    /// again at 1.
    public var run: String
    public var savedQueue: SavedQueue?

    public typealias Intercom = IntercomStatus
    public var intercom: Intercom?

    /// The MQTT connection (when configured): `connecting`, `connected`, `disconnected` or `off`.
    public struct MQTT: Codable, Sendable, Equatable {
        public var broker: String
        public var topic: String?
        public var connection: String
        public var error: String?

        public init(broker: String, topic: String?, connection: String, error: String?) {
            self.broker = broker
            self.topic = topic
            self.connection = connection
            self.error = error
        }
    }
    public var mqtt: MQTT?

    /// A GPIO button: `listening` or `unavailable` (with the error; listening, the error is why its
    /// presses ring nothing), and its debounced presses.
    public struct Button: Codable, Sendable, Equatable {
        public var chip: String
        public var line: Int
        public var state: String
        public var error: String?
        public var presses: Int

        public init(chip: String, line: Int, state: String, error: String?, presses: Int) {
            self.chip = chip
            self.line = line
            self.state = state
            self.error = error
            self.presses = presses
        }
    }
    public var gpio: [Button]?
}
