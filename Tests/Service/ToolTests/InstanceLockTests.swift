import BatonTesting
import Glibc
import Testing

/// One batond per configuration: a second one on the same configuration refuses to start before it
/// touches a device, naming the one that runs; the lock of a killed daemon is taken over.
@Suite(.ownThread) struct InstanceLockTests {
    /// A second `batond --config X` exits non-zero with "another batond (pid N) runs this
    /// configuration" and never opens the PCMs; after SIGKILL of the first, a new one starts.
    @Test func secondDaemonOnOneConfigurationRefusesToStart() throws {
        let first = try BatondProcess()
        let out = first.directory + "/out"
        // The running daemon keeps writing through its open descriptors; were the second one to
        // open its file PCMs, these paths would exist again.
        // The output threads open their PCMs on their own, just after the API is up; a zone is
        // `available` once its PCM is open. (The file alone is not enough: were the API's port taken,
        // `BatondProcess` started a second daemon, whose PCMs would open after a first try's files.)
        #expect(waitUntil { first.zonesAvailable(["kitchen", "patio"]) }, "\(first.batonctl("status").output)")
        for zone in ["kitchen", "patio"] {
            #expect(
                rename("\(out)/\(zone).wav", "\(out)/\(zone)-first.wav") == 0, "the first batond opened \(zone)'s PCM")
        }
        let second = try BackgroundProcess(
            Subprocess.buildDirectory + "/batond", ["--config", first.directory + "/baton.yaml"],
            outputPath: first.directory + "/second.log")
        let status = second.wait(seconds: 10)
        if status == nil { second.stop(signal: SIGKILL) }
        #expect(status == 1, "the second batond exits with 1 (it exited with \(String(describing: status)))")
        let log = second.output
        #expect(log.contains("another batond (pid \(first.pid)) runs this configuration"), "\(log)")
        #expect(log.contains("/state/batond.lock"), "the lock is in the state-dir: \(log)")
        let zones = TruthRecorder.status(port: first.port)?.zones ?? []
        for zone in ["kitchen", "patio"] {
            #expect(
                access("\(out)/\(zone).wav", F_OK) != 0, "the second batond never opened \(zone)'s PCM: \(first.log)")
            // Were the first one to reopen its PCM, the file would exist again for that reason.
            #expect(zones.first { $0.name == zone }?.reopens == 0, "the first batond kept \(zone)'s PCM open: \(zones)")
        }
        #expect(first.batonctl("status").status == 0, "the first one plays on")

        try first.killAndRestart()  // SIGKILL: the lock dies with it; the new daemon takes it
        #expect(first.log.contains("control API on"))
        #expect(!first.log.contains("another batond"))
        #expect(waitUntil { first.zonesAvailable(["kitchen", "patio"]) }, "\(first.batonctl("status").output)")
        #expect(access("\(out)/kitchen.wav", F_OK) == 0, "the new daemon opened its PCMs")
    }

    /// A state-dir on a file system remounted read-only (an SD card after an ext4 error) does not
    /// keep batond from starting, and the volumes saved there are still read. Its lock file, there
    /// from before, is taken read-only, so that a second batond is still refused; without one, the
    /// lock goes where it would without a state-dir, with a warning. Before, the lock's open failed
    /// there ("cannot take the instance lock"), batond exited 1, and systemd never started it again.
    @Test(.enabled(if: getuid() == 0, "mounts the state-dir read-only")) func aReadOnlyStateDirStillStarts() throws {
        let d = try BatondProcess()
        defer { d.stop() }
        #expect(d.batonctl("volume", "kitchen", "40%").status == 0)
        #expect(d.stop() == 0, "\(d.log)")
        let state = d.directory + "/state"
        #expect(TextFile.read(state + "/state.json")?.contains(#""kitchen":0.4"#) == true)
        func mountReadOnly() throws {
            try #require(Subprocess.run("/usr/bin/mount", ["--bind", state, state]).status == 0)
            let remount = Subprocess.run("/usr/bin/mount", ["-o", "remount,bind,ro", state])
            try #require(remount.status == 0, "\(remount.output)")
            try #require(access(state, W_OK) != 0 && errno == EROFS, "the state-dir is read-only")
        }
        defer { _ = Subprocess.run("/usr/bin/umount", [state]) }
        try mountReadOnly()

        try d.start()
        #expect(
            d.log.contains(
                "state-dir \(state) cannot be written: Read-only file system: nothing is saved; the instance lock is taken read-only there"
            ), "\(d.log)")
        let status = d.batonctl("status", "--json").output
        #expect(
            status.contains(#""name":"kitchen""#) && status.contains(#""volume":0.4"#), "the saved volume: \(status)")
        let second = Subprocess.run(Subprocess.buildDirectory + "/batond", ["--config", d.directory + "/baton.yaml"])
        #expect(second.status == 1, "\(second.output)")
        // The pid in the file is the first run's (the holder locked it read-only): not named.
        #expect(
            second.output.contains("another batond (pid unknown) runs this configuration (lock \(state)/batond.lock)"),
            "\(second.output)")
        #expect(d.stop() == 0, "\(d.log)")

        // No lock file there: the lock goes elsewhere, and the warning says why.
        try #require(Subprocess.run("/usr/bin/umount", [state]).status == 0)
        try #require(unlink(state + "/batond.lock") == 0)
        try mountReadOnly()
        try d.start()
        #expect(
            d.log.contains(
                "state-dir \(state) cannot be written: Read-only file system: nothing is saved; the instance lock is /"),
            "\(d.log)")
        #expect(d.stop() == 0, "\(d.log)")
    }
}
