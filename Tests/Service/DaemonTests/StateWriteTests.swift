import BatonTesting
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

    static func state(_ position: Double, volume: Double = 0.5, playing: Bool = true) -> SavedState {
        let song = Song(id: "s1", title: "Steps", duration: 600)
        let queue = SavedQueue(
            songs: [song], index: 0, position: position, zones: ["kitchen"], volume: 1, playing: playing)
        return SavedState(volumes: ["kitchen": volume], queue: queue)
    }

    /// A change of the position alone is written at most every 30 s; any other change (a volume,
    /// a pause) at once; the stop's save always.
    @Test func thePositionAloneIsWrittenAtMostEveryThirtySeconds() throws {
        let dir = TestDirectory.make("state-writes")
        let clock = Clock()
        let store = StateStore(directory: dir)
        let persistence = Persistence(
            store: store, logger: Logger(minimum: .error), events: EventLog(), clock: { clock.now.withLock { $0 } })
        persistence.startWriter()
        defer { persistence.stopWriter() }
        func onDisk() -> SavedState? { if case .success(let s) = store.load() { s } else { nil } }
        func written(_ expected: SavedState) -> Bool { waitUntil(seconds: 5) { onDisk() == expected } }

        #expect(persistence.offer(Self.state(1)) != nil, "the first state is written")
        #expect(written(Self.state(1)))
        for second in 2...30 {
            clock.advance(seconds: 1)
            #expect(persistence.offer(Self.state(Double(second))) == nil, "at \(second) s: the position alone")
        }
        clock.advance(seconds: 1)
        #expect(persistence.offer(Self.state(31)) != nil, "30 s after the last write")
        #expect(written(Self.state(31)))
        clock.advance(seconds: 1)
        #expect(persistence.offer(Self.state(32, volume: 0.7)) != nil, "a volume is written at once")
        #expect(written(Self.state(32, volume: 0.7)))
        clock.advance(seconds: 1)
        #expect(persistence.offer(Self.state(33, volume: 0.7, playing: false)) != nil, "a pause at once")
        #expect(written(Self.state(33, volume: 0.7, playing: false)))
        clock.advance(seconds: 1)
        #expect(persistence.offer(Self.state(34, volume: 0.7, playing: false)) == nil)
        // The stop writes where it is.
        _ = persistence.saveLast(Self.state(35, volume: 0.7, playing: false))
        #expect(written(Self.state(35, volume: 0.7, playing: false)))
    }
}
