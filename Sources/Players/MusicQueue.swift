import Subsonic
import Synchronization

/// A music source's queue: songs in play order, each with a key that stays with it when the queue
/// is edited, so the streamer (which walks the queue by key, asking for the entry after the one it
/// finished) and the player (which maps what is heard back to a place in the queue) keep their
/// place while entries are added, removed or moved around them. Any thread (its own lock).
public final class MusicQueue: Sendable {
    /// One song in the queue and its linear gain (ReplayGain; 1 when off or untagged).
    public struct Entry: Sendable, Equatable {
        public let key: Int
        public let song: Song
        public let gain: Float
    }

    /// `handedOut`: the key of the entry `streamEntry` last gave the current streamer (nil since
    /// `streamStarts`): an edit sees under this lock whether the streamer has already taken the
    /// entry after the one it was writing.
    /// `version`: the number of edits made (`edit`), which the status shows: a move that changes
    /// neither the queue's length nor the track heard changes it.
    private let state:
        Mutex<(entries: [Entry], nextKey: Int, endedAfter: Int?, stream: Int, handedOut: Int?, version: Int)>

    /// A queue of `songs`, with one gain per song.
    public init(songs: [Song], gains: [Float]) {
        precondition(songs.count == gains.count, "one gain per song")
        state = Mutex(
            (zip(songs, gains).enumerated().map { Entry(key: $0, song: $1.0, gain: $1.1) }, songs.count, nil, 0, nil, 0)
        )
    }

    public var entries: [Entry] { state.withLock { $0.entries } }
    public var songs: [Song] { entries.map(\.song) }
    public var count: Int { state.withLock { $0.entries.count } }
    /// The number of edits made (`edit`).
    public var version: Int { state.withLock { $0.version } }
    /// The songs and the number of edits made to them, in one look.
    public var versioned: (songs: [Song], version: Int) { state.withLock { ($0.entries.map(\.song), $0.version) } }

    /// The entry with `key`, if it is still in the queue.
    public func entry(key: Int) -> Entry? { state.withLock { s in s.entries.first { $0.key == key } } }

    /// The entry after the one with `key`; nil at the end, or when `key` is no longer in the queue.
    public func entry(after key: Int) -> Entry? {
        state.withLock { s in
            guard let i = s.entries.firstIndex(where: { $0.key == key }), i + 1 < s.entries.count else { return nil }
            return s.entries[i + 1]
        }
    }

    /// The streamer's step: the entry after the one with `key`, as `entry(after:)`; when there is
    /// none the streamer `stream` (`streamStarts`) ends there, which is noted under the same lock
    /// (`endedAfter`), so an edit that adds entries either comes before (and is streamed) or sees
    /// it (and restarts the stream). A streamer replaced meanwhile notes nothing.
    func streamEntry(after key: Int, stream: Int) -> Entry? {
        state.withLock { s in
            guard let i = s.entries.firstIndex(where: { $0.key == key }), i + 1 < s.entries.count else {
                if stream == s.stream { s.endedAfter = key }
                return nil
            }
            if stream == s.stream { s.handedOut = s.entries[i + 1].key }
            return s.entries[i + 1]
        }
    }

    /// The key after which the current streamer found nothing more and ended; nil while it goes on.
    public var endedAfter: Int? { state.withLock { $0.endedAfter } }

    /// A streamer begins: it has not ended anywhere yet. Its token for `streamEntry`.
    func streamStarts() -> Int {
        state.withLock { s in
            s.endedAfter = nil
            s.handedOut = nil
            s.stream += 1
            return s.stream
        }
    }

    /// The place of the entry with `key` (0-based), if it is still in the queue.
    public func index(of key: Int) -> Int? { state.withLock { s in s.entries.firstIndex { $0.key == key } } }

    /// Replaces the entries by what `edit` makes of them; new songs get fresh keys through `make`.
    /// Returns the key of the entry the streamer was last given (`streamEntry`) when the edit was
    /// made: the streamer may have taken it and not yet begun to write it.
    @discardableResult
    func edit(_ edit: (inout [Entry], (Song, Float) -> Entry) -> Void) -> Int? {
        state.withLock { s in
            var next = s.nextKey
            edit(&s.entries) { song, gain in
                defer { next += 1 }
                return Entry(key: next, song: song, gain: gain)
            }
            s.nextKey = next
            s.version += 1
            return s.handedOut
        }
    }
}
