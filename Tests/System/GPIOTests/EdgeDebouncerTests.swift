import GPIO
import Testing

/// Traces shaped like a tactile switch on a scope: bounce bursts of 0.1–3 ms after each edge.
@Suite struct EdgeDebouncerTests {
    /// A press with contact bounce (five edges in 1.4 ms) is one press, on its first edge.
    @Test func ignoresBounceAfterAPress() {
        var debouncer = EdgeDebouncer(edges: .falling, debounce: .milliseconds(50))
        let trace: [EdgeEvent] = [
            .falling(ms: 10), .rising(ms: 10.3), .falling(ms: 10.5), .rising(ms: 11.1),
            .falling(ms: 11.4),
        ]
        #expect(debouncer.presses(in: trace) == [.falling(ms: 10)])
    }

    /// A button held for 1.5 s then released with bounce (which has falling edges) is one press.
    @Test func countsAHeldButtonOnce() {
        var debouncer = EdgeDebouncer(edges: .falling, debounce: .milliseconds(50))
        let trace: [EdgeEvent] = [
            .falling(ms: 0), .rising(ms: 0.2), .falling(ms: 0.9),
            .rising(ms: 1500), .falling(ms: 1500.4), .rising(ms: 1500.9), .falling(ms: 1502),
            .rising(ms: 1503),
        ]
        #expect(debouncer.presses(in: trace) == [.falling(ms: 0)])
    }

    /// Two genuine presses 200 ms apart, each bouncing on press and release, are two presses.
    @Test func countsTwoPressesFurtherApartThanTheDebounce() {
        var debouncer = EdgeDebouncer(edges: .falling, debounce: .milliseconds(50))
        let press: (Double) -> [EdgeEvent] = { t in
            [
                .falling(ms: t), .rising(ms: t + 0.4), .falling(ms: t + 0.7), .rising(ms: t + 2.5), .falling(ms: t + 3),
                .rising(ms: t + 100), .falling(ms: t + 100.3), .rising(ms: t + 102),
            ]
        }
        #expect(debouncer.presses(in: press(0) + press(200)) == [.falling(ms: 0), .falling(ms: 200)])
    }

    /// Presses closer together than the debounce time (after the last edge) count once.
    @Test func mergesPressesWithinTheDebounce() {
        var debouncer = EdgeDebouncer(edges: .falling, debounce: .milliseconds(50))
        let trace: [EdgeEvent] = [.falling(ms: 0), .rising(ms: 20), .falling(ms: 40), .rising(ms: 60)]
        #expect(debouncer.presses(in: trace) == [.falling(ms: 0)])
    }

    /// The quiet time is measured from the last edge of either kind, and exactly the debounce is enough.
    @Test func needsTheDebounceTimeOfQuietBeforeAPress() {
        var debouncer = EdgeDebouncer(edges: .falling, debounce: .milliseconds(50))
        let trace: [EdgeEvent] = [
            .falling(ms: 0), .rising(ms: 30), .falling(ms: 79.9), .rising(ms: 90), .falling(ms: 140),
        ]
        #expect(debouncer.presses(in: trace) == [.falling(ms: 0), .falling(ms: 140)])
    }

    /// A button to 3.3 V with a pull-down presses on the rising edge.
    @Test func pressesOnRisingEdges() {
        var debouncer = EdgeDebouncer(edges: .rising, debounce: .milliseconds(30))
        let trace: [EdgeEvent] = [
            .rising(ms: 5), .falling(ms: 5.2), .rising(ms: 5.6), .falling(ms: 400), .rising(ms: 400.5),
            .falling(ms: 401),
        ]
        #expect(debouncer.presses(in: trace) == [.rising(ms: 5)])
    }

    /// With both edges selected, press and release each trigger once, bounce ignored.
    @Test func reportsPressAndReleaseWithBothEdges() {
        var debouncer = EdgeDebouncer(edges: .both, debounce: .milliseconds(50))
        let trace: [EdgeEvent] = [
            .falling(ms: 0), .rising(ms: 0.3), .falling(ms: 0.8),
            .rising(ms: 700), .falling(ms: 700.2), .rising(ms: 701),
        ]
        #expect(debouncer.presses(in: trace) == [.falling(ms: 0), .rising(ms: 700)])
    }

    /// With no debounce every selected edge counts.
    @Test func countsEveryEdgeWithoutDebounce() {
        var debouncer = EdgeDebouncer(edges: .falling, debounce: .zero)
        let trace: [EdgeEvent] = [.falling(ms: 0), .rising(ms: 0.1), .falling(ms: 0.2)]
        #expect(debouncer.presses(in: trace) == [.falling(ms: 0), .falling(ms: 0.2)])
    }

    /// With both edges requested the kernel calls an edge by the level it reads a little after it
    /// (libgpiod v1): read during the bounce, a press's first edge can be called rising. The line
    /// had settled high (its last edge before the quiet time was rising), so the first edge after
    /// the quiet time is a fall, whatever it is called: the press counts, as the falling edge it
    /// was. It was lost: not a selected edge, and the real falling ones after it bounce.
    @Test func aPressCalledRisingDuringItsBounceIsAPress() {
        var debouncer = EdgeDebouncer(edges: .falling, debounce: .milliseconds(50))
        let trace: [EdgeEvent] = [
            .falling(ms: 0), .rising(ms: 200), .rising(ms: 500), .falling(ms: 500.3), .rising(ms: 501),
            .falling(ms: 502),
        ]
        #expect(debouncer.presses(in: trace) == [.falling(ms: 0), .falling(ms: 500)])
    }

    /// A long hold's release called falling (the level read during the release's bounce) is no
    /// second press: the line had settled low, so the edge is a rise. It counted as a press, and a
    /// hold longer than the announcement's merge window rang the doorbell twice.
    @Test func aReleaseCalledFallingIsNoPress() {
        var debouncer = EdgeDebouncer(edges: .falling, debounce: .milliseconds(50))
        let trace: [EdgeEvent] = [
            .falling(ms: 0), .rising(ms: 0.4), .falling(ms: 1), .falling(ms: 4000), .rising(ms: 4000.5),
        ]
        #expect(debouncer.presses(in: trace) == [.falling(ms: 0)])
    }

    /// The level at start stands in for an edge before: a first edge called rising on a line that
    /// was high is a press.
    @Test func theLevelAtStartIsTheSettledOne() {
        var debouncer = EdgeDebouncer(edges: .falling, debounce: .milliseconds(50), high: true)
        #expect(debouncer.presses(in: [.rising(ms: 10), .falling(ms: 10.2)]) == [.falling(ms: 10)])
    }

    /// The first edge ever seen is accepted, whatever time it carries.
    @Test func acceptsTheFirstEdge() {
        var debouncer = EdgeDebouncer(edges: .falling, debounce: .milliseconds(50))
        let accepted = debouncer.accept(EdgeEvent(.falling, at: 0))
        #expect(accepted)
    }

    /// A timestamp that goes backwards counts as no time passed, so it is never a new press.
    @Test func treatsAnEarlierTimestampAsSimultaneous() {
        var debouncer = EdgeDebouncer(edges: .falling, debounce: .milliseconds(50))
        #expect(
            debouncer.presses(in: [.falling(ms: 1000), .rising(ms: 1010), .falling(ms: 100)]) == [.falling(ms: 1000)])
    }
}
