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

    /// Tops up every ring; marks the end once a one-shot sound is all written.
    public func tick(audible: Bool) {
        for i in parts.indices where !parts[i].samples.isEmpty {
            let slot = parts[i].output.slot
            while true {
                if parts[i].offset >= parts[i].samples.count {
                    if loop { parts[i].offset = 0 } else { break }
                }
                let wrote = parts[i].samples[parts[i].offset...].withUnsafeBufferPointer {
                    slot.write($0.baseAddress!, count: $0.count)
                }
                parts[i].offset += wrote
                if wrote == 0 { break }
            }
            if !loop && parts[i].offset >= parts[i].samples.count { slot.finish() }
        }
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
