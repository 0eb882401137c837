import BatonTesting
import Testing

@testable import BatonService

/// How often batond pets systemd's watchdog for a `WatchdogSec=`.
@Suite(.ownThread) struct WatchdogPetTests {
    /// Half the interval, at least 10 ms apart, at most a minute: a `WatchdogSec=3h` trapped batond at
    /// its start (half of it in µs is past `UInt32`), and systemd restarted it into the same trap.
    @Test func petsAtHalfTheIntervalWithinBounds() {
        #expect(Service.petMicroseconds(watchdog: .seconds(10)) == 5_000_000)
        #expect(Service.petMicroseconds(watchdog: .milliseconds(4)) == 10_000)
        #expect(Service.petMicroseconds(watchdog: .seconds(3 * 3_600)) == 60_000_000)
        #expect(Service.petMicroseconds(watchdog: .microseconds(Int64.max)) == 60_000_000)
    }
}
