import Engine
import Synchronization

/// A source that plays samples held in memory: an announcement (a sound file or rendered speech,
/// once) or a local sound as music (possibly looped). The samples were made per zone, at the zone's
/// rate and channels, before the request reached the arbiter; the monitor tops up the rings.
public final class SoundPlayer: Source, @unchecked Sendable {
    // @unchecked: `parts` is touched only under the control plane's lock (start, tick); the rest is `let`.
    public let label: String
    public let loop: Bool
    let samples: [String: [Float]]
    private var parts: [Part] = []
    private let outputs = Mutex<[SourceOutput]>([])

    private struct Part {
        let output: SourceOutput
        let samples: [Float]
        /// Next sample to write into the slot's ring.
        var offset = 0
        /// Frames of the sound passed in this zone: written, and dropped while it was left behind
        /// (each loop counted whole).
        var passed = 0
    }

    /// `samples`: per zone name, interleaved at that zone's rate and channels.
    public init(label: String, loop: Bool, samples: [String: [Float]]) {
        self.label = label
        self.samples = samples
        self.loop = loop
    }

    public func start(_ outputs: [SourceOutput]) {
        parts = outputs.map { Part(output: $0, samples: samples[$0.zone] ?? []) }
        self.outputs.withLock { $0 = outputs }
        for part in parts where part.samples.isEmpty { part.output.slot.finish() }
        tick(audible: true)
    }

    /// Tops up every ring; marks the end once a one-shot sound is all written. A zone left behind
    /// among the others (its card lost while another plays: `SourceOutput.isLeftBehind`) is not
    /// written: the frames the zones in step passed meanwhile are dropped for it (`drop`), and once
    /// its card is back it `rejoins` them before it is written again — as a music stream does. Its
    /// ring, full and unread, held the sound where the card was lost, and it went on from there:
    /// an echo of the other rooms as long as the outage, the position jumping back to it, and the
    /// end (and the resume of what the sound interrupted) late by as much.
    public func tick(audible: Bool) {
        let outputs = parts.map(\.output)
        var inStep: [Int] = []
        for i in parts.indices where !parts[i].samples.isEmpty && outputs[i].isInStep(among: outputs) {
            inStep.append(i)
            write(i)
        }
        for i in parts.indices where !parts[i].samples.isEmpty && !inStep.contains(i) {
            // Up to where the zones in step are, in this zone's frames.
            let o = outputs[i]
            let lead = inStep.map {
                Int((Double(parts[$0].passed) * Double(o.rate) / Double(max(1, outputs[$0].rate))).rounded())
            }.max()
            if let lead, lead > parts[i].passed { skip(i, lead - parts[i].passed) }
            if o.takesFrames(among: outputs) { write(i) }
        }
    }

    /// Writes part `i`'s next samples into its ring while it has room.
    private func write(_ i: Int) {
        let slot = parts[i].output.slot
        let frameSamples = max(1, parts[i].output.channels)
        while true {
            if parts[i].offset >= parts[i].samples.count {
                if loop { parts[i].offset = 0 } else { break }
            }
            let wrote = parts[i].samples[parts[i].offset...].withUnsafeBufferPointer {
                slot.write($0.baseAddress!, count: $0.count)
            }
            parts[i].offset += wrote
            parts[i].passed += wrote / frameSamples
            if wrote == 0 { break }
        }
        if !loop && parts[i].offset >= parts[i].samples.count { slot.finish() }
    }

    /// Drops `frames` of part `i` (its zone left behind): passed, counted as heard (`drop`).
    private func skip(_ i: Int, _ frames: Int) {
        let frameSamples = max(1, parts[i].output.channels)
        let count = parts[i].samples.count
        var n = frames
        if !loop { n = min(n, (count - parts[i].offset) / frameSamples) }
        guard n > 0 else { return }
        parts[i].output.drop(n)
        parts[i].passed += n
        parts[i].offset = loop ? (parts[i].offset + n * frameSamples) % count : parts[i].offset + n * frameSamples
        if !loop && parts[i].offset >= count { parts[i].output.slot.finish() }
    }

    /// While it still writes: when the fullest ring falls to half full (one tick a few hundred ms, not
    /// 200 a second). Once all is written: when the last frame will have been played, so it is
    /// released within about a millisecond of it. Under the control plane's lock.
    public var nextTick: Int? {
        let outputs = parts.map(\.output)
        if allHeldStill(outputs) { return nil }
        let feeding = parts.filter { !$0.samples.isEmpty && (loop || $0.offset < $0.samples.count) }
        if !feeding.isEmpty { return nanosecondsToHalfFull(feeding.map(\.output)) }
        return outputs.isEmpty || allDrained(outputs) ? nil : nanosecondsToDrain(outputs)
    }

    public func stop() -> Bool { true }
    public var position: Double? { slotPosition(outputs.withLock { $0 }) }
    public var isDrained: Bool { allDrained(outputs.withLock { $0 }) }
}
