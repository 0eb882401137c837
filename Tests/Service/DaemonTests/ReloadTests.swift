import BatonConfig
import BatonTesting
import FoundationEssentials
import Glibc
import OSThread
import Testing

@testable import BatonDaemon
@testable import BatonService
@testable import ControlParts

/// Configuration reload: applied as a diff, unchanged zones never stop, invalid configs are refused.
@Suite(.serialized, .ownThread) struct ReloadTests {
    /// Changing one zone and adding another leaves the unchanged zone's device and its music
    /// untouched: the tone in its file never breaks across the reload.
    @Test func reloadKeepsUnchangedZonesPlaying() throws {
        let t = try TestDaemon()
        let music = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"sound": "music440", "zones": ["kitchen"], "loop": true}"#)
                .object["id"])
        #expect(waitUntil { (try? t.status().sources.first?.positionSeconds ?? 0) ?? 0 > 0.3 })
        let kitchenDevice = try #require(t.daemon.output("kitchen")?.device)
        var new = t.config
        new.zones[1].rate = 44_100  // patio changes
        let garage = ALSATestRig.makePCM()
        new.zones.append(ZoneConfig(name: "garage", pcm: garage.name, rate: 48_000, clock: .system))
        let before = kitchenDevice.snapshot().framesPlayed
        let report = t.daemon.apply(new)
        #expect(report.applied)
        #expect(report.zonesUnchanged == ["kitchen"])
        #expect(report.zonesChanged == ["patio"])
        #expect(report.zonesAdded == ["garage"])
        #expect(t.daemon.output("kitchen")?.device === kitchenDevice, "the kitchen's output thread was kept")
        #expect(waitUntil { t.daemon.output("garage")?.device.snapshot().available == true })
        #expect(try t.status().sources.first { $0.id == music }?.state == "playing")
        usleep(300_000)
        t.stop()
        let out = t.left("kitchen")
        for at in stride(from: before - 4_410, to: before + 8_820, by: 441) {
            #expect(
                Signals.windowedToneLevel(out[at..<(at + 441)], frequency: 440, rate: 44_100) > 0.45,
                "tone at frame \(at)")
        }
        #expect(kitchenDevice.snapshot().lateCycles == 0)
        #expect(t.daemon.zones.zone("patio")?.rate == 44_100)
    }

    /// An invalid config sent by `POST /api/v1/reload` is refused with its errors (file:line:col) and the
    /// running configuration stays.
    @Test func invalidReloadKeepsRunningConfig() throws {
        let dir = TestDirectory.make("reload")
        let path = dir + "/baton.yaml"
        let t = try TestDaemon(configPath: path)
        defer { t.stop() }
        let f = try #require(fopen(path, "w"))
        fputs("zones:\n  kitchen:\n    pcm: x\n    rate: 12\n", f)
        fclose(f)
        let r = try t.request("POST", "/api/v1/reload")
        #expect(r.status == 422)
        let report = try JSONDecoder().decode(ReloadReport.self, from: Data(r.body))
        #expect(!report.applied)
        #expect(report.errors.contains { $0.hasPrefix("\(path):4:11: zones.kitchen.rate") }, "\(report.errors)")
        #expect(t.daemon.config == t.config)
        #expect(try t.status().zones.map(\.name) == ["kitchen", "patio"])
        #expect(t.daemon.events.recent().contains { $0.type == "reload-rejected" })
    }

    /// A reload of a file whose `api.token-file` is missing or empty, whose `alsa-config` cannot be
    /// read or whose `output-dir` cannot be made is refused whole, each file at its key with its
    /// path, and the running configuration stays: it was applied, and the next start (at boot)
    /// exited 1, which systemd does not restart.
    @Test func aReloadRefusesTheFilesAStartCannotOpen() throws {
        let dir = TestDirectory.make("reload-files")
        let path = dir + "/baton.yaml"
        let t = try TestDaemon(configPath: path)
        defer { t.stop() }
        _ = FileIO.writeAtomically([], to: dir + "/empty.token")
        let yaml = """
            api:
              token-file: empty.token
            alsa-config: missing.conf
            output-dir: no/such/out
            zones:
              kitchen: {pcm: x}

            """
        _ = FileIO.writeAtomically(Array(yaml.utf8), to: path)
        let r = try t.request("POST", "/api/v1/reload")
        #expect(r.status == 422)
        let report = try JSONDecoder().decode(ReloadReport.self, from: Data(r.body))
        #expect(!report.applied)
        #expect(
            report.errors == [
                "\(path):2:15: api.token-file: \"\(dir)/empty.token\" is empty: its first line must be the API's token",
                "\(path):3:14: alsa-config: cannot read \"\(dir)/missing.conf\": No such file or directory",
                "\(path):4:13: output-dir: cannot create \"\(dir)/no/such/out\": No such file or directory (batond makes only its last directory: \"\(dir)/no/such\" must exist)",
            ], "\(report.errors)")
        #expect(t.daemon.config == t.config)
        #expect(try t.status().zones.map(\.name) == ["kitchen", "patio"])
        let rejected = t.daemon.events.recent().first { $0.type == "reload-rejected" }
        #expect(rejected?.reason?.contains("api.token-file") == true, "\(String(describing: rejected))")
    }

    /// What the file says that a start takes another way (a fractional keepalive, a bus beside mpd,
    /// an output-dir that is a file) does not refuse a reload: it is applied, and the report's
    /// warnings say each at its line. Refused, a reload after an upgrade kept the old file, and the
    /// next start exited 1.
    @Test func aReloadWarnsOfWhatAStartTakesOtherwise() throws {
        let dir = TestDirectory.make("reload-warnings")
        let path = dir + "/baton.yaml"
        let t = try TestDaemon(configPath: path)
        defer { t.stop() }
        _ = FileIO.writeAtomically(Array("x\n".utf8), to: dir + "/out")
        let yaml = """
            output-dir: out
            mqtt: {broker: "mqtt://127.0.0.1:1", keepalive: 7.5s}
            external-sources:
              socket: sources.sock
              player: {control: {mpd: "127.0.0.1:6600", bus: system}}
            zones:
              kitchen: {pcm: x}

            """
        _ = FileIO.writeAtomically(Array(yaml.utf8), to: path)
        let r = try t.request("POST", "/api/v1/reload")
        #expect(r.status == 200, "\(r.text)")
        let report = try JSONDecoder().decode(ReloadReport.self, from: Data(r.body))
        #expect(report.applied && report.errors.isEmpty, "\(report.errors)")
        #expect(
            report.warnings == [
                "\(path):1:13: output-dir: \"\(dir)/out\" is not a directory: file PCMs cannot write there",
                "\(path):2:49: mqtt.keepalive: 7.5s is not a whole number of seconds: 8s is used (MQTT's keepalive is counted in seconds)",
                "\(path):5:45: external-sources.player.control.bus: bus is only for mpris (the D-Bus bus its player is on): ignored beside mpd",
            ], "\(report.warnings)")
        #expect(try t.status().zones.map(\.name) == ["kitchen"])
    }

    /// `POST /api/v1/zones/<zone>/volume` sets the user's zone volume; a bad value or zone is a clear error.
    @Test func zoneVolumeOverTheAPI() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        #expect(try t.request("POST", "/api/v1/zones/kitchen/volume", #"{"volume": 0.25}"#).status == 200)
        #expect(waitUntil { (try? t.status().zones[0].appliedVolume) == 0.25 })
        let bad = try t.request("POST", "/api/v1/zones/kitchen/volume", #"{"volume": 2}"#)
        #expect(bad.status == 400)
        #expect(bad.text.contains("between 0 and 1"))
        #expect(try t.request("POST", "/api/v1/zones/cellar/volume", #"{"volume": 0.5}"#).status == 404)
    }

    /// A reload that changes only a zone's settings off its device (here `max-volume`, lowered
    /// under the volume a listener set) is a change: the zone is reported changed and starts anew
    /// with them (the listener's volume, within the new maximum). It was reported unchanged and
    /// went on at 0.9 with a maximum of 0.5.
    @Test func aChangeOfAZonesSettingsIsApplied() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        var half = t.config
        half.zones[0].volume = 0.5
        #expect(t.daemon.apply(half).zonesChanged == ["kitchen"])
        #expect(try t.request("POST", "/api/v1/zones/kitchen/volume", #"{"volume": 0.9}"#).status == 200)
        var new = half
        new.zones[0].maxVolume = 0.5
        let report = t.daemon.apply(new)
        #expect(report.zonesChanged == ["kitchen"] && report.zonesUnchanged == ["patio"], "\(report)")
        let kitchen = try #require(try t.status().zones.first { $0.name == "kitchen" })
        #expect(kitchen.volume <= 0.5, "volume \(kitchen.volume) above the new max-volume 0.5")
        #expect(try t.request("POST", "/api/v1/zones/kitchen/volume", #"{"volume": 0.6}"#).status != 200)
    }

    /// A zone a reload reopens keeps the volume its listener set (here patio's rate changes): it
    /// started at the configured volume again, the listener's setting lost (on a hardware control
    /// too, and in the state file at the next save). A change of the configured `volume` itself
    /// is what the new output starts at.
    @Test func aReopenedZoneKeepsItsListenersVolume() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        #expect(try t.request("POST", "/api/v1/zones/patio/volume", #"{"volume": 0.3}"#).status == 200)
        var new = t.config
        new.zones[1].rate = 44_100
        #expect(t.daemon.apply(new).zonesChanged == ["patio"])
        let patio = { (try? t.status().zones.first { $0.name == "patio" }?.volume) ?? -1 }
        #expect(abs(patio() - 0.3) < 1e-6, "\(patio())")
        new.zones[1].volume = 0.7
        #expect(t.daemon.apply(new).zonesChanged == ["patio"])
        #expect(abs(patio() - 0.7) < 1e-6, "\(patio())")
    }

    /// A zone without a `volume` of its own (it starts at its `max-volume`) whose cap alone is
    /// edited in the file keeps the volume its listener set, within the new cap; only a written
    /// `volume` that changes is started at. The parser took the unwritten volume for the cap, so
    /// the cap's change read as a change of `volume`: the kitchen set to 30 % came back at 100 %.
    @Test func aChangedMaxVolumeInTheFileKeepsTheListenersVolume() throws {
        let path = TestDirectory.make("reload-max-volume") + "/baton.yaml"
        let t = try TestDaemon(configPath: path)
        defer { t.stop() }
        let reload = { (kitchen: String) in
            TextFile.write(
                path,
                """
                zones:
                  kitchen: {pcm: \(t.config.zones[0].pcm), rate: 44100, clock: system, \(kitchen)}
                  patio: {pcm: \(t.config.zones[1].pcm), rate: 48000, clock: system}
                sounds: \(t.sounds)
                """)
            return t.daemon.reload()
        }
        let kitchen = { (try? t.status().zones.first { $0.name == "kitchen" }?.volume) ?? -1 }
        #expect(reload("max-volume: 80%").zonesChanged == ["kitchen"])
        #expect(try t.request("POST", "/api/v1/zones/kitchen/volume", #"{"volume": 0.3}"#).status == 200)
        let raised = reload("max-volume: 100%")
        #expect(raised.applied && raised.zonesChanged == ["kitchen"], "\(raised)")
        #expect(abs(kitchen() - 0.3) < 1e-6, "\(kitchen())")
        #expect(reload("max-volume: 20%").zonesChanged == ["kitchen"])
        #expect(abs(kitchen() - 0.2) < 1e-6, "within the new cap: \(kitchen())")
        #expect(reload("max-volume: 90%, volume: 70%").zonesChanged == ["kitchen"])
        #expect(abs(kitchen() - 0.7) < 1e-6, "the written volume: \(kitchen())")
    }

    /// Music from the server heard on a zone a reload reopens (patio's rate changes) plays on
    /// after it, on both zones, from where it was heard: it ended for good, also in the kitchen the
    /// reload left alone, until someone asked `music/resume`.
    @Test func serverMusicOnAReopenedZonePlaysOn() throws {
        let t = try TestDaemon(music: try TestSubsonic.music())
        defer { t.stop() }
        let play = try t.json("POST", "/api/v1/music/play", #"{"search": "Long Tone", "zones": ["kitchen", "patio"]}"#)
        let id = try #require(play.object["id"], "\(play)")
        let position = { (id: String) in (try? t.status().sources.first { $0.id == id }?.positionSeconds ?? 0) ?? 0 }
        #expect(waitUntil(seconds: 15) { position(id) > 1.0 })
        var new = t.config
        new.zones[1].rate = 44_100
        let heard = position(id)
        #expect(t.daemon.apply(new).zonesChanged == ["patio"])
        let again = try #require(
            try t.status().sources.first { $0.id != id && $0.state != "stopped" }, "the music plays on")
        #expect(Set(again.zones) == ["kitchen", "patio"], "\(again.zones)")
        #expect(waitUntil(seconds: 15) { position(again.id) > heard + 0.5 })
        #expect(abs(position(again.id) - heard) < 3, "from where it was heard (\(heard) s)")
    }

    /// Server music a doorbell interrupts, on both zones, when a reload reopens patio (its rate
    /// changes): the reload ends the doorbell there, and the music resumes from where it was cut,
    /// on both zones, as it does when a doorbell ends. Only audible music was asked again: the
    /// interrupted one ended for good (saved as not playing), and nothing came back.
    @Test func interruptedServerMusicOnAReopenedZoneResumes() throws {
        let t = try TestDaemon(music: try TestSubsonic.music())
        defer { t.stop() }
        WAVWriter.write(
            Signals.sine(frequency: 1000, rate: 48_000, frames: 8 * 48_000, channels: 2, amplitude: 0.5),
            rate: 48_000, channels: 2, to: "\(t.sounds)/bell8s.wav")
        let play = try t.json("POST", "/api/v1/music/play", #"{"search": "Long Tone", "zones": ["kitchen", "patio"]}"#)
        let id = try #require(play.object["id"], "\(play)")
        let source = { (id: String) in try? t.status().sources.first { $0.id == id } }
        let position = { (id: String) in source(id)?.positionSeconds ?? 0 }
        #expect(waitUntil(seconds: 15) { position(id) > 1.0 })
        let bell = try t.json("POST", "/api/v1/announce", #"{"sound": "bell8s", "zones": ["kitchen", "patio"]}"#)
        let bellID = try #require(bell.object["id"], "\(bell)")
        #expect(waitUntil { source(id)?.state == "interrupted" }, "\(String(describing: source(id)))")
        let cut = position(id)
        var new = t.config
        new.zones[1].rate = 44_100
        #expect(t.daemon.apply(new).zonesChanged == ["patio"])
        let sources = try t.status().sources
        let again = try #require(
            sources.first { ![id, bellID].contains($0.id) && $0.class == "music" }, "the music goes on: \(sources)")
        #expect(Set(again.zones) == ["kitchen", "patio"], "\(again.zones)")
        #expect(waitUntil(seconds: 15) { position(again.id) > cut + 0.5 }, "\(position(again.id)) after \(cut)")
        #expect(abs(position(again.id) - cut) < 3, "from where it was cut (\(cut) s)")
    }

    /// The same with music's resume-within at 1 s and the doorbell 2 s in when the reload comes:
    /// the doorbell's end would leave the music paused (interrupted longer than resume-within), so
    /// the reload does not ask it again either — it ends as paused, its queue saved where it was
    /// cut for `music/resume`, and the reload's report says so. It was asked again as new music
    /// and played at once (the reload had ended the doorbell), against the rule.
    @Test func musicInterruptedLongerThanResumeWithinStaysPausedAcrossAReload() throws {
        var policy = PolicyConfig.default
        let music = try #require(policy.classes.firstIndex { $0.name == "music" })
        policy.classes[music].resumeWithin = .seconds(1)
        let t = try TestDaemon(policy: policy, music: try TestSubsonic.music())
        defer { t.stop() }
        WAVWriter.write(
            Signals.sine(frequency: 1000, rate: 48_000, frames: 8 * 48_000, channels: 2, amplitude: 0.5),
            rate: 48_000, channels: 2, to: "\(t.sounds)/bell8s.wav")
        let play = try t.json("POST", "/api/v1/music/play", #"{"search": "Long Tone", "zones": ["kitchen", "patio"]}"#)
        let id = try #require(play.object["id"], "\(play)")
        let source = { (id: String) in try? t.status().sources.first { $0.id == id } }
        #expect(waitUntil(seconds: 15) { (source(id)?.positionSeconds ?? 0) > 1.0 })
        let bell = try t.json("POST", "/api/v1/announce", #"{"sound": "bell8s", "zones": ["kitchen", "patio"]}"#)
        let bellID = try #require(bell.object["id"], "\(bell)")
        #expect(waitUntil { source(id)?.state == "interrupted" }, "\(String(describing: source(id)))")
        let cut = source(id)?.positionSeconds ?? 0
        usleep(2_000_000)  // past resume-within
        var new = t.config
        new.zones[1].rate = 44_100
        let report = t.daemon.apply(new)
        #expect(report.zonesChanged == ["patio"])
        // Said where the user sees it (the API's answer): only a log line said so.
        #expect(
            report.warnings == [
                "\(id) was interrupted longer than its resume-within: it stays paused, its queue saved where it was cut (music/resume plays it on)"
            ])
        usleep(500_000)
        let sources = try t.status().sources
        #expect(
            !sources.contains { ![id, bellID].contains($0.id) && $0.class == "music" },
            "no music asked again: \(sources)")
        let saved = try #require(try t.status().savedQueue, "the queue is saved")
        #expect(!saved.playing)
        #expect(abs(saved.positionSeconds - cut) < 1, "saved at \(saved.positionSeconds) s, cut at \(cut) s")
    }

    /// Server music a call interrupts (resume-within 3 s) when a reload reopens the patio 1 s into
    /// it: the call goes on, and the music, asked again behind it, waits no longer than the 2 s left
    /// of its resume-within — it expires and stays paused, its queue saved, and the call's end
    /// later brings nothing back, as it would without the reload. It waited as any new music, and
    /// played when the call ended.
    @Test func musicAskedAgainBehindACallWaitsNoLongerThanItsResumeWithin() throws {
        var policy = PolicyConfig.default
        let music = try #require(policy.classes.firstIndex { $0.name == "music" })
        policy.classes[music].resumeWithin = .seconds(3)
        let t = try TestDaemon(
            policy: policy, music: try TestSubsonic.music(),
            intercom: IntercomConfig(
                listen: ListenAddress(host: "127.0.0.1", port: 0), zones: ["kitchen", "patio"],
                silenceTimeout: .seconds(60)))
        defer { t.stop() }
        let play = try t.json("POST", "/api/v1/music/play", #"{"search": "Long Tone", "zones": ["kitchen", "patio"]}"#)
        let id = try #require(play.object["id"], "\(play)")
        let source = { (id: String) in try? t.status().sources.first { $0.id == id } }
        #expect(waitUntil(seconds: 15) { (source(id)?.positionSeconds ?? 0) > 1.0 })
        #expect(try t.json("POST", "/api/v1/call/start").status == 202)
        #expect(waitUntil { source(id)?.state == "interrupted" }, "\(String(describing: source(id)))")
        usleep(1_000_000)
        var new = t.config
        new.zones[1].rate = 44_100
        #expect(t.daemon.apply(new).zonesChanged == ["patio"])
        let again = try #require(
            try t.status().sources.first { $0.id != id && $0.class == "music" }, "the music is asked again")
        #expect(again.state == "queued", "behind the call that goes on: \(again)")
        let expired = t.waitForEvent("expired", source: again.id, seconds: 4)
        #expect(expired != nil, "it expires with its resume-within")
        #expect(try t.json("POST", "/api/v1/call/end").status == 200)
        usleep(500_000)
        let sources = try t.status().sources
        #expect(!sources.contains { $0.class == "music" }, "no music after the call: \(sources)")
        let saved = try #require(try t.status().savedQueue, "the queue is saved")
        #expect(!saved.playing)
    }

    /// A reload to a policy whose own class takes `announcement`'s priority is applied, and its
    /// report says that announcements are now refused: it said nothing, and every doorbell was
    /// refused afterwards.
    @Test func aReloadWarnsOfALeftOutClass() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        var new = t.config
        new.policy.classes.removeAll { $0.name == "announcement" }
        new.policy.classes.append(ClassConfig(name: "doorbell", priority: 50, kind: .transient))
        let report = t.daemon.apply(new)
        #expect(report.applied)
        #expect(
            report.warnings == [
                #"policy.classes: class "announcement" is left out (class "doorbell" has its priority 50): the API's announce is refused ("unknown class")"#
            ])
        #expect(t.daemon.apply(t.config).warnings.isEmpty)
    }

    /// A changed `output-dir` needs a restart, and the reload says so: the file PCMs it reopened
    /// still wrote into the old one (set up at start), and the report said nothing.
    @Test func aChangedOutputDirNeedsARestart() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        var new = t.config
        new.outputDir = TestDirectory.make("other-output")
        let report = t.daemon.apply(new)
        #expect(report.applied && report.needsRestart == ["output-dir"], "\(report.needsRestart)")
    }

    /// A reload that changes only sections no other field names (a group, the speech voice) says
    /// them in `sectionsChanged`: its report was that of a reload that changed nothing, and the web
    /// app said "Reloaded: nothing changed" of a reload that applied them. What needs a restart is
    /// there too; an unchanged file lists nothing.
    @Test func aReloadListsTheSectionsItChanged() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        #expect(t.daemon.apply(t.config).sectionsChanged == [])
        var new = t.config
        new.groups.append(GroupConfig(name: "everywhere", zones: ["kitchen", "patio"]))
        new.speech.speed = 120
        let report = t.daemon.apply(new)
        #expect(report.applied && report.sectionsChanged == ["groups", "speech"], "\(report.sectionsChanged)")
        #expect(
            report.zonesChanged.isEmpty && !report.policyChanged && !report.soundsChanged && report.needsRestart.isEmpty
        )
        new.outputDir = TestDirectory.make("other-output")
        #expect(t.daemon.apply(new).sectionsChanged == ["output-dir"], "only what differs from what runs")
    }

    /// A section whose only change waits for a restart is not said applied: a new socket for the
    /// external sources (`needsRestart`: `external-sources.socket`) left `external-sources` in the
    /// sections changed, and the web app said "settings applied: external-sources" beside "takes
    /// effect only after a restart", at every reload until the restart.
    @Test func aSectionWaitingForARestartIsNotSaidApplied() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        let dir = TestDirectory.make("applied")
        var new = t.config
        new.externalSources = ExternalSourcesConfig(socket: dir + "/a.sock", sources: [ExternalSourceConfig(name: "x")])
        let first = t.daemon.apply(new)
        #expect(first.sectionsApplied == ["external-sources"] && first.needsRestart.isEmpty, "set up: \(first)")
        new.externalSources?.socket = dir + "/b.sock"
        new.api.maxBody *= 2
        for _ in 0..<2 {
            let report = t.daemon.apply(new)
            #expect(report.sectionsChanged == ["api", "external-sources"], "\(report.sectionsChanged)")
            #expect(report.needsRestart == ["api", "external-sources.socket"], "\(report.needsRestart)")
            #expect(report.sectionsApplied == [], "\(report.sectionsApplied)")
        }
        new.externalSources?.sources.append(ExternalSourceConfig(name: "y"))
        new.groups.append(GroupConfig(name: "everywhere", zones: ["kitchen", "patio"]))
        let report = t.daemon.apply(new)
        #expect(report.sectionsApplied == ["groups", "external-sources"], "\(report.sectionsApplied)")
        #expect(report.needsRestart == ["api", "external-sources.socket"], "\(report.needsRestart)")
    }

    /// An `intercom` section a reload adds starts no receiver (that is done at start), and an
    /// `external-sources` section with only a `socket` sets no socket up (there are no sources):
    /// both wait for a restart and are not said applied. They were (`sectionsApplied`), beside
    /// the same sections in `needsRestart`.
    @Test func sectionsAReloadAddsButCannotStartAreNotSaidApplied() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        let socket = TestDirectory.make("applied-socket") + "/a.sock"
        var new = t.config
        new.intercom = Self.intercom
        new.externalSources = ExternalSourcesConfig(socket: socket, sources: [])
        for _ in 0..<2 {
            let report = t.daemon.apply(new)
            #expect(report.sectionsChanged == ["intercom", "external-sources"], "\(report.sectionsChanged)")
            #expect(report.needsRestart == ["intercom", "external-sources.socket"], "\(report.needsRestart)")
            #expect(report.sectionsApplied == [], "\(report.sectionsApplied)")
        }
        #expect(t.daemon.config.intercom == nil, "no receiver runs")
        #expect(access(socket, F_OK) != 0, "no socket was set up")
    }

    /// An `intercom` section a reload removes leaves the receiver running as it started, and calls
    /// on the zones it had, until a restart: not said applied (it was). Its zones changed while it
    /// stays are applied, and said so.
    @Test func anIntercomRemovedByAReloadIsNotSaidApplied() throws {
        let t = try TestDaemon(intercom: Self.intercom)
        defer { t.stop() }
        var new = t.config
        new.intercom = nil
        let removed = t.daemon.apply(new)
        #expect(removed.sectionsChanged == ["intercom"] && removed.needsRestart == ["intercom"], "\(removed)")
        #expect(removed.sectionsApplied == [], "\(removed.sectionsApplied)")
        #expect(t.daemon.config.intercom?.zones == Self.intercom.zones, "the calls' zones are kept")
        new.intercom = Self.intercom
        new.intercom?.zones = ["kitchen"]
        let zones = t.daemon.apply(new)
        #expect(zones.sectionsApplied == ["intercom"] && zones.needsRestart == [], "\(zones)")
    }

    /// What a reload does not apply stays as it runs in the configuration kept: the API's limits
    /// and listen address, the state directory. `GET /api/v1/config` showed the new ones while the
    /// old ran, the MQTT bridge took the new `api.max-body` while the API kept the old, and a
    /// second reload, compared with them, no longer said a restart was needed.
    @Test func whatNeedsARestartStaysAsItRunsUntilThen() throws {
        let t = try TestDaemon(stateDir: TestDirectory.make("state"))
        defer { t.stop() }
        let running = t.config
        var new = t.config
        new.api.maxBody = 2 * running.api.maxBody
        new.stateDir = TestDirectory.make("other-state")
        #expect(t.daemon.apply(new).needsRestart == ["api", "state-dir"])
        #expect(t.daemon.config.api == running.api && t.daemon.config.stateDir == running.stateDir)
        let shown = try t.request("GET", "/api/v1/config").text.replacing("\\/", with: "/")
        let (kept, other) = (try #require(running.stateDir), try #require(new.stateDir))
        #expect(shown.contains(kept) && !shown.contains(other), "\(shown)")
        new.zones[0].volume = 0.5
        let second = t.daemon.apply(new)
        #expect(second.needsRestart == ["api", "state-dir"], "said again: \(second.needsRestart)")
        #expect(t.daemon.config.zones[0].volume == 0.5, "what a reload applies is applied")
    }

    /// Server music on patio, a reload that reopens it, and other music (a looped sound) playing on
    /// in the kitchen the reload leaves alone: the server music plays on too. Any music then was
    /// taken for music started meanwhile, and the server's stopped for good.
    @Test func serverMusicPlaysOnBesideOtherMusic() throws {
        let t = try TestDaemon(music: try TestSubsonic.music())
        defer { t.stop() }
        let loop = try t.json(
            "POST", "/api/v1/music/play", #"{"sound": "music440", "zones": ["kitchen"], "loop": true}"#)
        let looped = try #require(loop.object["id"], "\(loop)")
        let play = try t.json("POST", "/api/v1/music/play", #"{"search": "Long Tone", "zones": ["patio"]}"#)
        let id = try #require(play.object["id"], "\(play)")
        let position = { (id: String) in (try? t.status().sources.first { $0.id == id }?.positionSeconds ?? 0) ?? 0 }
        #expect(waitUntil(seconds: 15) { position(id) > 1.0 })
        var new = t.config
        new.zones[1].rate = 44_100
        #expect(t.daemon.apply(new).zonesChanged == ["patio"])
        let sources = try t.status().sources
        let again = try #require(
            sources.first { ![id, looped].contains($0.id) && $0.state != "stopped" },
            "the server music plays on: \(sources)")
        #expect(again.zones == ["patio"], "\(again.zones)")
        #expect(sources.contains { $0.id == looped && $0.state == "playing" }, "the kitchen's music plays on")
    }

    /// A reload plays sound files as they are now: a doorbell replaced on disk (the settings the
    /// same) rang as its old self, decoded and cached, until a restart.
    @Test func aReloadForgetsTheSoundsAsTheyWere() throws {
        let t = try TestDaemon(policy: AudioTruthTests.uncoalescedAnnouncements)
        let first = try #require(
            try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k", "zones": ["kitchen"]}"#).object["id"])
        #expect(t.waitForEvent("played", source: first) != nil)
        WAVWriter.write(
            Signals.sine(frequency: 600, rate: 48_000, frames: 24_000, channels: 2, amplitude: 0.5),
            rate: 48_000, channels: 2, to: "\(t.sounds)/bell1k.wav")
        #expect(t.daemon.apply(t.config).applied)
        let second = try #require(
            try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k", "zones": ["kitchen"]}"#).object["id"])
        #expect(t.waitForEvent("played", source: second) != nil)
        t.stop()
        let out = t.left("kitchen")
        let heard = stride(from: 0, to: out.count - 2_205, by: 2_205).contains {
            Signals.windowedToneLevel(out[$0..<($0 + 2_205)], frequency: 600, rate: 44_100) > 0.3
        }
        #expect(heard, "the new doorbell (600 Hz) was heard")
    }

    /// The kitchen's `buffer: 1s` makes every zone's slot rings 1.75 s long. A reload that shortens
    /// it, then one that removes the kitchen, leaves the patio's music playing untouched (its
    /// device kept): its rings, longer than needed now, serve; the kitchen reopened gets rings as
    /// long as the patio's, so that they stay one length. A reload whose rings must grow (the
    /// kitchen back with `buffer: 2s`) reopens the patio too. With the rings compared whole, the
    /// first two reopened the patio: its music cut for nothing.
    @Test func aReloadReopensTheOtherZonesOnlyWhenTheRingsMustGrow() throws {
        let t = try TestDaemon(buffers: ["kitchen": .seconds(1)])
        defer { t.stop() }
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"sound": "music440", "zones": ["patio"], "loop": true}"#)
                .object["id"])
        let playing = { (try? t.status().sources.first { $0.id == id }?.state) == "playing" }
        #expect(waitUntil { playing() })
        let frames = { (zone: String) in (t.daemon.output(zone)?.mixer.slots[0].ring.capacity ?? 0) / 2 }
        let patio = try #require(t.daemon.output("patio")?.device)
        #expect(frames("patio") == 84_000, "1.75 s at 48 kHz")
        var shorter = t.config
        shorter.zones[0].buffer = .milliseconds(40)
        let report = t.daemon.apply(shorter)
        #expect(report.zonesChanged == ["kitchen"] && report.zonesUnchanged == ["patio"], "\(report)")
        #expect(t.daemon.output("patio")?.device === patio, "the patio's output was kept")
        #expect(frames("kitchen") == 77_175, "the patio's 1.75 s at 44.1 kHz")
        var without = shorter
        without.zones.removeFirst()
        let removed = t.daemon.apply(without)
        #expect(removed.zonesRemoved == ["kitchen"] && removed.zonesUnchanged == ["patio"], "\(removed)")
        #expect(t.daemon.output("patio")?.device === patio, "the patio's output was kept")
        #expect(playing())
        var longer = t.config
        longer.zones[0].buffer = .seconds(2)
        let grown = t.daemon.apply(longer)
        #expect(grown.zonesAdded == ["kitchen"] && grown.zonesChanged == ["patio"], "\(grown)")
        #expect(t.daemon.output("patio")?.device !== patio, "the patio was reopened")
        #expect(frames("patio") == 156_000, "3.25 s at 48 kHz")
        #expect(frames("kitchen") == 143_325, "3.25 s at 44.1 kHz")
    }

    /// A zone a reload reopens is not reported as an outage: its new device, not open yet, was read
    /// as "opening PCM" after the old one had been available, and every changed zone flapped
    /// `zone-unavailable` → `zone-available` within a few milliseconds. Now it is seen as at start:
    /// one `zone-available` when the new device opens.
    @Test func aReopenedZoneIsNotSaidUnavailable() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        #expect(waitUntil { t.daemon.output("patio")?.device.snapshot().available == true })
        t.daemon.tick()  // the monitor has said patio is available
        let before = t.daemon.events.recent().count
        var new = t.config
        new.zones[1].rate = 44_100
        #expect(t.daemon.apply(new).zonesChanged == ["patio"])
        t.daemon.tick()  // a look before the new device opened
        #expect(waitUntil { t.daemon.output("patio")?.device.snapshot().available == true })
        t.daemon.tick()
        let after = t.daemon.events.recent().dropFirst(before).filter { $0.zones == ["patio"] }.map(\.type)
        #expect(after == ["zone-available"], "\(after)")
    }

    /// A request whose zone a reload changes while its source is made (here from inside `make`, the
    /// window between reading the zones and the arbiter's lock) is refused: its sound was made for
    /// 48 kHz and would have played on the reopened 44.1 kHz zone 9 % slow. A reload that reopens the
    /// zone with the same rate and channels leaves the request good: it plays there, heard.
    @Test func aRequestAdmittedAcrossAReloadIsMadeForTheZoneItPlaysIn() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        #expect(waitUntil { t.daemon.output("patio")?.device.snapshot().available == true })
        var slower = t.config
        slower.zones[1].rate = 44_100
        #expect(throws: ControlError.self) {
            try t.daemon.admit(.announcement, zones: ["patio"], volume: 1) { available throws(ControlError) in
                #expect(t.daemon.apply(slower).zonesChanged == ["patio"])
                return try t.daemon.sounds.player("bell1k", loop: false, in: available)
            }
        }
        let refused = t.daemon.events.recent().contains { $0.type == "granted" && $0.zones == ["patio"] }
        #expect(!refused, "nothing was granted on patio")
        #expect(waitUntil { t.daemon.output("patio")?.device.snapshot().available == true })
        var quieter = slower
        quieter.zones[1].volume = 0.8
        let admitted = try t.daemon.admit(.announcement, zones: ["patio"], volume: 1) {
            available throws(ControlError) in
            #expect(t.daemon.apply(quieter).zonesChanged == ["patio"])
            return try t.daemon.sounds.player("bell1k", loop: false, in: available)
        }
        #expect(admitted.outcome == .playing)
        #expect(
            waitUntil {
                (try? t.status().zones.first { $0.name == "patio" }?.audible.contains(admitted.id)) == true
            })
    }

    /// A request made from the configuration before a reload (an external program whose source's
    /// settings were read just before it) is refused: it would play with settings batond no longer
    /// has, or through a source it removed. The same request made after it is admitted.
    @Test func aRequestFromTheConfigurationBeforeAReloadIsRefused() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        #expect(waitUntil { t.daemon.output("kitchen")?.device.snapshot().available == true })
        let before = t.daemon.state.withLock { $0.configGeneration }
        #expect(t.daemon.apply(t.config).zonesUnchanged == ["kitchen", "patio"])
        #expect(throws: ControlError.self) {
            try t.daemon.admit(.announcement, zones: ["kitchen"], volume: 1, configuration: before) {
                available throws(ControlError) in
                try t.daemon.sounds.player("bell1k", loop: false, in: available)
            }
        }
        let now = t.daemon.state.withLock { $0.configGeneration }
        #expect(now == before + 1)
        let admitted = try t.daemon.admit(.announcement, zones: ["kitchen"], volume: 1, configuration: now) {
            available throws(ControlError) in
            try t.daemon.sounds.player("bell1k", loop: false, in: available)
        }
        #expect(admitted.outcome == Outcome.playing)
    }
}

extension ReloadTests {
    /// A reload applied as batond stops (a SIGHUP that came with the SIGTERM), after its external
    /// sources' socket was stopped, adds sources: their socket is not set up again. A reload sets
    /// the socket up when there was none (546834a), and a late one left it listening after the stop.
    @Test func aReloadAfterTheStopSetsNoSocketUp() throws {
        let t = try TestDaemon()
        let socket = TestDirectory.make("late-reload") + "/sources.sock"
        var config = t.config
        config.externalSources = ExternalSourcesConfig(socket: socket, sources: [ExternalSourceConfig(name: "x")])
        t.stop()
        let report = t.daemon.apply(config)
        // Refused whole: nothing is started again once the stop began (an output started by a late
        // reload was never stopped, nor faded).
        #expect(!report.applied && report.errors == ["batond is stopping: the configuration is not applied"])
        #expect(t.daemon.parts.external.server == nil)
        #expect(access(socket, F_OK) != 0, "nothing listens at \(socket)")
    }
}

/// What a reload ends and does not ask again is said in its report, and music it cannot play on
/// as it was is left paused with its queue, not lost or played from the wrong place.
extension ReloadTests {
    /// A call on both zones, with the intercom.
    static let intercom = IntercomConfig(
        listen: ListenAddress(host: "127.0.0.1", port: 0), zones: ["kitchen", "patio"], silenceTimeout: .seconds(60))

    /// One edit that reopens the patio and points `music.subsonic` at another server: the music
    /// heard there is not asked again (the new server's player given the old one's song ids: tracks
    /// failed or other songs played, and its queue was mirrored there); it stays paused, its queue
    /// saved, not mirrored to the new server, and the report says so.
    @Test func musicFromAServerTheReloadReplacesStaysPaused() throws {
        let real = try TestSubsonic.music()
        let t = try TestDaemon(music: real)
        defer { t.stop() }
        let play = try t.json("POST", "/api/v1/music/play", #"{"search": "Long Tone", "zones": ["kitchen", "patio"]}"#)
        let id = try #require(play.object["id"], "\(play)")
        #expect(
            waitUntil(seconds: 15) { (try? t.status().sources.first { $0.id == id }?.positionSeconds ?? 0) ?? 0 > 1 })
        let proxy = try SubsonicRefusingProxy(upstreamURL: real.subsonic.url, refusing: [], keepingPlayQueue: true)
        var new = t.daemon.config
        new.zones[1].rate = 44_100
        new.music?.subsonic.url = proxy.url
        let report = t.daemon.apply(new)
        #expect(report.zonesChanged == ["patio"])
        let user = real.subsonic.user
        #expect(
            report.warnings == [
                "\(id) is music from \(user) at \(real.subsonic.url), and the new configuration names \(user) at \(proxy.url): it is not asked again (its songs are the old server's); it stays paused, its queue saved where it was heard"
            ], "\(report.warnings)")
        let sources = try t.status().sources
        #expect(!sources.contains { $0.class == "music" }, "no music asked again: \(sources)")
        #expect(try t.status().savedQueue?.playing == false, "the queue is saved")
        #expect(!waitUntil(seconds: 3) { !proxy.savedQueues.isEmpty }, "mirrored: \(proxy.savedQueues)")
    }

    /// Music that went on across a reload to another server, then stopped: the queue it keeps (the
    /// old server's song ids) is not mirrored to the new server at the next save. It was, about a
    /// second after the stop.
    @Test func aStoppedQueueOfTheOldServerIsNotMirroredToTheNewOne() throws {
        let real = try TestSubsonic.music()
        let t = try TestDaemon(music: real)
        defer { t.stop() }
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"search": "Long Tone", "zones": ["kitchen"]}"#).object["id"])
        #expect(waitUntil(seconds: 15) { (try? t.status().sources.first { $0.id == id }?.state) == "playing" })
        let proxy = try SubsonicRefusingProxy(upstreamURL: real.subsonic.url, refusing: [], keepingPlayQueue: true)
        var new = t.daemon.config
        new.music?.subsonic.url = proxy.url
        #expect(t.daemon.apply(new).zonesUnchanged == ["kitchen", "patio"])
        #expect(try t.request("POST", "/api/v1/music/stop", #"{"id": "\#(id)"}"#).status == 200)
        #expect(waitUntil { (try? t.status().savedQueue?.playing) == false })
        #expect(!waitUntil(seconds: 3) { !proxy.savedQueues.isEmpty }, "mirrored: \(proxy.savedQueues)")
    }

    /// Music asked again that cannot play (the new policy has no class `music`) and a call that
    /// cannot go on (nor `call`): the report says so; only the log did, and the API answered 200.
    @Test func whatCannotGoOnAfterAReloadIsInItsReport() throws {
        let t = try TestDaemon(music: try TestSubsonic.music(), intercom: Self.intercom)
        defer { t.stop() }
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"search": "Long Tone", "zones": ["kitchen"]}"#).object["id"])
        #expect(waitUntil(seconds: 15) { (try? t.status().sources.first { $0.id == id }?.state) == "playing" })
        #expect(try t.json("POST", "/api/v1/call/start").status == 202)
        var new = t.daemon.config
        new.zones[0].rate = 48_000
        new.zones[1].rate = 44_100
        new.policy.classes.removeAll { $0.name == "music" || $0.name == "call" }
        let report = t.daemon.apply(new)
        #expect(report.zonesChanged == ["kitchen", "patio"])
        #expect(
            report.warnings.contains { $0.hasPrefix("\(id) could not play on after the reload: ") },
            "\(report.warnings)")
        #expect(
            report.warnings.contains { $0.hasPrefix("the call the reload ended could not go on: ") },
            "\(report.warnings)")
    }

    /// Music queued behind a call and a doorbell queued behind it, on the patio a reload reopens:
    /// the call goes on, the music is asked again behind it (still queued) and the doorbell, not
    /// made again, is said dropped in the report. Both vanished unsaid.
    @Test func requestsQueuedOnAReopenedZoneAreNotLostUnsaid() throws {
        let t = try TestDaemon(music: try TestSubsonic.music(), intercom: Self.intercom)
        defer { t.stop() }
        #expect(try t.json("POST", "/api/v1/call/start").status == 202)
        let play = try t.json("POST", "/api/v1/music/play", #"{"search": "Long Tone", "zones": ["patio"]}"#)
        #expect(play.object["status"] == "queued", "\(play.object)")
        let music = try #require(play.object["id"])
        let bell = try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k", "zones": ["patio"]}"#)
        #expect(bell.object["status"] == "queued", "\(bell.object)")
        let bellID = try #require(bell.object["id"])
        var new = t.daemon.config
        new.zones[1].rate = 44_100
        let report = t.daemon.apply(new)
        #expect(
            report.warnings == [
                "\(bellID) was queued on patio, which the reload reopened: it is dropped (ask for it again)"
            ],
            "\(report.warnings)")
        let sources = try t.status().sources
        let again = try #require(
            sources.first { $0.id != music && $0.class == "music" }, "the music is asked again: \(sources)")
        #expect(again.state == "queued" && again.zones == ["patio"], "behind the call that goes on: \(again)")
        #expect(try t.json("POST", "/api/v1/call/end").status == 200)
        #expect(t.waitForEvent("granted", source: again.id, seconds: 10) != nil, "it plays once the call ends")
    }

    /// Music queued behind a call on the patio and paused by the user (the pause holds at its
    /// grant) when a reload reopens the patio: asked again behind the call that goes on, it keeps
    /// the pause, and when the call ends it is granted paused, not heard, and plays at the user's
    /// play. Asked again without it, it played when the call ended.
    @Test func musicPausedWhileQueuedStaysPausedAcrossAReload() throws {
        let t = try TestDaemon(music: try TestSubsonic.music(), intercom: Self.intercom)
        defer { t.stop() }
        #expect(try t.json("POST", "/api/v1/call/start").status == 202)
        let play = try t.json("POST", "/api/v1/music/play", #"{"search": "Long Tone", "zones": ["patio"]}"#)
        #expect(play.object["status"] == "queued", "\(play.object)")
        let music = try #require(play.object["id"])
        #expect(try t.json("POST", "/api/v1/music/pause", #"{"id": "\#(music)"}"#).status == 200)
        let before = try t.status().sources.first { $0.id == music }
        #expect(
            before?.state == "queued" && before?.paused == true,
            "said paused while queued: \(String(describing: before))")
        var new = t.daemon.config
        new.zones[1].rate = 44_100
        #expect(t.daemon.apply(new).warnings == [])
        let again = try #require(
            try t.status().sources.first { $0.id != music && $0.class == "music" }, "the music is asked again")
        #expect(again.state == "queued" && again.paused == true, "behind the call that goes on, paused: \(again)")
        #expect(try t.json("POST", "/api/v1/call/end").status == 200)
        #expect(t.waitForEvent("granted", source: again.id, seconds: 10) != nil, "granted once the call ends")
        let source = { try? t.status().sources.first { $0.id == again.id } }
        #expect(
            source()?.state == "paused" && source()?.paused == nil, "granted paused: \(String(describing: source()))")
        usleep(1_000_000)
        #expect(
            source()?.state == "paused" && (source()?.positionSeconds ?? 0) < 0.1, "\(String(describing: source()))")
        #expect(try t.json("POST", "/api/v1/music/resume", #"{"id": "\#(again.id)"}"#).status == 200)
        #expect(waitUntil(seconds: 15) { (source()?.positionSeconds ?? 0) > 0.5 }, "it plays at the user's play")
    }

    /// Server music on a card that was unplugged when a reload reopens the card (its volume
    /// changes): it is not asked again of a device that cannot open (refused, and lost); it stays
    /// paused with its queue, said in the report, and `music/resume` plays it once the card is back.
    @Test func musicOnALostCardStaysPausedAcrossAReload() throws {
        let card = ALSATestRig.makeCard(rate: 48_000, periodFrames: 480, bufferFrames: 1_920)
        let t = try TestDaemon(
            zones: [("card", 48_000, card.name), ("kitchen", 44_100, nil)], music: try TestSubsonic.music(),
            deviceClocked: ["card"])
        defer { t.stop() }
        let zone = { (name: String) in try? t.status().zones.first { $0.name == name } }
        #expect(waitUntil { zone("card")?.state == "available" })
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"search": "Long Tone", "zones": ["card"]}"#).object["id"])
        #expect(
            waitUntil(seconds: 15) { (try? t.status().sources.first { $0.id == id }?.positionSeconds ?? 0) ?? 0 > 1 })
        card.send(.unplug)
        #expect(waitUntil { zone("card")?.state == "unavailable" })
        var new = t.daemon.config
        new.zones[0].volume = 0.8
        let report = t.daemon.apply(new)
        #expect(report.zonesChanged == ["card"])
        #expect(
            report.warnings == [
                "\(id) was held while its zones (card) were unavailable: it stays paused, its queue saved where it was held (music/resume plays it on)"
            ], "\(report.warnings)")
        #expect(try t.status().savedQueue?.playing == false, "the queue is saved")
        card.send(.replug)
        #expect(waitUntil(seconds: 10) { zone("card")?.state == "available" })
        let resumed = try t.json("POST", "/api/v1/music/resume")
        #expect(resumed.status == 202, "\(resumed.object)")
    }

    /// Server music in the kitchen, newer server music on the patio; a reload reopens both: the
    /// newer is asked again, and the report says the older is not, nor its queue saved (the newer's
    /// plays on). The older vanished unsaid.
    @Test func musicPassedOverForNewerMusicIsInTheReport() throws {
        let t = try TestDaemon(music: try TestSubsonic.music())
        defer { t.stop() }
        let position = { (id: String) in (try? t.status().sources.first { $0.id == id }?.positionSeconds ?? 0) ?? 0 }
        let older = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"search": "Long Tone", "zones": ["kitchen"]}"#).object["id"])
        let newer = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"search": "Long Tone", "zones": ["patio"]}"#).object["id"])
        #expect(waitUntil(seconds: 15) { position(older) > 0.5 && position(newer) > 0.5 })
        var new = t.daemon.config
        new.zones[0].rate = 48_000
        new.zones[1].rate = 44_100
        let report = t.daemon.apply(new)
        #expect(report.zonesChanged == ["kitchen", "patio"])
        #expect(
            report.warnings == [
                "\(older) is not asked again: only the newest music is (\(newer)); its queue is not saved"
            ],
            "\(report.warnings)")
        let again = try #require(
            try t.status().sources.first { ![older, newer].contains($0.id) && $0.class == "music" })
        #expect(again.zones == ["patio"], "the newer plays on: \(again)")
    }

    /// Server music on the card and the kitchen, the card unplugged when a reload reopens it: the
    /// music plays on in the kitchen, and the report says it does without the card (skipped for
    /// good: it said nothing).
    @Test func aZoneTheResumedMusicSkipsIsInTheReport() throws {
        let card = ALSATestRig.makeCard(rate: 48_000, periodFrames: 480, bufferFrames: 1_920)
        let t = try TestDaemon(
            zones: [("card", 48_000, card.name), ("kitchen", 44_100, nil)], music: try TestSubsonic.music(),
            deviceClocked: ["card"])
        defer { t.stop() }
        let zone = { (name: String) in try? t.status().zones.first { $0.name == name } }
        #expect(waitUntil { zone("card")?.state == "available" })
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"search": "Long Tone", "zones": ["card", "kitchen"]}"#)
                .object["id"])
        #expect(
            waitUntil(seconds: 15) { (try? t.status().sources.first { $0.id == id }?.positionSeconds ?? 0) ?? 0 > 1 })
        card.send(.unplug)
        #expect(waitUntil { zone("card")?.state == "unavailable" })
        var new = t.daemon.config
        new.zones[0].volume = 0.8
        let report = t.daemon.apply(new)
        let again = try #require(try t.status().sources.first { $0.id != id && $0.class == "music" })
        #expect(again.zones == ["kitchen"])
        #expect(
            report.warnings == ["\(id) plays on as \(again.id) without card: not available after the reload"],
            "\(report.warnings)")
    }
}
