/// The device frames an output thread has rendered, kept until the device has surely played them,
/// so that frames a device drops are written again instead of being lost.
///
/// A device can stop with frames still in its buffer: an xrun that a driver raises while data is
/// buffered (an injected one, a DMA error), a resume the device refuses (it must be prepared, which
/// discards the buffer), a device that is unplugged. Those frames were mixed — the sources' rings were
/// consumed, their gain ramps advanced — but never heard. The output thread therefore keeps every
/// rendered period here, in stream order, and tracks how far the device has taken them (`sent`).
/// At a fault it asks the PCM how many of the frames it took were never played
/// (`PCM.unplayedFrames()`, the hardware pointer where the stream stopped; when it cannot say, a
/// kernel card gone, everything written since the output last measured its delay:
/// `DeviceOutput.unplayed`) and moves `sent` back by that many; after recovery (or after the
/// reopen of a device that came back) it writes them again before the next period. The device plays each rendered frame exactly once, in order, so a
/// source's position is the frame the device consumed, and the zone's `audibleFrame` holds still
/// while the device is away (`pending` counts as delay).
///
/// Capacity: twice the requested buffer plus two periods, rounded to whole periods. A device that
/// grants a larger buffer is kept only as full as the one requested (`DeviceOutput.usableBuffer`),
/// so a wake-up never renders more than this holds.
///
/// Output thread only (after `init`); real-time safe: no allocation, lock or log.
final class WrittenFrames {
    let frameBytes: Int
    /// Frames per period: the history is appended a whole period at a time.
    let periodFrames: Int
    /// Frames kept, a multiple of the period.
    let capacity: Int
    private let storage: UnsafeMutableRawPointer
    /// Stream frames rendered so far (the next period goes there).
    private(set) var rendered = 0
    /// Stream frames the device has taken (played, or in its buffer). `rendered - sent` are to write.
    private(set) var sent = 0

    /// Control thread, before the output thread starts: allocates the history.
    init(periodFrames: Int, bufferFrames: Int, frameBytes: Int) {
        precondition(periodFrames > 0 && bufferFrames >= 0 && frameBytes > 0)
        let periods = (2 * bufferFrames + periodFrames - 1) / periodFrames + 2
        self.frameBytes = frameBytes
        self.periodFrames = periodFrames
        capacity = periods * periodFrames
        storage = .allocate(byteCount: capacity * frameBytes, alignment: 16)
    }

    deinit { storage.deallocate() }

    /// Frames rendered but not taken by the device yet.
    var pending: Int { rendered - sent }

    /// Where the next period goes: the output thread converts its mix straight into the history
    /// (no copy), then calls `commit`. Only whole periods are kept and the capacity is a multiple of
    /// the period, so a period never wraps. Real-time safe.
    var nextPeriod: UnsafeMutableRawPointer { storage + (rendered % capacity) * frameBytes }

    /// Keeps the period just written at `nextPeriod`. Real-time safe.
    func commit() {
        rendered += periodFrames
        // Never more pending than is kept (only a device that dropped more than the capacity).
        sent = max(sent, rendered - capacity)
    }

    /// The next contiguous run of frames to write: from `sent`, at most to the end of the storage.
    func nextRun() -> (bytes: UnsafeRawPointer, frames: Int) {
        let at = sent % capacity
        return (UnsafeRawPointer(storage + at * frameBytes), min(pending, capacity - at))
    }

    /// The device took `frames` of the run.
    func markSent(_ frames: Int) { sent += frames }

    /// The device took back the last `frames` it was given (`snd_pcm_rewind`) and they are to be
    /// rendered again: they are forgotten. Only with nothing pending (the caller checks). Real-time safe.
    func takeBack(_ frames: Int) {
        let back = min(max(0, frames), sent - max(0, rendered - capacity))
        rendered -= back
        sent -= back
    }

    /// The device dropped the last `frames` it took without playing them: they are to be written
    /// again. Returns how many will be (what is still kept).
    @discardableResult
    func rewind(_ frames: Int) -> Int {
        let oldest = max(0, rendered - capacity)
        let back = min(max(frames, 0), sent - oldest)
        sent -= back
        return back
    }
}
