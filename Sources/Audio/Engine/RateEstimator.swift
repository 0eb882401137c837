/// Estimates a device's true rate from how many frames it has consumed at which CLOCK_MONOTONIC
/// instants: the slope of an exponentially weighted least-squares line through (time, frames),
/// updated in O(1) per sample (Welford's online covariance with forgetting), so that the latency
/// with which the output thread wakes after each period averages out instead of biasing the result.
///
/// The window starts at the first sample after consumption began (a stream that has not started
/// yet consumes nothing), and restarts after a discontinuity: `reset()` at a fault or a reopen, and
/// by itself when two samples are further apart than `maximumGapNanoseconds` (a stall, a very late
/// wake-up). Old samples fade with time constant `timeConstantSeconds`, so a change of rate shows.
///
/// Output thread only (a value it owns); real-time safe: a few floating-point operations a sample.
struct RateEstimator {
    let nominalRate: Double
    let maximumGapNanoseconds: Int
    let timeConstantSeconds: Double
    /// Samples over less than this many seconds give no estimate.
    let minimumSpanSeconds: Double

    private var originNanoseconds = 0
    private var originFrames = 0
    private var lastNanoseconds = 0
    private var started = false
    private var firstFrames = -1
    private var weight = 0.0
    private var meanX = 0.0
    private var meanY = 0.0
    private var covariance = 0.0
    private var varianceX = 0.0

    init(nominalRate: Int, maximumGapNanoseconds: Int, timeConstantSeconds: Double = 30, minimumSpanSeconds: Double = 2)
    {
        self.nominalRate = Double(nominalRate)
        self.maximumGapNanoseconds = maximumGapNanoseconds
        self.timeConstantSeconds = timeConstantSeconds
        self.minimumSpanSeconds = minimumSpanSeconds
    }

    /// Forgets every sample: the next consumption starts a new window.
    mutating func reset() {
        started = false
        firstFrames = -1
        weight = 0
        meanX = 0
        meanY = 0
        covariance = 0
        varianceX = 0
    }

    /// The device had consumed `frames` (a count that only grows) at `nanoseconds`.
    mutating func add(nanoseconds: Int, frames: Int) {
        if started && nanoseconds - lastNanoseconds > maximumGapNanoseconds { reset() }
        if !started {
            // Wait for the count to move: before the stream starts it stands still.
            if firstFrames < 0 || frames == firstFrames {
                firstFrames = frames
                lastNanoseconds = nanoseconds
                return
            }
            started = true
            originNanoseconds = nanoseconds
            originFrames = frames
            lastNanoseconds = nanoseconds
        }
        let x = Double(nanoseconds - originNanoseconds) / 1e9
        let y = Double(frames - originFrames)
        let forget = max(0, 1 - Double(nanoseconds - lastNanoseconds) / 1e9 / timeConstantSeconds)
        lastNanoseconds = nanoseconds
        weight = forget * weight + 1
        let dx = x - meanX
        meanX += dx / weight
        meanY += (y - meanY) / weight
        covariance = forget * covariance + dx * (y - meanY)
        varianceX = forget * varianceX + dx * (x - meanX)
    }

    /// The device's rate relative to its nominal one, in parts per million (positive: it consumes
    /// faster), or nil before the window spans `minimumSpanSeconds`.
    var ppm: Double? {
        guard started, Double(lastNanoseconds - originNanoseconds) / 1e9 >= minimumSpanSeconds, varianceX > 0 else {
            return nil
        }
        return (covariance / varianceX / nominalRate - 1) * 1e6
    }
}
