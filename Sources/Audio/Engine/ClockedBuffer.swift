import ALSA
import Glibc
import OSThread

/// A sound card's buffer played by the system clock, in front of a PCM that never blocks (an ALSA
/// `null` or `file` PCM): what lets a `clock: system` zone render ahead and take back
/// (`DeviceSpec.rendersAhead`) the way a `clock: device` zone does on a card.
///
/// It behaves like a card's ring buffer as `DeviceOutput.playAhead` sees one: frames written wait
/// in it and are played, at `rate` from the moment it starts, by CLOCK_MONOTONIC; what is not
/// played yet can be taken back (`rewind`); its wake-up threshold is `wakeThreshold` frames of
/// room; it starts when full or at `start`, and stops in an underrun (`-EPIPE` from the next
/// `write` or `avail`) when the clock passes the last frame written. A frame is written to the PCM
/// behind it when the clock has played it — at the output thread's next call, so at its wake-ups,
/// in bursts up to a wake-up late — and a `file` PCM records exactly what was played, take-backs
/// included. `delay` is what it holds (what the PCM has not been given) plus the PCM's own delay.
///
/// Output thread only; real-time safe after `init` (no allocation, lock, log or await; `write`
/// and `drain` sleep, as a card's blocking write and drain do).
final class ClockedBuffer: RewindableSink {
    let bufferFrames: Int
    let periodFrames: Int
    let rate: Int
    let frameBytes: Int
    /// Frames of room at which `wait` returns (a card's `avail_min`).
    var wakeThreshold: Int
    /// The PCM the played frames go to; nil while none is open. Set it, then `prepare`.
    var output: PCM? {
        didSet { outputDrained = false }
    }
    private let storage: UnsafeMutableRawPointer
    /// Frames written since the last prepare (the application pointer).
    private var written = 0
    /// Frames given to `output` since the last prepare (the hardware pointer).
    private var played = 0
    /// Running: when it started (CLOCK_MONOTONIC ns) and the frame it started at.
    private var startedAt = 0
    private var startFrame = 0
    private var running = false
    private var underrun = false
    /// An error from `output`, returned by the next `write` until a prepare.
    private var failure: Int32 = 0
    /// `output` was drained (it stopped): the next prepare prepares it too.
    private var outputDrained = false
    private let clock: () -> Int

    init(
        bufferFrames: Int, periodFrames: Int, rate: Int, frameBytes: Int,
        clock: @escaping () -> Int = monotonicNanoseconds
    ) {
        precondition(bufferFrames > 0 && periodFrames > 0 && rate > 0 && frameBytes > 0)
        self.bufferFrames = bufferFrames
        self.periodFrames = periodFrames
        self.rate = rate
        self.frameBytes = frameBytes
        self.clock = clock
        wakeThreshold = periodFrames
        storage = .allocate(byteCount: bufferFrames * frameBytes, alignment: 16)
    }

    deinit { storage.deallocate() }

    /// Frames written and not yet given to `output` (what it holds).
    private var held: Int { written - played }
    /// Frames that can be written now.
    private var room: Int { bufferFrames - held }

    /// The frame the clock has reached at `now` (ns), from the start moved on in whole seconds, so
    /// that neither product below grows with the time it runs.
    private func clockFrame(_ now: Int) -> Int {
        let seconds = max(0, now - startedAt) / 1_000_000_000
        startedAt += seconds * 1_000_000_000
        startFrame += seconds * rate
        return startFrame + max(0, now - startedAt) * rate / 1_000_000_000
    }

    /// When the clock reaches `frame` (ns; the first nanosecond at which `clockFrame` gives it).
    private func time(of frame: Int) -> Int {
        startedAt + ((frame - startFrame) * 1_000_000_000 + rate - 1) / rate
    }

    /// Plays what the clock has reached: gives it to `output`, and stops in an underrun when the
    /// clock passed the last frame written.
    private func advance() {
        guard running else { return }
        let due = clockFrame(clock())
        play(through: min(due, written))
        if due > written {
            running = false
            underrun = true
        }
    }

    /// Gives `output` the frames up to `frame`.
    private func play(through frame: Int) {
        var restarts = 0
        while played < frame {
            let at = played % bufferFrames
            let run = min(frame - played, bufferFrames - at)
            let r = output?.write(storage + at * frameBytes, frames: run) ?? run
            if r == -Int(EPIPE) || r == -Int(ESTRPIPE) {
                // A `null`/`file` PCM does not underrun; should it, it starts over — unless it
                // cannot be prepared, or fails so again and again: a failure (it was retried for
                // ever, spinning on this real-time thread), and the output reopens it.
                restarts += 1
                let prepared = restarts <= 3 ? output?.prepare() ?? 0 : Int32(r)
                if prepared == 0 { continue }
                failure = prepared
                played = frame
                return
            }
            if r < 0 {
                failure = Int32(r)
                played = frame  // lost with the PCM; the output writes its history again after a reopen
                return
            }
            // A PCM that never blocks takes everything; one that took nothing is not waited for.
            played += r == 0 ? run : r
        }
    }

    // MARK: PeriodSink

    func write(_ bytes: UnsafeRawPointer, frames: Int) -> Int {
        advance()
        if failure != 0 { return Int(failure) }
        if underrun { return -Int(EPIPE) }
        if room == 0 && running {
            // Full: wait, as a card's write does, until the clock has played what is asked (at most a period).
            let wanted = min(frames, periodFrames)
            sleepUntil(time(of: written - bufferFrames + wanted))
            advance()
            if underrun { return -Int(EPIPE) }
        }
        let n = min(frames, room)
        var done = 0
        while done < n {
            let at = (written + done) % bufferFrames
            let run = min(n - done, bufferFrames - at)
            (storage + at * frameBytes).copyMemory(from: bytes + done * frameBytes, byteCount: run * frameBytes)
            done += run
        }
        written += n
        // A card's start threshold: the buffer, in whole periods.
        if !running && held >= bufferFrames - bufferFrames % periodFrames { _ = start() }
        return n
    }

    func recover(_ code: Int32) -> Int32 { prepare() }

    func delay() -> Int? {
        advance()
        return held + (output?.delay() ?? 0)
    }

    var hiddenDelayFrames: Int { output?.hiddenDelayFrames ?? 0 }

    func unplayedFrames() -> Int? { held }

    func resume() -> Int32 { 0 }

    func prepare() -> Int32 {
        written = 0
        played = 0
        running = false
        underrun = false
        failure = 0
        // The PCM behind it runs on through an underrun here; only a drained one is prepared again.
        guard outputDrained else { return 0 }
        outputDrained = false
        return output?.prepare() ?? 0
    }

    var isInXrun: Bool {
        advance()
        return underrun
    }

    /// The PCM behind it (a `file` or `null` one, or a card paced by the system clock) is gone.
    var isGone: Bool { output?.isGone ?? false }

    /// Plays out what it holds by the clock (sleeping until then), then stops.
    func drain() {
        advance()
        if !running && !underrun && written > played { _ = start() }
        if running {
            sleepUntil(time(of: written))
            play(through: written)
        }
        running = false
        output?.drain()
        outputDrained = true
    }

    var isRunning: Bool {
        advance()
        return running
    }

    func avail() -> Int {
        advance()
        if underrun { return -Int(EPIPE) }
        return room
    }

    func wait(milliseconds: Int32) -> Int32 {
        wait(milliseconds: milliseconds, orUntilReadable: -1) == .timedOut ? 0 : 1
    }

    // MARK: RewindableSink

    var playsBetweenCalls: Bool { false }

    func rewindable() -> Int {
        advance()
        return held
    }

    func rewind(frames: Int) -> Int {
        advance()
        let n = min(max(0, frames), held)
        written -= n
        return n
    }

    func start() -> Int32 {
        guard !running else { return 0 }
        guard !underrun else { return -EPIPE }
        running = true
        startedAt = clock()
        startFrame = played
        return 0
    }

    /// Waits until it has `wakeThreshold` frames of room by the clock, or `other` is readable (-1:
    /// none), at most `milliseconds` (negative: no limit, as long as it runs).
    func wait(milliseconds: Int32, orUntilReadable other: Int32) -> PCM.WaitResult {
        advance()
        guard running, room < wakeThreshold else { return .ready }
        // When the clock reaches the frame that leaves `wakeThreshold` of room.
        let at = time(of: written - bufferFrames + wakeThreshold)
        var timeout = Int32(clamping: (at - clock() + 999_999) / 1_000_000)
        if milliseconds >= 0 { timeout = min(timeout, milliseconds) }
        var one = pollfd(fd: other, events: Int16(POLLIN), revents: 0)
        if poll(&one, 1, max(0, timeout)) > 0 && one.revents != 0 { return .other }
        advance()
        return !running || room >= wakeThreshold ? .ready : .timedOut
    }
}
