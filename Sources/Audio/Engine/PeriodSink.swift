import ALSA

/// Where an output thread writes its converted periods: an ALSA PCM, or a Snapcast stream source
/// (``StreamSink``). The output loop of ``DeviceOutput`` is written once, against this protocol.
///
/// Output thread only. Every method is real-time safe: no allocation, lock, log or await; only an
/// ALSA PCM's `write` may block (that is how a sound card paces its zone).
protocol PeriodSink: AnyObject {
    /// Writes up to `frames` interleaved frames from `bytes`. Returns the frames taken (possibly
    /// fewer than asked), or a negative errno (`-EPIPE`, `-ESTRPIPE`, `-ENODEV`, …).
    func write(_ bytes: UnsafeRawPointer, frames: Int) -> Int
    /// Recovers from `-EPIPE`/`-ESTRPIPE`; 0, or the negative errno when it cannot.
    func recover(_ code: Int32) -> Int32
    /// Frames taken but not yet heard, or nil when the sink cannot tell.
    func delay() -> Int?
    /// Frames held back beyond what `delay()` reports (an ALSA `file` plugin's buffer), constant.
    var hiddenDelayFrames: Int { get }
    /// Plays what was written, then stops (before the output thread waits with nothing to play).
    func drain()
    /// Makes a drained sink ready to be written again; 0, or a negative errno.
    func prepare() -> Int32
}

extension PeriodSink {
    func drain() {}
    func prepare() -> Int32 { 0 }
}

extension PCM: PeriodSink {}
