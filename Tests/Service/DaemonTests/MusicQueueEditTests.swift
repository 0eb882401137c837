import BatonTesting
import Subsonic
import Testing

@testable import Players

/// The queue's side of an edit racing the streamer's step to the next track: the streamer takes
/// the entry after the one it wrote (`streamEntry`) and only then begins to write it, so an edit
/// that looked at what the streamer writes just before could remove or move the entry already
/// taken, play on, and have it heard anyway. The edit sees, under the queue's lock, which entry
/// the streamer was last given.
@Suite(.ownThread) struct MusicQueueEditTests {
    static func queue(_ count: Int) -> MusicQueue {
        MusicQueue(
            songs: (0..<count).map { Song(id: "s\($0)", title: "Song \($0)") },
            gains: Array(repeating: 1, count: count))
    }

    /// An edit made after the streamer took the next entry returns that entry's key; one made
    /// before returns the one taken before; a new streamer has taken none.
    @Test func anEditSeesTheEntryTheStreamerTook() {
        let q = Self.queue(4)
        let stream = q.streamStarts()
        #expect(q.edit { _, _ in } == nil, "nothing taken yet: the streamer writes its first entry")
        let second = q.streamEntry(after: 0, stream: stream)
        #expect(second?.key == 1)
        // The streamer has the second entry and has not begun writing it: the edit must know.
        #expect(q.edit { entries, _ in entries.remove(at: 2) } == 1)
        #expect(q.streamEntry(after: 1, stream: stream)?.key == 3, "it goes on in the edited queue")
        #expect(q.edit { _, _ in } == 3)
        // A streamer of an older stream takes nothing for the current one.
        let newer = q.streamStarts()
        #expect(q.edit { _, _ in } == nil)
        _ = q.streamEntry(after: 0, stream: stream)
        #expect(q.edit { _, _ in } == nil, "an old streamer's step is not the current one's")
        #expect(q.streamEntry(after: 0, stream: newer)?.key == 1)
        #expect(q.edit { _, _ in } == 1)
    }

    /// The player's edit, when the streamer has taken the next entry and not yet begun writing it:
    /// removing that entry breaks what is being streamed, so the stream restarts (without the
    /// entry); before, the edit looked only at what was being written and played on — the removed
    /// song was heard.
    @Test func removingTheEntryTheStreamerTookRestartsTheStream() {
        let songs = (0..<4).map { Song(id: "s\($0)", title: "Song \($0)") }
        let client = SubsonicClient(
            config: SubsonicSettings(url: "http://127.0.0.1:9", user: "baton", password: "unused"))
        let player = MusicPlayer(
            songs: songs,
            server: MusicPlayer.Server(
                client: client, retryLimit: .seconds(1), gains: [1, 1, 1, 1], submissions: Submissions()),
            report: { _ in })
        let stream = player.queue.streamStarts()
        #expect(player.queue.streamEntry(after: 0, stream: stream)?.key == 1)
        guard case .success(let outcome) = player.edit(.remove(1)) else {
            Issue.record("the edit was refused")
            return
        }
        #expect(outcome == .restart(index: 0, offset: 0))
        #expect(player.queue.songs.map(\.id) == ["s0", "s2", "s3"])
        // An entry the streamer has not reached: the stream plays on.
        guard case .success(let later) = player.edit(.remove(2)) else {
            Issue.record("the edit was refused")
            return
        }
        #expect(later == .playsOn)
    }

    /// An edit that restarts the stream before anything of its track was heard (a stream starting
    /// at a resumed position, a seek waiting for slots) restarts it where it was to start: it
    /// restarted the track from its beginning, the seek lost.
    @Test func aRestartBeforeAnythingWasHeardKeepsWhereItWasToStart() {
        let songs = (0..<4).map { Song(id: "s\($0)", title: "Song \($0)") }
        let client = SubsonicClient(
            config: SubsonicSettings(url: "http://127.0.0.1:9", user: "baton", password: "unused"))
        let player = MusicPlayer(
            songs: songs, index: 1, offset: 42.5,
            server: MusicPlayer.Server(
                client: client, retryLimit: .seconds(1), gains: [1, 1, 1, 1], submissions: Submissions()),
            report: { _ in })
        let stream = player.queue.streamStarts()
        #expect(player.queue.streamEntry(after: 1, stream: stream)?.key == 2)
        guard case .success(let outcome) = player.edit(.remove(2)) else {
            Issue.record("the edit was refused")
            return
        }
        #expect(outcome == .restart(index: 1, offset: 42.5))
    }
}
