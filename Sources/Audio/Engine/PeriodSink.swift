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
    /// Frames taken but never played, once the sink stopped (xrun, suspend, gone), or nil when the
    /// sink cannot tell (a kernel card gone); see ``WrittenFrames``.
    func unplayedFrames() -> Int?
    /// Resumes after a suspend: 0, -EAGAIN while waking, or the negative errno when it cannot.
    func resume() -> Int32
    /// Makes a stopped sink writable again, discarding what it held: 0 or the negative errno.
    func prepare() -> Int32
    /// True when the sink is stopped by an xrun (e.g. a resume the device refused).
    var isInXrun: Bool { get }
    /// True once the device behind it is gone (unplugged), asked of a drained sink (an idle output
    /// looks now and then, `DeviceOutput.idleProbeMilliseconds`).
    var isGone: Bool { get }
    /// Plays what was written, then stops (before the output thread waits with nothing to play).
    func drain()
    /// True while a device-clocked sink runs (plays what it holds at its own pace).
    var isRunning: Bool { get }
    /// Frames the sink can take now without blocking, or a negative errno.
    func avail() -> Int
    /// Waits until a running sink has room for its wake-up threshold (`PCM.setWakeThreshold`), at
    /// most `milliseconds`: 1 ready, 0 timed out, or a negative errno (which the next write meets too).
    func wait(milliseconds: Int32) -> Int32
    /// Starts a prepared stream before it is full: 0 or a negative errno.
    func start() -> Int32
}

extension PCM: PeriodSink {}

/// A sink whose written frames wait in a buffer until played and can be taken back: an ALSA PCM
/// (`snd_pcm_rewind`), or a ``ClockedBuffer`` played by the system clock. What
/// `DeviceOutput.playAhead` renders ahead into. Output thread only; real-time safe.
protocol RewindableSink: PeriodSink {
    /// Frames written that can be taken back (not played yet), or a negative errno.
    func rewindable() -> Int
    /// Takes back up to `frames` of the last frames written: how many, or a negative errno.
    func rewind(frames: Int) -> Int
    /// Waits until it has room for its wake-up threshold, `other` is readable, or `milliseconds` pass.
    func wait(milliseconds: Int32, orUntilReadable other: Int32) -> PCM.WaitResult
    /// True when it plays on its own between calls (a card: it may be fetching the next period,
    /// and what it has played moves with its clock); false when it plays only when called (a
    /// ``ClockedBuffer``: its PCM gets what the clock played at the output's calls).
    var playsBetweenCalls: Bool { get }
}

extension PCM: RewindableSink {
    var playsBetweenCalls: Bool { true }
}

extension PeriodSink {
    /// A sink that never stops (a stream sink) drops nothing and is never drained.
    func drain() {}
    func unplayedFrames() -> Int? { 0 }
    func resume() -> Int32 { 0 }
    func prepare() -> Int32 { 0 }
    var isInXrun: Bool { false }
    var isGone: Bool { false }
    /// A stream sink is paced by the system clock: never "running" on a clock of its own.
    var isRunning: Bool { false }
    func avail() -> Int { Int.max }
    func wait(milliseconds: Int32) -> Int32 { 1 }
    func start() -> Int32 { 0 }
}
