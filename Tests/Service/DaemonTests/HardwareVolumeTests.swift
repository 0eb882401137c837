import BatonTesting
import OSThread
import Testing

@testable import BatonDaemon
@testable import BatonService
@testable import ControlParts

/// A zone configured for hardware volume whose mixer control cannot be opened (this machine has
/// no sound card) says so and falls back to software gain; the volume API works on.
@Suite(.ownThread) struct HardwareVolumeTests {
    @Test func missingMixerFallsBackToSoftwareGain() throws {
        let t = try TestDaemon(mixers: ["kitchen": "Digital"])
        defer { t.stop() }
        let event = try #require(t.waitForEvent("volume-control"))
        #expect(event.zones == ["kitchen"])
        #expect(
            event.reason?.contains("hardware volume \"Digital\" on default unavailable") == true,
            "\(event.reason ?? "")")
        #expect(event.reason?.hasSuffix("using software gain") == true)
        let kitchen = try #require(try t.status().zones.first { $0.name == "kitchen" })
        #expect(kitchen.volumeControl == "software")
        #expect(try t.request("POST", "/api/v1/zones/kitchen/volume", #"{"volume": 0.5}"#).status == 200)
        #expect(waitUntil { (try? t.status().zones.first { $0.name == "kitchen" }?.appliedVolume) == 0.5 })
    }
}
