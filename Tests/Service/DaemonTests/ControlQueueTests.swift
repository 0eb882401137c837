import BatonTesting
import OSThread
import Synchronization
import Testing

@testable import Players

/// An external player's control runs Baton's pause and play commands on a thread of its own.
@Suite(.ownThread) struct ControlQueueTests {
    /// A player slow to answer (MPD unreachable: 2–16 s a command) while doorbells ring: the
    /// commands given meanwhile do not all run once it answers — the one running, then the newest
    /// (the state Baton wants); those it replaced are said dropped. All of them ran, in order, and
    /// the player flapped between pause and play for minutes.
    @Test func onlyTheNewestCommandWaits() throws {
        let queue = ControlQueue()
        defer { queue.close() }
        let ran = Mutex<[Int]>([])
        let dropped = Mutex<[Int]>([])
        let release = Semaphore()
        let started = Semaphore()
        queue.run {
            started.post()
            release.wait()
            ran.withLock { $0.append(0) }
        }
        started.wait()  // the first runs (the player not answering)
        for n in 1...6 {
            queue.run(dropped: { dropped.withLock { $0.append(n) } }) { ran.withLock { $0.append(n) } }
        }
        release.post()
        #expect(waitUntil(seconds: 5) { ran.withLock { $0 } == [0, 6] }, "\(ran.withLock { $0 })")
        #expect(dropped.withLock { $0 } == [1, 2, 3, 4, 5])
    }
}
