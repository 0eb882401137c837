import Arbiter
import ControlParts
import Engine
import Players
import Subsonic

// How the status report is made from the running parts (see `Daemon.status()`).

extension StatusReport.Zone {
    init(
        _ handle: ZoneHandle, _ z: ZoneStatus, heard: [String], silent: Bool, error: String, volume: Double,
        volumeControl: String, slots: [(source: String, slot: SourceSlot)], snapcast: StatusReport.Snapcast?
    ) {
        let output = handle.device
        let snap = output.snapshot()
        let level = handle.mixer.meter.level
        self.init(
            name: handle.name, pcm: output.spec.pcm.name, rate: output.spec.pcm.rate, channels: handle.channels,
            format: output.spec.pcm.format.rawValue, clock: output.spec.clock.rawValue,
            state: !snap.available ? "unavailable" : silent ? "silent" : "available",
            error: snap.available ? nil : error,
            periodFrames: output.spec.pcm.periodFrames, bufferFrames: snap.bufferFrames,
            framesPlayed: snap.framesPlayed, audibleFrame: snap.audibleFrame, delayFrames: snap.delayFrames,
            xruns: snap.xruns, suspends: snap.suspends, lateCycles: snap.lateCycles, reopens: snap.reopens,
            ringBytes: handle.mixer.residentRingBytes,
            rateEstimatePPM: snap.rateEstimatePPM.map { ($0 * 10).rounded() / 10 }, realtime: snap.realtime,
            rendersAhead: output.spec.rendersAhead ? snap.rendersAhead : nil,
            volume: volume, appliedVolume: Double(handle.mixer.appliedVolume), maxVolume: handle.config.maxVolume,
            volumeControl: volumeControl, level: .init(peakDb: level.peakDb, rmsDb: level.rmsDb), audible: heard,
            ducked: z.ducked.map {
                .init(source: $0.source.rawValue, levelDb: $0.level.value, by: $0.by.source.rawValue)
            },
            silenced: z.silenced.map { .init(source: $0.source.rawValue, by: $0.by.source.rawValue) },
            queued: z.queued.map(\.rawValue),
            sources: slots.map { source, slot in
                .init(
                    source: source, gain: Double(slot.appliedGain), targetGain: Double(slot.targetGain),
                    paused: slot.isPaused,
                    positionFrames: slot.framesHeard(atZoneFrame: output.heardFrame),
                    starvedPeriods: slot.starvedPeriods)
            },
            snapcast: snapcast)
    }
}

extension StatusReport.Source {
    /// A source as the arbiter sees it (`st`) and as it plays (`p`): what is heard now.
    /// `pausedWhileQueued`: queued, with the user's pause on it.
    init(_ p: Playback, _ st: SourceStatus, state: String, pausedWhileQueued: Bool = false) {
        let music = p.music
        // One look for music's track and its position: two could straddle a track's start, and
        // the report show the new track at the old one's end.
        let now = music?.nowPlaying()
        let progress = music?.progress
        self.init(
            id: p.id.rawValue, class: p.sourceClass.rawValue, sound: now?.song.title ?? p.source.label,
            loop: (p.source as? SoundPlayer)?.loop ?? false,
            volume: Double(p.volume), state: state, zones: p.zones,
            skippedZones: p.skipped.isEmpty ? nil : p.skipped,
            interruptedBy: st.interruptedBy?.source.rawValue,
            positionSeconds: music == nil ? p.source.position : now?.seconds,
            track: now.map { StatusReport.Track($0.song) }, trackIndex: now?.index, queueLength: music?.songs.count,
            buffering: progress?.retrying, streamError: progress?.error)
        if pausedWhileQueued && st.state == .queued { paused = true }
        queueVersion = music?.queue.version
        if let external = p.source as? ExternalPlayer {
            let peer = external.peer
            program = peer.program
            pid = peer.pid
            format = external.format
            control = external.settings.control?.description
            controlError = external.settings.control?.lastError
        }
    }
}

extension StatusReport.Track {
    init(_ song: Song) {
        self.init(
            id: song.id, title: song.title, artist: song.artist, album: song.album, durationSeconds: song.duration,
            coverArt: song.coverArt)
    }
}

extension StatusReport.SavedQueue {
    /// The saved queue for the status report; nil when its track index is out of range.
    init?(_ q: SavedQueue) {
        guard q.index < q.songs.count else { return nil }
        self.init(
            track: StatusReport.Track(q.songs[q.index]), trackIndex: q.index, queueLength: q.songs.count,
            positionSeconds: q.position, zones: q.zones, playing: q.playing)
    }
}
