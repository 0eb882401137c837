import BatonTesting
import MQTT
import Testing

@Suite(.ownThread) struct ReconnectBackoffTests {
    /// The wait starts at the minimum, doubles per failure, and stays at the maximum.
    @Test func doublesUpToTheMaximum() {
        var backoff = ReconnectBackoff(minimum: .seconds(1), maximum: .seconds(60))
        let waits = (0..<9).map { _ in backoff.nextDelay() }
        #expect(waits == [1, 2, 4, 8, 16, 32, 60, 60, 60].map { Duration.seconds($0) })
        #expect(backoff.failures == 9)
    }

    /// A connect brings the next wait back to the minimum.
    @Test func resetsAfterAConnect() {
        var backoff = ReconnectBackoff(minimum: .milliseconds(250), maximum: .seconds(2))
        #expect(
            [backoff.nextDelay(), backoff.nextDelay(), backoff.nextDelay()] == [
                .milliseconds(250), .milliseconds(500), .seconds(1),
            ])
        backoff.reset()
        #expect(backoff.nextDelay() == .milliseconds(250))
    }

    /// Many failures never overflow: the wait stays at the maximum.
    @Test func staysAtTheMaximumAfterManyFailures() {
        var backoff = ReconnectBackoff(minimum: .seconds(1), maximum: .seconds(30))
        for _ in 0..<10_000 { _ = backoff.nextDelay() }
        #expect(backoff.nextDelay() == .seconds(30))
    }
}
