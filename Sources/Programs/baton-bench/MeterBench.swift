import Engine
import Glibc

// baton-bench --meter: what the zone meter (peak, RMS, loudness transitions; issue 16) costs the
// output thread per period: 441 frames of stereo (10 ms at 44.1 kHz) and 480 (10 ms at 48 kHz),
// a sine whose level crosses the silence threshold every 50 periods (so transitions are paid
// too). Thread CPU time, the median of 5 runs of 100 000 periods.

/// Runs the meter benchmark and prints ns per period. Returns the exit status.
func runMeterBench() -> Int32 {
    for frames in [441, 480] {
        let channels = 2
        let samples = frames * channels
        let loud = UnsafeMutablePointer<Float>.allocate(capacity: samples)
        let quiet = UnsafeMutablePointer<Float>.allocate(capacity: samples)
        for i in 0..<samples {
            loud[i] = 0.5 * sin(Float(i / channels) * 2 * .pi * 440 / 44_100)
            quiet[i] = loud[i] * 1e-5
        }
        let meter = Meter()
        var runs: [Double] = []
        let periods = 100_000
        for _ in 0..<5 {
            let t0 = threadSeconds()
            for n in 0..<periods {
                meter.measure(n / 50 % 2 == 0 ? loud : quiet, frames: frames, channels: channels, frame: n * frames)
            }
            runs.append((threadSeconds() - t0) / Double(periods) * 1e9)
        }
        runs.sort()
        let level = meter.level
        print(
            "baton-bench --meter: \(frames) frames × \(channels) ch: \(Int(runs[2].rounded())) ns per period "
                + "(median of 5 × \(periods); min \(Int(runs[0].rounded())), max \(Int(runs[4].rounded()))); "
                + "last level \(level.peakDb) / \(level.rmsDb) dBFS")
        loud.deallocate()
        quiet.deallocate()
    }
    return 0
}
