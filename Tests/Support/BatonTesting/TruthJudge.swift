/// Judges a ``TruthRecorder/Recording`` against what the zones wrote, at period resolution.
///
/// The audio: each zone's output (its left channel, frame n = zone frame n, as a file PCM or a
/// virtual card records it), read in windows of one period for the tone of each source class.
/// What is judged:
/// - every status sample of every zone: the classes it reports heard must be the tones in the
///   period at its audible frame (and none may be heard when it reports none). Where they differ,
///   the disagreement is how far the audio's change is from the sample; up to one period + ramp
///   is a transition, wider is a mismatch;
/// - every `granted`, `audible`, `interruption-ended` (resuming) event: its source's tone starts
///   within one period + ramp of its frame; every `interruption-began` and `played`: its tone is
///   gone within one period + ramp. (`granted` of a source that was `starting` is judged by its
///   `audible` instead: the audio starts there.)
public struct TruthJudge {
    /// One zone's output.
    public struct Zone {
        public var name: String
        public var rate: Int
        public var periodFrames: Int
        public var rampFrames: Int
        public var left: [Float]
        public init(name: String, rate: Int, periodFrames: Int, rampFrames: Int, left: [Float]) {
            self.name = name
            self.rate = rate
            self.periodFrames = periodFrames
            self.rampFrames = rampFrames
            self.left = left
        }
    }

    /// What was found.
    public struct Verdict: Sendable {
        public var samplesChecked = 0
        /// Zone samples not judged: their window is outside the output (the last periods).
        public var samplesSkipped = 0
        public var mismatches = 0
        public var eventsChecked = 0
        public var eventMismatches = 0
        /// The widest disagreement between a sample or an event and the audio, in ms.
        public var widestDisagreementMs = 0.0
        /// The first problems, in words.
        public var problems: [String] = []

        public var summary: String {
            "\(samplesChecked) samples checked / \(mismatches) mismatches / widest disagreement "
                + "\((widestDisagreementMs * 10).rounded() / 10) ms; \(eventsChecked) events checked, "
                + "\(eventMismatches) off"
        }
    }

    /// The tone of each source class (Hz); a class not listed (or a call, whose caller may be
    /// silent) is allowed to be silent, and no other tone may be heard while it holds the zone.
    public var tones: [String: Double]
    /// Classes whose tone may be absent while reported heard.
    public var mayBeSilent: Set<String> = ["call"]
    /// Levels (0...1, the tone's amplitude) above which a tone is present and below which absent.
    public var present = 0.04
    public var absent = 0.01

    public init(tones: [String: Double]) { self.tones = tones }

    /// The tone levels in the period of `zone` starting at `frame`, or nil outside the output.
    func levels(_ zone: Zone, at frame: Int) -> [String: Double]? {
        guard frame >= 0, frame + zone.periodFrames <= zone.left.count else { return nil }
        let window = zone.left[frame..<(frame + zone.periodFrames)]
        return tones.mapValues { Signals.windowedToneLevel(window, frequency: $0, rate: zone.rate) }
    }

    /// Whether the period at `frame` sounds like `heard` (classes): 1 agrees, 0 unsure (a level
    /// between the thresholds, as in a ramp), −1 disagrees; nil outside the output.
    func agreement(_ zone: Zone, at frame: Int, heard: [String]) -> Int? {
        guard let levels = levels(zone, at: frame) else { return nil }
        var unsure = false
        for (cls, level) in levels {
            let expected = heard.contains(cls)
            if expected {
                if level >= present { continue }
                if mayBeSilent.contains(cls) { continue }
                if level > absent { unsure = true } else { return -1 }
            } else {
                if level <= absent { continue }
                if level < present { unsure = true } else { return -1 }
            }
        }
        return unsure ? 0 : 1
    }

    /// Frames from `frame` to the nearest period that agrees with `heard`, searching one second
    /// either way in steps of a quarter period; nil when none does.
    func distanceToAgreement(_ zone: Zone, at frame: Int, heard: [String]) -> Int? {
        let step = max(1, zone.periodFrames / 4)
        var d = 0
        while d <= zone.rate {
            for f in [frame - d, frame + d] where (agreement(zone, at: f, heard: heard) ?? -1) >= 0 { return d }
            d += step
        }
        return nil
    }

    /// Judges `recording` against `zones`.
    public func judge(_ recording: TruthRecorder.Recording, zones: [Zone]) -> Verdict {
        var v = Verdict()
        func note(_ text: String) { if v.problems.count < 10 { v.problems.append(text) } }
        var classOf: [String: String] = [:]
        for s in recording.samples { for src in s.sources { classOf[src.id] = src.class } }
        for zone in zones {
            let tolerance = zone.periodFrames + zone.rampFrames
            let ms = { (frames: Int) in Double(frames) * 1000 / Double(zone.rate) }
            for s in recording.samples {
                guard let z = s.zones.first(where: { $0.name == zone.name }) else { continue }
                let heard = z.audible.compactMap { classOf[$0] }
                guard let a = agreement(zone, at: z.audibleFrame, heard: heard) else {
                    v.samplesSkipped += 1
                    continue
                }
                v.samplesChecked += 1
                if a >= 0 { continue }
                let d = distanceToAgreement(zone, at: z.audibleFrame, heard: heard) ?? zone.rate * 10
                v.widestDisagreementMs = max(v.widestDisagreementMs, ms(d))
                if d > tolerance {
                    v.mismatches += 1
                    let found = (levels(zone, at: z.audibleFrame) ?? [:]).map {
                        "\($0.key) \(($0.value * 1000).rounded() / 1000)"
                    }
                    note(
                        "\(zone.name) frame \(z.audibleFrame): status says \(heard.isEmpty ? "nothing" : heard.joined(separator: "+")), "
                            + "the audio has \(found.sorted().joined(separator: ", ")) (\(ms(d)) ms away)")
                }
            }
            let audibleAt = Dictionary(
                recording.events.compactMap { e in
                    e.type == "audible" ? e.source.flatMap { s in e.zoneFrames?[zone.name].map { (s, $0) } } : nil
                }, uniquingKeysWith: { a, _ in a })
            for e in recording.events {
                guard let source = e.source, let cls = classOf[source], let tone = tones[cls],
                    let f = e.zoneFrames?[zone.name]
                else { continue }
                let starts: Bool
                switch e.type {
                case "audible": starts = true
                case "granted":
                    // Judged by its `audible` when its audio began later (it was starting).
                    if let heard = audibleAt[source], heard > f + tolerance { continue }
                    starts = true
                case "interruption-ended":
                    guard e.shouldResume == true else { continue }
                    starts = true
                case "interruption-began", "played": starts = false
                default: continue
                }
                if mayBeSilent.contains(cls) { continue }
                // The first period at or after f − period where the tone is (or is no longer) there.
                var found: Int?
                var x = f - zone.periodFrames
                while x <= f + 4 * tolerance {
                    guard let level = levels(zone, at: x)?[cls] else { break }
                    if starts ? level >= present : level <= absent {
                        found = x
                        break
                    }
                    x += max(1, zone.periodFrames / 4)
                }
                guard let at = found else {
                    if levels(zone, at: f + 4 * tolerance) == nil { continue }  // at the very end
                    v.eventsChecked += 1
                    v.eventMismatches += 1
                    note(
                        "\(e.type) \(source) in \(zone.name) at \(f): its \(Int(tone)) Hz tone does not \(starts ? "start" : "stop")"
                    )
                    continue
                }
                v.eventsChecked += 1
                let d = abs(at - f)
                v.widestDisagreementMs = max(v.widestDisagreementMs, ms(d))
                if at - f > tolerance {
                    v.eventMismatches += 1
                    note("\(e.type) \(source) in \(zone.name) at \(f): the audio changes \(ms(at - f)) ms later")
                }
            }
        }
        return v
    }
}
