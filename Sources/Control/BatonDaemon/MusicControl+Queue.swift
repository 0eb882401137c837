import ControlParts
import Players
import Subsonic

/// The play queue of the newest music source from the server, seen and edited. An edit restarts
/// nothing that is playing unless it must: the streamer walks the queue by key, so changes beyond
/// the track being written into the rings take effect at the next joint; only an edit that removes
/// or moves the track heard now, or the one already written ahead of it (the last ~0.5 s of a
/// track), makes the source go on in fresh slots — at the sample heard, when that track is still
/// in the queue. Any thread.
extension MusicControl {
    /// The queue as the API shows it: the source, the songs, which one is heard.
    public struct QueueListing: Sendable {
        public var id: String
        public var songs: [Song]
        public var current: Int?
        /// True when the edit made the stream restart (it touched the track heard now).
        public var restarted: Bool
        /// The number of edits made to the queue (the status's `queueVersion`).
        public var version: Int
    }

    /// A change of the queue.
    public enum QueueOperation: Sendable, Equatable {
        /// Songs by id, at the end or right after the track heard now (`next`).
        case add(songs: [String], next: Bool)
        case remove(Int)
        case move(from: Int, to: Int)
        case clear
        /// Plays the track at this place from its start.
        case jump(Int)

        /// The place in the queue the edit names (`index`, or `from` for a move).
        var place: Int? {
            switch self {
            case .remove(let i), .jump(let i), .move(let i, _): i
            case .add, .clear: nil
            }
        }
    }

    /// The newest server music's queue.
    public func queue() throws(ControlError) -> QueueListing {
        try withNewest { p, music, _ in
            let queue = music.queue.versioned
            return QueueListing(
                id: p.id.rawValue, songs: queue.songs, current: music.nowPlaying()?.index ?? music.startIndex,
                restarted: false, version: queue.version)
        }
    }

    /// Edits the newest server music's queue, or source `id`'s; new songs are asked from the server
    /// first. `song`: the id of the song the client saw at the place the edit names (`index`,
    /// `from`): when another is there now (the queue changed since the client looked: another
    /// client's edit), nothing is done and it is a conflict.
    public func editQueue(_ operation: QueueOperation, id: String? = nil, expecting song: String? = nil)
        throws(ControlError) -> QueueListing
    {
        var added: [(song: Song, gain: Float)] = []
        if case .add(let ids, _) = operation {
            guard !ids.isEmpty else { throw ControlError(.badRequest, "songs: give at least one song id") }
            let music = try daemon.parts.music.context(daemon.config)
            let songs = try music.songs(MusicSelection(songs: ids))
            added = Array(zip(songs, music.server(for: songs).gains)).map { (song: $0.0, gain: $0.1) }
        }
        return try withNewest(hint: " (play something first)", id: id) { p, music, s throws(ControlError) in
            if let song, let place = operation.place, place >= 0 {
                let songs = music.songs
                if place >= songs.count {
                    throw ControlError(
                        .conflict,
                        "the queue changed: it has \(songs.count) tracks now, none at index \(place) (get the queue again)"
                    )
                }
                if songs[place].id != song {
                    throw ControlError(
                        .conflict,
                        "the queue changed: the track at index \(place) is \"\(songs[place].title)\" now, not song \(song) (get the queue again)"
                    )
                }
            }
            if case .add = operation { try Self.checkQueueLength(music.songs.count + added.count, adding: added.count) }
            var restarted = false
            var ended = false  // the queue played out (`.ends`): no track is current
            if case .jump(let index) = operation {
                guard index >= 0 && index < music.songs.count else {
                    throw ControlError(.badRequest, "index \(index) is not in the queue (0...\(music.songs.count - 1))")
                }
                restart(p, music, at: index, offset: 0, &s)
                restarted = true
            } else {
                let edit: MusicPlayer.QueueEdit
                switch operation {
                case .add(_, let next): edit = .add(added, next: next)
                case .remove(let i): edit = .remove(i)
                case .move(let from, let to): edit = .move(from: from, to: to)
                case .clear, .jump: edit = .clear
                }
                switch music.edit(edit) {
                case .failure(let problem): throw ControlError(.badRequest, problem.message)
                case .success(.playsOn): break
                case .success(.restart(let index, let offset)):
                    restart(p, music, at: index, offset: offset, &s)
                    restarted = true
                case .success(.ends):
                    // The last track, heard now, was removed: the stream goes on past the queue's
                    // end, finds nothing, and the source ends as a queue played to its end.
                    restart(p, music, at: nil, offset: 0, &s)
                    restarted = true
                    ended = true
                }
            }
            let queue = music.queue.versioned
            return QueueListing(
                id: p.id.rawValue, songs: queue.songs,
                current: ended ? nil : restarted ? music.startIndex : (music.nowPlaying()?.index ?? music.startIndex),
                restarted: restarted, version: queue.version)
        }
    }
}
