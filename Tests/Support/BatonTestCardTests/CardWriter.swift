import ALSA
import BatonTesting
import Glibc

/// CLOCK_MONOTONIC in nanoseconds (the clock the card and its sidecar use).
func monotonicNanoseconds() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
}

/// Sleeps until the monotonic clock reads `deadline` (ns): how a test plays an application that is late.
func sleep(untilNanoseconds deadline: Int64) {
    var ts = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
    while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) == EINTR {}
}

/// Writes a known byte pattern to a card through the ALSA wrapper, period by period, and keeps every
/// byte it got accepted, to compare with what the card recorded. Owned by the calling thread.
final class CardWriter {
    let card: TestCard
    let pcm: PCM
    private(set) var written: [UInt8] = []
    private var chunk: [UInt8]
    private var framesWritten = 0
    /// Changes the pattern: frames written again after a rewind differ from those taken back.
    private var salt = 0

    init(_ card: TestCard, sampleFormat: SampleFormat = .s16LE) throws {
        self.card = card
        pcm = try PCM(
            PCMRequest(
                name: card.name, rate: card.rate, channels: card.channels, format: sampleFormat,
                periodFrames: card.periodFrames, bufferFrames: card.bufferFrames))
        chunk = [UInt8](repeating: 0, count: card.periodFrames * card.frameBytes)
        written.reserveCapacity(card.rate * card.frameBytes * 3)
    }

    /// The pattern's bytes for frame `index`: distinct enough that a lost, repeated or shifted frame shows.
    private func fill(from index: Int, frames: Int) {
        let fb = card.frameBytes
        for f in 0..<frames {
            let i = index + f
            for b in 0..<fb {
                chunk[f * fb + b] = UInt8(truncatingIfNeeded: i &* 31 &+ (i >> 8) &+ b &* 7 &+ salt &* 101)
            }
        }
    }

    /// Writes one period (or `frames`); returns what `snd_pcm_writei` returned. Accepted frames are kept.
    @discardableResult
    func writePeriod(frames: Int? = nil) -> Int {
        let n = frames ?? card.periodFrames
        fill(from: framesWritten, frames: n)
        let r = chunk.withUnsafeBytes { pcm.write($0.baseAddress!, frames: n) }
        if r > 0 {
            written += chunk[0..<(r * card.frameBytes)]
            framesWritten += r
        }
        return r
    }

    /// Writes periods until `count` were accepted; stops at the first error and returns it (0 if none).
    @discardableResult
    func write(periods count: Int) -> Int {
        for _ in 0..<count {
            let r = writePeriod()
            if r < 0 { return r }
        }
        return 0
    }

    /// Writes one period without keeping it (a real-time loop: no array growth).
    func writePeriodUnrecorded() -> Int {
        chunk.withUnsafeBytes { pcm.write($0.baseAddress!, frames: card.periodFrames) }
    }

    /// Takes back the last `frames` written (`snd_pcm_rewind`) and forgets them; what is written
    /// next has a pattern of its own. Returns what the PCM returned.
    @discardableResult
    func rewind(frames: Int) -> Int {
        let r = pcm.rewind(frames: frames)
        if r > 0 {
            written.removeLast(r * card.frameBytes)
            framesWritten -= r
            salt += 1
        }
        return r
    }

    var frames: Int { framesWritten }
}

extension TestCard {
    /// The sidecar's `start` time of the latest stream.
    var startNanoseconds: Int64? { events("start").last?.nanoseconds }
}
