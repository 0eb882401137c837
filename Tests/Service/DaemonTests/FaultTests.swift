import BatonTesting
import FoundationEssentials
import Glibc
import OSThread
import Synchronization
import Testing

@testable import BatonDaemon
@testable import BatonService
@testable import ControlParts

/// Faults the daemon lives through: a PCM that cannot be opened until later, and a state file that
/// cannot be written (full disk, a state-dir that cannot exist). Each: what the user sees, and
/// nothing lost.
@Suite(.serialized, .ownThread) struct FaultTests {
    /// A zone whose PCM cannot be opened is `unavailable` with the ALSA error while the other plays;
    /// once the device can be opened (here: its file's directory appears) the zone becomes available
    /// by itself and plays.
    @Test func pcmThatOpensLaterBecomesAvailable() throws {
        unsetenv(ALSATestRig.lateVariable)
        let t = try TestDaemon(zones: [("kitchen", 44_100, nil), ("garage", 48_000, ALSATestRig.latePCM)])
        defer { t.stop() }
        // The first open attempt may not have failed yet ("opening PCM …"): wait for its ALSA error.
        #expect(
            waitUntil {
                ((try? t.status().zones.first { $0.name == "garage" }?.error) ?? nil)?.contains("open failed") == true
            })
        let garage = try #require(try t.status().zones.first { $0.name == "garage" })
        #expect(garage.state == "unavailable")
        #expect(garage.error?.contains("ALSA PCM \"baton_late\": open failed") == true, "\(garage.error ?? "")")
        let skipped = try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k"}"#)
        #expect(skipped.object["skipped"] == "garage", "\(skipped.object)")
        setenv(ALSATestRig.lateVariable, ALSATestRig.makePCM().name, 1)
        #expect(waitUntil(seconds: 15) { (try? t.status().zones.first { $0.name == "garage" }?.state) == "available" })
        #expect(
            waitUntil { t.daemon.events.recent().contains { $0.type == "zone-available" && $0.zones == ["garage"] } })
        #expect(try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k", "zones": ["garage"]}"#).status == 202)
    }

    /// A zone whose PCM opens but fails its writes says so — "write failed", not "open failed",
    /// which it read before whatever call had failed — while the other zone plays; reopened after
    /// a second such failure, it is not said to be available until it has played a while: it read
    /// "available" at each reopen, a `zone-available` event each time.
    @Test func aPCMThatFailsItsWritesSaysSo() throws {
        let t = try TestDaemon(zones: [("kitchen", 44_100, nil), ("garage", 48_000, ALSATestRig.failingPCM)])
        defer { t.stop() }
        let expected = "ALSA PCM \"\(ALSATestRig.failingPCM)\": write failed: Input/output error (-5)"
        var error: String?
        #expect(
            waitUntil {
                error = (try? t.status().zones.first { $0.name == "garage" }?.error) ?? nil
                return error == expected
            }, "\(error ?? "no error")")
        #expect(try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k", "zones": ["kitchen"]}"#).status == 202)
        let garage = try #require(t.daemon.output("garage")).device
        #expect(waitUntil { garage.openAttemptCount >= 5 })
        let available = t.daemon.events.recent().filter { $0.type == "zone-available" && $0.zones == ["garage"] }
        #expect(available.count <= 2, "available at \(available.count) of \(garage.openAttemptCount) opens")
        #expect(try t.status().zones.first { $0.name == "garage" }?.error == expected)
    }

    /// The state file on a full disk (its temporary file is /dev/full): the failure is published
    /// once (`state-error`: No space left on device), the daemon runs on with its state in memory,
    /// and the save is retried: once space returns (the monitor's first attempt removed the
    /// temporary file) the state reaches the disk.
    @Test func fullDiskDoesNotLoseState() throws {
        let dir = TestDirectory.make("fullstate")
        #expect(symlink("/dev/full", dir + "/state.json.tmp") == 0)
        let t = try TestDaemon(stateDir: dir)
        defer { t.stop() }
        #expect(try t.request("POST", "/api/v1/zones/kitchen/volume", #"{"volume": 0.3}"#).status == 200)
        let failed = try #require(t.waitForEvent("state-error", seconds: 5))
        #expect(
            failed.reason?.hasSuffix("state.json.tmp: write failed: No space left on device") == true,
            "\(failed.reason ?? "")")
        #expect(try t.status().zones.first { $0.name == "kitchen" }?.volume == Double(Float(0.3)), "the volume is kept")
        #expect(
            Self.waitForSavedVolume(0.3, of: "kitchen", in: dir),
            "saved once the disk takes it")
    }

    /// A disk that does not answer (an SD card busy for seconds; here the state's temporary file is
    /// a FIFO nobody reads, so its write blocks in `open`): the control plane goes on — a doorbell
    /// rung meanwhile ends and is released, the systemd watchdog is still fed —, the write is
    /// reported once it has waited 5 s, and once the disk answers the state is written. The monitor
    /// used to write the file itself: it stood still in the write, the doorbell "playing" long
    /// after it was heard and, past `WatchdogSec`, batond killed.
    @Test func aDiskThatDoesNotAnswerHoldsNothingElse() throws {
        let disk = try UnansweredDisk()
        let t = try TestDaemon(stateDir: disk.directory)
        defer {
            _ = disk.answer()
            t.stop()
        }
        #expect(try t.request("POST", "/api/v1/zones/kitchen/volume", #"{"volume": 0.3}"#).status == 200)
        try #require(
            waitUntil(seconds: 5) { t.daemon.parts.persistence.isWriting }, "the state's first write never began")
        let bell = try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k", "zones": ["kitchen"]}"#).object["id"]
        #expect(t.waitForEvent("finished", source: bell, seconds: 5) != nil, "the doorbell ended meanwhile")
        #expect(t.daemon.monitorIsAlive, "the watchdog is fed")
        let slow = t.waitForEvent("state-error", seconds: 10)?.reason ?? "none"
        #expect(slow.hasSuffix("a write has not finished after 5 s (the disk does not answer)"), "\(slow)")
        let written = disk.answer()
        let first = try? JSONDecoder().decode(SavedState.self, from: Data(written))
        #expect(first?.volumes["kitchen"] != nil, "a whole state reached the FIFO: \(written.count) bytes")
        // A FIFO cannot be fsynced: that write failed, and the next is made to a file.
        #expect(
            waitUntil(seconds: 5) {
                t.daemon.events.recent().contains { $0.reason?.hasSuffix("write failed: Invalid argument") == true }
            })
        #expect(
            Self.waitForSavedVolume(0.3, of: "kitchen", in: disk.directory),
            "saved once the disk answers")
    }

    /// At the stop, a disk that does not answer holds the fade-out and the stop at most 2 s (the
    /// last save's wait) and 0.5 s (the state writer's end): within systemd's 5 s, instead of until
    /// systemd kills batond mid-fade.
    @Test func aDiskThatDoesNotAnswerDoesNotHoldTheStop() throws {
        let disk = try UnansweredDisk()
        let t = try TestDaemon(stateDir: disk.directory)
        defer {
            _ = disk.answer()  // the writer left waiting in the write
            t.stop()  // the API and the triggers
        }
        #expect(try t.request("POST", "/api/v1/zones/kitchen/volume", #"{"volume": 0.3}"#).status == 200)
        try #require(
            waitUntil(seconds: 5) { t.daemon.parts.persistence.isWriting }, "the state's first write never began")
        let stopped = Atomic<Int>(0)
        let daemon = t.daemon
        let start = monotonicNanoseconds()
        OSThread.detach {
            daemon.fadeOut()
            daemon.stop()
            stopped.store(monotonicNanoseconds(), ordering: .releasing)
        }
        #expect(waitUntil(seconds: 6) { stopped.load(ordering: .acquiring) != 0 }, "stopped")
        let took = Double(stopped.load(ordering: .acquiring) - start) / 1e9
        #expect(took < 4, "the stop took \(took) s")
    }

    /// A state file whose queue JSON holds but a queue cannot (a negative index, a position past
    /// any track) loses its queue, said, and keeps its volumes: batond crashed at every start on
    /// it (`songs[-1]`, `Int(1e19)`), the speaker dead until someone edited the file.
    @Test(arguments: [#""index": -1, "position": 3"#, #""index": 0, "position": 1e19"#])
    func aSavedQueueThatCannotBeIsDropped(fields: String) throws {
        let dir = TestDirectory.make("badqueue")
        let song = #"{"id": "s1", "title": "One"}"#
        let text =
            #"{"volumes": {"kitchen": 0.3}, "queue": {"songs": [\#(song)], \#(fields), "zones": ["kitchen"], "volume": 1, "playing": false}}"#
        HostileInputTests.write(Array(text.utf8), to: dir + "/state.json")
        let t = try TestDaemon(stateDir: dir)
        defer { t.stop() }
        let error = try #require(t.waitForEvent("state-error", seconds: 5))
        #expect(error.reason?.contains("the saved queue is dropped") == true, "\(error.reason ?? "")")
        #expect(try t.status().zones.first { $0.name == "kitchen" }?.volume == Double(Float(0.3)), "the volumes stay")
        // Written over: the next start does not find (and say) it again.
        #expect(
            waitUntil(seconds: 5) {
                let saved: SavedState? = (try? StateStore(directory: dir).load().get()) ?? nil
                return saved.map { $0.queue == nil && $0.volumes["kitchen"] == Double(Float(0.3)) } ?? false
            }, "the file without the queue")
    }

    /// A state file that is not one — a JSON object with none of the state's fields — is set aside
    /// (`state.json.damaged`), not written over by the first save a second later: what it held is
    /// still there for a person to read.
    @Test func aStateFileThatIsNotOneIsKeptAside() throws {
        let dir = TestDirectory.make("notstate")
        let damaged = Array(#"{"volume": {"kitchen": 0.3}}"#.utf8)
        HostileInputTests.write(damaged, to: dir + "/state.json")
        let t = try TestDaemon(stateDir: dir)
        defer { t.stop() }
        let error = try #require(t.waitForEvent("state-error", seconds: 5))
        #expect(error.reason?.hasSuffix("kept as \(dir)/state.json.damaged") == true, "\(error.reason ?? "")")
        #expect(try t.request("POST", "/api/v1/zones/kitchen/volume", #"{"volume": 0.5}"#).status == 200)
        #expect(waitUntil(seconds: 5) { (try? StateStore(directory: dir).load().get()) != nil }, "saved anew")
        #expect((try? FileIO.read(dir + "/state.json.damaged").get()) == damaged)
    }

    /// A state file the system will not read (here a link to itself, ELOOP; on a speaker a file
    /// made root's, an I/O error) is not damage: it is left as it is and written over by nothing —
    /// not by the volume changed meanwhile, not by the stop's last save. It was set aside as
    /// damaged, and the next save wrote the defaults in its place.
    @Test func aStateFileTheSystemWillNotReadIsLeftAsItIs() throws {
        let dir = TestDirectory.make("unreadable")
        #expect(symlink("state.json", dir + "/state.json") == 0)
        let t = try TestDaemon(stateDir: dir)
        defer { t.stop() }
        let error = try #require(t.waitForEvent("state-error", seconds: 5))
        #expect(error.reason?.contains("it is left as it is and not written over") == true, "\(error.reason ?? "")")
        #expect(try t.request("POST", "/api/v1/zones/kitchen/volume", #"{"volume": 0.5}"#).status == 200)
        t.stop()  // its last save comes before it returns
        var info = stat()
        #expect(lstat(dir + "/state.json", &info) == 0 && (info.st_mode & S_IFMT) == S_IFLNK, "still the link")
        #expect(access(dir + "/state.json.damaged", F_OK) != 0, "not set aside")
    }

    /// A damaged file is set aside beside one set aside before, not over it (`.damaged.2`).
    @Test func aDamagedFileIsNotSetAsideOverAnEarlierOne() throws {
        let dir = TestDirectory.make("twicedamaged")
        let earlier = Array("an earlier one".utf8)
        HostileInputTests.write(earlier, to: dir + "/state.json.damaged")
        HostileInputTests.write(Array("not json".utf8), to: dir + "/state.json")
        let t = try TestDaemon(stateDir: dir)
        defer { t.stop() }
        let error = try #require(t.waitForEvent("state-error", seconds: 5))
        #expect(error.reason?.hasSuffix("kept as \(dir)/state.json.damaged.2") == true, "\(error.reason ?? "")")
        #expect((try? FileIO.read(dir + "/state.json.damaged").get()) == earlier)
        #expect((try? FileIO.read(dir + "/state.json.damaged.2").get()) == Array("not json".utf8))
    }

    /// A state file with values that cannot be read — a queue that is a number, a volume that is a
    /// word — loses only those: the other volumes are restored (the whole file was set aside, and
    /// every zone started at its configured volume), the error names what was dropped, and the
    /// file is kept aside for a person to read.
    @Test func aDamagedStateFileLosesOnlyWhatCannotBeRead() throws {
        let dir = TestDirectory.make("damagedstate")
        let damaged = Array(#"{"volumes": {"kitchen": 0.3, "patio": "loud"}, "queue": 5}"#.utf8)
        HostileInputTests.write(damaged, to: dir + "/state.json")
        let t = try TestDaemon(stateDir: dir)
        defer { t.stop() }
        let error = try #require(t.waitForEvent("state-error", seconds: 5))
        let reason = error.reason ?? ""
        #expect(reason.contains("zone patio's volume (volumes.patio: expected a number)"), "\(reason)")
        #expect(reason.contains("the queue (queue: expected an object)"), "\(reason)")
        #expect(reason.hasSuffix("kept as \(dir)/state.json.damaged"), "\(reason)")
        let zones = try t.status().zones
        #expect(zones.first { $0.name == "kitchen" }?.volume == Double(Float(0.3)), "the volume that could be read")
        // What was restored is written back at once, nothing changed: a restart finds it.
        #expect(
            waitUntil(seconds: 5) {
                (try? StateStore(directory: dir).load().get())??.volumes["kitchen"] == Double(Float(0.3))
            }, "the restored state saved anew")
        #expect(try t.request("POST", "/api/v1/zones/kitchen/volume", #"{"volume": 0.5}"#).status == 200)
        #expect(waitUntil(seconds: 5) { (try? StateStore(directory: dir).load().get()) != nil }, "saved anew")
        #expect((try? FileIO.read(dir + "/state.json.damaged").get()) == damaged)
    }

    /// A file set aside for what could not be read stays in place too until the save of what was
    /// restored replaces it: with every save failing (here `state.json.tmp` is a directory; on a
    /// speaker, a full disk) the next start still restores the volume that could be read. The file
    /// was moved away at once, the parts read kept in memory only, and the next start found no
    /// state at all.
    @Test func whatWasRestoredFromADamagedFileOutlivesAFailingSave() throws {
        let dir = TestDirectory.make("damagedunsaved")
        let damaged = Array(#"{"volumes": {"kitchen": 0.3, "patio": "loud"}}"#.utf8)
        HostileInputTests.write(damaged, to: dir + "/state.json")
        #expect(mkdir(dir + "/state.json.tmp", 0o755) == 0)
        let t = try TestDaemon(stateDir: dir)
        let error = try #require(t.waitForEvent("state-error", seconds: 5))
        #expect(error.reason?.contains("zone patio's volume") == true, "\(error.reason ?? "")")
        #expect(
            waitUntil(seconds: 5) {
                t.daemon.events.recent().contains { $0.type == "state-error" && $0.reason?.contains("tmp") == true }
            }, "the save failed")
        t.stop()
        #expect(rmdir(dir + "/state.json.tmp") == 0)
        #expect((try? FileIO.read(dir + "/state.json.damaged").get()) == damaged, "kept aside")
        let again = try TestDaemon(stateDir: dir)
        defer { again.stop() }
        #expect(try again.status().zones.first { $0.name == "kitchen" }?.volume == Double(Float(0.3)))
    }

    /// A file set aside for what could not be read — here only the volume of a zone not configured
    /// now, so nothing of this run differs from what was restored — is written anew at once, with
    /// what was restored: a restart after it (a crash, a clean stop) finds the volumes.
    @Test func whatWasRestoredFromADamagedFileIsSavedWithoutAChange() throws {
        let dir = TestDirectory.make("restoredsaved")
        let text = #"{"volumes": {"kitchen": 0.25, "patio": 1, "garage": "loud"}}"#
        HostileInputTests.write(Array(text.utf8), to: dir + "/state.json")
        let t = try TestDaemon(stateDir: dir)
        defer { t.stop() }
        let error = try #require(t.waitForEvent("state-error", seconds: 5))
        #expect(error.reason?.contains("zone garage's volume") == true, "\(error.reason ?? "")")
        #expect(
            waitUntil(seconds: 5) { (try? StateStore(directory: dir).load().get())??.volumes["kitchen"] == 0.25 },
            "the restored state saved anew")
    }

    /// A queue that cannot be read (a song without its id) is dropped alone: the volumes are
    /// restored.
    @Test func aQueueThatCannotBeReadLeavesTheVolumes() throws {
        let dir = TestDirectory.make("skewstate")
        let text =
            #"{"volumes": {"kitchen": 0.4}, "queue": {"songs": [{"title": "Tone"}], "index": 0, "position": 1, "zones": ["kitchen"], "volume": 1, "playing": false}}"#
        HostileInputTests.write(Array(text.utf8), to: dir + "/state.json")
        let t = try TestDaemon(stateDir: dir)
        defer { t.stop() }
        let error = try #require(t.waitForEvent("state-error", seconds: 5))
        #expect(error.reason?.contains("the queue (queue.songs[0].id: missing)") == true, "\(error.reason ?? "")")
        #expect(try t.status().zones.first { $0.name == "kitchen" }?.volume == Double(Float(0.4)))
    }

    /// A saved volume above a `max-volume` lowered since starts at the maximum (it started at the
    /// configured volume, unsaid), and the saved volume of a zone not configured now (a DAC
    /// unplugged for a day) is kept by the saves (they wrote only the zones configured).
    @Test func savedVolumesAreClampedAndKeptForZonesNotConfigured() throws {
        let dir = TestDirectory.make("volumestate")
        HostileInputTests.write(Array(#"{"volumes": {"kitchen": 0.9, "garage": 0.7}}"#.utf8), to: dir + "/state.json")
        let t = try TestDaemon(stateDir: dir, maxVolumes: ["kitchen": 0.5])
        defer { t.stop() }
        #expect(try t.status().zones.first { $0.name == "kitchen" }?.volume == Double(Float(0.5)))
        #expect(try t.request("POST", "/api/v1/zones/patio/volume", #"{"volume": 0.25}"#).status == 200)
        #expect(
            Self.waitForSavedVolume(0.25, of: "patio", in: dir), "saved")
        let saved = try #require(try StateStore(directory: dir).load().get())
        #expect(saved.volumes["garage"] == 0.7, "\(saved.volumes)")
    }

    /// A zone a reload removed and a later one adds back starts at the volume the saves kept for
    /// it, not at its configured one.
    @Test func aZoneAddedBackByAReloadGetsItsSavedVolume() throws {
        let dir = TestDirectory.make("volumeback")
        let t = try TestDaemon(stateDir: dir)
        defer { t.stop() }
        #expect(try t.request("POST", "/api/v1/zones/patio/volume", #"{"volume": 0.25}"#).status == 200)
        #expect(
            Self.waitForSavedVolume(0.25, of: "patio", in: dir), "saved")
        let full = t.config
        var without = full
        without.zones.removeAll { $0.name == "patio" }
        #expect(t.daemon.apply(without).applied)
        t.daemon.saveState()
        #expect(t.daemon.apply(full).applied)
        #expect(try t.status().zones.first { $0.name == "patio" }?.volume == Double(Float(0.25)))
    }

    /// A volume equal to `max-volume` is taken: 0.6 as a Float is a little above 0.6, and
    /// `{"volume": 0.6}` with `max-volume: 60%` was refused as above it.
    @Test func aVolumeAtTheMaximumIsTaken() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        var capped = t.config
        capped.zones[0].maxVolume = 0.6
        #expect(t.daemon.apply(capped).applied)
        let r = try t.request("POST", "/api/v1/zones/kitchen/volume", #"{"volume": 0.6}"#)
        #expect(r.status == 200, "\(r.text)")
    }

    /// A save after the stop's fade-out began (the monitor saves once a second until the daemon
    /// stops) keeps the volumes as they were before the fade, not turned down by it: the speaker
    /// does not start muted next time.
    @Test func aSaveDuringTheFadeOutKeepsTheVolumes() throws {
        let dir = TestDirectory.make("fadestate")
        let t = try TestDaemon(stateDir: dir)
        defer { t.stop() }
        #expect(try t.request("POST", "/api/v1/zones/kitchen/volume", #"{"volume": 0.4}"#).status == 200)
        t.daemon.fadeOut()
        usleep(700_000)  // the fade (up to 500 ms) is over: the mixers are at 0
        t.daemon.saveState()  // as the monitor would, before the daemon stops
        let saved = try #require(try StateStore(directory: dir).load().get())
        #expect(saved.volumes["kitchen"] == Double(Float(0.4)), "\(saved.volumes)")
    }

    /// A state-dir that cannot be created (its parent is a file): an error naming it, and the daemon
    /// plays on.
    @Test func unwritableStateDirIsAClearError() throws {
        let file = TestDirectory.make("notadir") + "/file"
        fclose(fopen(file, "w"))
        let store = StateStore(directory: file + "/state")
        guard case .failure(let failure) = store.save(SavedState()) else {
            Issue.record("saving under a file succeeded")
            return
        }
        #expect(failure.description == "state-dir \(file)/state: cannot create: Not a directory")
        let t = try TestDaemon(stateDir: file + "/state")
        defer { t.stop() }
        #expect(try t.request("POST", "/api/v1/zones/kitchen/volume", #"{"volume": 0.5}"#).status == 200)
        t.daemon.saveState()
        #expect(try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k"}"#).status == 202)
    }

    /// Waits up to 5 s for the state file in `directory` to hold `volume` (as a Float saves it) for `zone`.
    static func waitForSavedVolume(_ volume: Float, of zone: String, in directory: String) -> Bool {
        waitUntil(seconds: 5) { (try? StateStore(directory: directory).load().get())??.volumes[zone] == Double(volume) }
    }
}

/// A state-dir whose disk does not answer: `state.json.tmp` is a FIFO nobody reads, so a write of
/// the state blocks in `open` until `answer`.
private struct UnansweredDisk {
    let directory = TestDirectory.make("stalledstate")
    var fifo: String { directory + "/state.json.tmp" }

    init() throws {
        try #require(mkfifo(directory + "/state.json.tmp", 0o644) == 0)
    }

    /// Opens the far end, which lets a waiting write through, removes the FIFO (later writes make a
    /// file) and reads what was written until the writer closes it. Never blocks without a writer.
    func answer() -> [UInt8] {
        let fd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        unlink(fifo)
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        var written: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while case let n = read(fd, &buffer, buffer.count), n > 0 { written += buffer[..<n] }
        return written
    }
}

extension FaultTests {
    /// Once batond's stop has begun (its last state saved, the zones fading out), nothing starts:
    /// a button's press still rendering its speech, a late MQTT or API request, is refused
    /// ("batond is stopping") — it played after the fade-out, a source the last save never saw.
    @Test func nothingStartsOnceTheStopBegan() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        t.daemon.fadeOut()
        #expect(throws: ControlError.self) { try t.daemon.announcer.announce(sound: "chime", zones: ["kitchen"]) }
        #expect(t.daemon.status().sources.isEmpty)
    }
}
