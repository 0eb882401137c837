import BatonTesting
import Glibc
import OSThread
import Subsonic
import Synchronization
import Testing

@testable import ControlParts

/// How often the state file is written while music plays: the position moves on every second,
/// and the monitor's save each second rewrote state.json (a temporary file, fsync, a rename) as
/// often — 3,600 writes an hour of music on a speaker's SD card. On a clock the test moves.
@Suite(.ownThread) struct StateWriteTests {
    final class Clock: Sendable {
        let now = Mutex(1_000_000_000)
        func advance(seconds: Int) { now.withLock { $0 += seconds * 1_000_000_000 } }
    }

    /// A started persistence on `clock`, its store in a fresh directory named `name` (`prepare`d
    /// first), and that directory.
    static func persistence(
        _ name: String, _ clock: Clock, prepare: (String) -> Void = { _ in }
    ) -> (Persistence, StateStore, String) {
        let dir = TestDirectory.make(name)
        prepare(dir)
        let store = StateStore(directory: dir)
        let persistence = Persistence(
            store: store, logger: Logger(minimum: .error), events: EventLog(), clock: { clock.now.withLock { $0 } })
        persistence.startWriter()
        return (persistence, store, dir)
    }

    static func state(_ position: Double, volume: Double = 0.5, playing: Bool = true, songs: Int = 1) -> SavedState {
        let all = (1...songs).map { Song(id: "s\($0)", title: "Steps \($0)", duration: 600) }
        let queue = SavedQueue(
            songs: all, index: 0, position: position, zones: ["kitchen"], volume: 1, playing: playing)
        return SavedState(volumes: ["kitchen": volume], queue: queue)
    }

    /// What the file holds now; nil when it cannot be read (or holds nothing).
    static func onDisk(_ store: StateStore) -> SavedState? {
        if case .success(let s) = store.load() { s } else { nil }
    }

    /// Offers `state` to `persistence` one second after the last offer: whether a write was asked
    /// for it, and the position handed back for the server's mirror (nil: none, unchanged).
    static func offer(_ state: SavedState, to persistence: Persistence, _ clock: Clock) -> (
        asked: Bool, handed: Double?
    ) {
        clock.advance(seconds: 1)
        let asked = persistence.writesAsked
        let handed = persistence.offer(state)??.position
        return (persistence.writesAsked > asked, handed)
    }

    /// A change of the position alone as music plays on is written at most every 30 s; any other
    /// change at once: a volume, a pause, a seek (back, or further than could have played, or
    /// while paused); the stop's save always. Every change is still handed back for the server's
    /// mirror, which paces itself.
    @Test func thePositionAloneIsWrittenAtMostEveryThirtySeconds() throws {
        let clock = Clock()
        let (persistence, store, _) = Self.persistence("state-writes", clock)
        defer { persistence.stopWriter() }
        func written(_ expected: SavedState) -> Bool { waitUntil(seconds: 5) { Self.onDisk(store) == expected } }
        func offer(_ state: SavedState, changed: Bool = true) -> Bool {
            let (asked, handed) = Self.offer(state, to: persistence, clock)
            #expect(handed == (changed ? state.queue?.position : nil), "handed back for the mirror when changed")
            return asked
        }

        #expect(offer(Self.state(1)), "the first state is written")
        #expect(written(Self.state(1)))
        for second in 2...30 { #expect(!offer(Self.state(Double(second))), "at \(second) s: played on") }
        #expect(offer(Self.state(31)), "30 s after the last write")
        #expect(written(Self.state(31)))
        #expect(offer(Self.state(32, volume: 0.7)), "a volume is written at once")
        #expect(written(Self.state(32, volume: 0.7)))
        for second in 33...40 { #expect(!offer(Self.state(Double(second), volume: 0.7)), "at \(second) s: played on") }
        #expect(offer(Self.state(35, volume: 0.7)), "a seek back still ahead of the place written, at once")
        #expect(written(Self.state(35, volume: 0.7)))
        #expect(offer(Self.state(10, volume: 0.7)), "a seek back at once")
        #expect(written(Self.state(10, volume: 0.7)))
        #expect(offer(Self.state(60, volume: 0.7)), "a seek further than could have played, at once")
        #expect(written(Self.state(60, volume: 0.7)))
        #expect(offer(Self.state(61, volume: 0.7, playing: false)), "a pause at once")
        #expect(written(Self.state(61, volume: 0.7, playing: false)))
        #expect(offer(Self.state(90, volume: 0.7, playing: false)), "a seek while paused at once")
        #expect(written(Self.state(90, volume: 0.7, playing: false)))
        #expect(!offer(Self.state(90, volume: 0.7, playing: false), changed: false), "nothing changed")
        // The stop writes where it is.
        _ = persistence.saveLast(Self.state(95, volume: 0.7, playing: false))
        #expect(written(Self.state(95, volume: 0.7, playing: false)))
    }

    /// With a queue of 2,000 songs (a playlist; the whole file, about 0.9 MB, is written each time)
    /// the position alone is written every 2 minutes, not 30 s: 4 × 30 s for four times 500 songs.
    /// A change of another kind is still written at once.
    @Test func aLongQueuesPositionIsWrittenLessOften() throws {
        let clock = Clock()
        let (persistence, store, _) = Self.persistence("state-writes-long", clock)
        defer { persistence.stopWriter() }
        func onDisk() -> SavedState? { Self.onDisk(store) }
        func offer(_ state: SavedState) -> Bool { Self.offer(state, to: persistence, clock).asked }
        // (Each answer in a Bool of its own: a failed expectation prints its operands, 2,000 songs.)
        let first = offer(Self.state(1, songs: 2_000))
        #expect(first, "the first state is written")
        let firstWritten = waitUntil(seconds: 5) { onDisk() == Self.state(1, songs: 2_000) }
        #expect(firstWritten)
        for second in 2...120 {
            let asked = offer(Self.state(Double(second), songs: 2_000))
            #expect(!asked, "at \(second) s: played on")
        }
        let after = offer(Self.state(121, songs: 2_000))
        #expect(after, "2 minutes after the last write")
        let positionWritten = waitUntil(seconds: 5) { onDisk() == Self.state(121, songs: 2_000) }
        #expect(positionWritten)
        let volume = offer(Self.state(122, volume: 0.7, songs: 2_000))
        #expect(volume, "a volume at once")
        let volumeWritten = waitUntil(seconds: 5) { onDisk() == Self.state(122, volume: 0.7, songs: 2_000) }
        #expect(volumeWritten)
        // A Snapcast speaker set, or seen gone (Wi-Fi that comes and goes), waits with the position.
        var speakers = Self.state(123, volume: 0.7, songs: 2_000)
        speakers.speakerVolumes = ["upstairs": ["pi1": 70]]
        let setWaits = !offer(speakers)
        #expect(setWaits, "a speaker set waits")
        speakers.queue?.position = 124
        speakers.speakerVolumes = [:]
        let goneWaits = !offer(speakers)
        #expect(goneWaits, "and so does one seen gone")
    }

    /// A write that failed (a full disk) is tried again at the next save.
    @Test func aFailedWriteIsTriedAgainAtTheNextSave() throws {
        let clock = Clock()
        let (persistence, store, dir) = Self.persistence("state-writes-full", clock) { dir in
            #expect(symlink("/dev/full", dir + "/state.json.tmp") == 0)
        }
        defer { persistence.stopWriter() }
        _ = persistence.offer(Self.state(1))
        #expect(waitUntil(seconds: 5) { persistence.isFailing }, "the write to a full disk fails")
        _ = unlink(dir + "/state.json.tmp")  // the store may have taken it away itself
        clock.advance(seconds: 1)
        let asked = persistence.writesAsked
        _ = persistence.offer(Self.state(2))
        #expect(persistence.writesAsked > asked, "tried again at once")
        #expect(waitUntil(seconds: 5) { (try? store.load().get()) == Self.state(2) })
    }
}
