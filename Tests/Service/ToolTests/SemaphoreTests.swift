import BatonTesting
import Glibc
import OSThread
import Testing

/// `Semaphore.wait(nanoseconds:)` keeps its time on CLOCK_MONOTONIC (glibc's sem_clockwait, through
/// CGlibc): a wall clock stepped back no longer lengthens it. (Stepping this machine's clock in a
/// test is not done; what is checked is the wait itself, on the clock it now uses.)
@Suite(.ownThread) struct SemaphoreTests {
    @Test func aTimedWaitEndsAtItsTimeOrAtAPost() {
        let s = Semaphore()
        let start = monotonicNanoseconds()
        #expect(!s.wait(nanoseconds: 30_000_000), "no post")
        let waited = monotonicNanoseconds() - start
        #expect(waited >= 30_000_000, "waited \(waited) ns")
        s.post()
        #expect(s.wait(nanoseconds: 5_000_000_000), "a post there is taken")
        #expect(!s.wait(nanoseconds: 0), "and only once")
    }
}
