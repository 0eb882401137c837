import CALSA
import Glibc
import Synchronization

/// One ALSA simple-mixer control used as a zone's hardware volume (`Digital` on a HiFiBerry DAC+,
/// `PCM` on the Pi's headphone jack or a USB DAC).
///
/// A user volume `v` in 0...1 is applied as `20·log10(v)` dB when the control reports a dB scale
/// (so 0.5 is −6 dB, as with Baton's software gain), clamped to the control's range; 0, or a level
/// below the range, mutes through the playback switch when the control has one. A control without
/// a dB scale is set linearly over its raw range.
///
/// Thread: any thread but an output thread (alsa-lib talks to the kernel); calls are serialized
/// internally.
public final class MixerControl: @unchecked Sendable {
    // @unchecked: the mixer handle is only touched under `lock`.
    /// The mixer device (`hw:CARD=sndrpihifiberry`, `hw:0`, `default`).
    public let device: String
    /// The simple control's name.
    public let control: String
    /// The control's dB range (min, max) in dB, when it has one.
    public let decibelRange: ClosedRange<Double>?
    /// Whether it has a playback switch (used to mute at volume 0).
    public let hasSwitch: Bool

    private let lock = Mutex(())
    private let handle: OpaquePointer
    private let element: OpaquePointer
    private let rawRange: ClosedRange<Int>

    /// Opens `control` on the mixer `device`. Throws with the device and control named when the
    /// card is missing, the control does not exist or has no playback volume.
    public init(device: String, control: String) throws(ALSAError) {
        self.device = device
        self.control = control
        let what = "mixer \(device) control \"\(control)\""
        var mixer: OpaquePointer?
        try check(snd_mixer_open(&mixer, 0), "open", what)
        guard let mixer else { throw ALSAError(operation: "open", pcm: what, code: -ENOMEM) }
        do {
            try check(snd_mixer_attach(mixer, device), "attach", what)
            try check(snd_mixer_selem_register(mixer, nil, nil), "register", what)
            try check(snd_mixer_load(mixer), "load", what)
        } catch {
            snd_mixer_close(mixer)
            throw error
        }
        var id: OpaquePointer?
        guard snd_mixer_selem_id_malloc(&id) == 0, let id else {
            snd_mixer_close(mixer)
            throw ALSAError(operation: "find control", pcm: what, code: -ENOMEM)
        }
        defer { snd_mixer_selem_id_free(id) }
        snd_mixer_selem_id_set_index(id, 0)
        snd_mixer_selem_id_set_name(id, control)
        guard let element = snd_mixer_find_selem(mixer, id), snd_mixer_selem_has_playback_volume(element) != 0 else {
            snd_mixer_close(mixer)
            throw ALSAError(operation: "find a playback volume control", pcm: what, code: -ENOENT)
        }
        handle = mixer
        self.element = element
        var low = 0
        var high = 0
        snd_mixer_selem_get_playback_volume_range(element, &low, &high)
        rawRange = low...max(low, high)
        var dbLow = 0
        var dbHigh = 0
        if snd_mixer_selem_get_playback_dB_range(element, &dbLow, &dbHigh) == 0, dbHigh > dbLow {
            decibelRange = Double(dbLow) / 100...Double(dbHigh) / 100
        } else {
            decibelRange = nil
        }
        hasSwitch = snd_mixer_selem_has_playback_switch(element) != 0
    }

    deinit { snd_mixer_close(handle) }

    /// Sets the control for user volume `linear` (0...1).
    public func setVolume(_ linear: Double) throws(ALSAError) {
        let v = min(max(linear.isFinite ? linear : 0, 0), 1)
        let what = "mixer \(device) control \"\(control)\""
        try lock.withLock { _ throws(ALSAError) in
            let setting = Self.setting(for: v, decibels: decibelRange, raw: rawRange)
            switch setting {
            case .decibels(let db):
                try check(snd_mixer_selem_set_playback_dB_all(element, Int(db * 100), -1), "set volume", what)
            case .raw(let value):
                try check(snd_mixer_selem_set_playback_volume_all(element, value), "set volume", what)
            case .mute:
                try check(snd_mixer_selem_set_playback_volume_all(element, rawRange.lowerBound), "set volume", what)
            }
            if hasSwitch {
                try check(
                    snd_mixer_selem_set_playback_switch_all(element, setting == .mute ? 0 : 1), "set switch", what)
            }
        }
    }

    /// What the control is set to for a user volume.
    public enum Setting: Equatable, Sendable {
        case decibels(Double)
        case raw(Int)
        case mute
    }

    /// The setting for user volume `v` (0...1): 20·log10(v) dB clamped to the dB range (mute below
    /// it), or linear over the raw range when there is no dB scale. Pure.
    public static func setting(for v: Double, decibels: ClosedRange<Double>?, raw: ClosedRange<Int>) -> Setting {
        if v <= 0 { return .mute }
        if let decibels {
            let db = 20 * log10(v)
            if db < decibels.lowerBound { return .mute }
            return .decibels(min(db, decibels.upperBound))
        }
        return .raw(raw.lowerBound + Int((Double(raw.upperBound - raw.lowerBound) * v).rounded()))
    }

    /// The mixer device that belongs to a PCM name: `hw:CARD=x,DEV=0` and `plughw:x,0` → `hw:CARD=x`
    /// / `hw:x`; anything else (`default`, a plugin) → `default`. Pure.
    public static func device(forPCM pcm: String) -> String {
        for prefix in ["plughw:", "hw:"] where pcm.hasPrefix(prefix) {
            let rest = pcm.dropFirst(prefix.count)
            let card = rest.split(separator: ",").first.map(String.init) ?? String(rest)
            return "hw:" + card
        }
        return "default"
    }
}
