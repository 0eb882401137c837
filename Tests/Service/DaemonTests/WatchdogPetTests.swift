import BatonTesting
import Testing

@testable import BatonService

/// How often batond pets systemd's watchdog for a `WatchdogSec=`.
@Suite(.ownThread) struct WatchdogPetTests {
    /// A quarter of the interval, at most a second apart, at least 10 ms: a `WatchdogSec=3h` trapped
    /// batond at its start (half of it in µs is past `UInt32`), and systemd restarted it into the
    /// same trap. At half of `WatchdogSec=10s`, a pet skipped for a monitor slow for a moment left the
    /// next one due at systemd's deadline; and the monitor may now be 5 s late, not 2.
    @Test func petsOftenAndToleratesAMomentsStall() {
        #expect(Service.petMicroseconds(watchdog: .seconds(10)) == 1_000_000)
        #expect(Service.petMicroseconds(watchdog: .seconds(2)) == 500_000)
        #expect(Service.petMicroseconds(watchdog: .milliseconds(4)) == 10_000)
        #expect(Service.petMicroseconds(watchdog: .seconds(3 * 3_600)) == 1_000_000)
        #expect(Service.petMicroseconds(watchdog: .microseconds(Int64.max)) == 1_000_000)
        #expect(Service.monitorGrace(watchdog: .seconds(10)) == .seconds(5))
        #expect(Service.monitorGrace(watchdog: .seconds(1)) == .seconds(2), "the idle monitor ticks once a second")
    }
}
