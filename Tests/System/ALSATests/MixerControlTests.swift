import ALSA
import Testing

/// The hardware volume control: the volume → setting mapping, the mixer device of a PCM, and the
/// real alsa-lib error for a card that is not there (this machine has no sound card, so the
/// success path cannot run here).
@Suite struct MixerControlTests {
    @Test func mapsUserVolumeToDecibels() {
        let range: ClosedRange<Double> = -103.5...0
        #expect(MixerControl.setting(for: 1, decibels: range, raw: 0...207) == .decibels(0))
        guard case .decibels(let half) = MixerControl.setting(for: 0.5, decibels: range, raw: 0...207) else {
            Issue.record("0.5 should be a dB setting")
            return
        }
        #expect(abs(half - -6.0206) < 1e-3)
        #expect(MixerControl.setting(for: 0, decibels: range, raw: 0...207) == .mute)
        #expect(MixerControl.setting(for: 1e-6, decibels: range, raw: 0...207) == .mute, "below the range mutes")
        // A control that goes above 0 dB is not pushed past 0 dB by volume 1.
        #expect(MixerControl.setting(for: 1, decibels: -60...6, raw: 0...100) == .decibels(0))
        // No dB scale: linear over the raw range.
        #expect(MixerControl.setting(for: 0.5, decibels: nil, raw: 0...31) == .raw(16))
        #expect(MixerControl.setting(for: 1, decibels: nil, raw: 10...110) == .raw(110))
    }

    @Test(arguments: [
        ("hw:CARD=sndrpihifiberry,DEV=0", "hw:CARD=sndrpihifiberry"), ("hw:0,0", "hw:0"),
        ("plughw:1,0", "hw:1"), ("hw:Device", "hw:Device"), ("default", "default"),
        ("baton_kitchen", "default"),
    ])
    func findsTheMixerDeviceOfAPCM(pcm: String, device: String) {
        #expect(MixerControl.device(forPCM: pcm) == device)
    }

    @Test func missingCardIsAClearError() {
        let error = #expect(throws: ALSAError.self) {
            try MixerControl(device: "hw:CARD=nonexistent", control: "Digital")
        }
        let text = error?.description ?? ""
        #expect(text.contains("hw:CARD=nonexistent") && text.contains("\"Digital\""), "\(text)")
        #expect(text.contains("attach"), "\(text)")
    }
}
