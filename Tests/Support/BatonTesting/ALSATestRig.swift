import ALSA
import Glibc
import OSThread
import Synchronization

/// An ALSA configuration for the whole test process: numbered `file` PCMs over `null` that write
/// every sample to a raw file, PCMs that cannot open, and virtual sound cards (`makeCard`). alsa-lib
/// reads its configuration once per process, so every test takes fresh PCM names from here instead of
/// writing its own file.
public enum ALSATestRig {
    /// How many file PCMs the rig defines. The whole suite took 249 (at 3cf883e), past 512 at 4165d18; running out
    /// stops the test process at a precondition, every test with it: keep room.
    public static let pcmCount = 1024
    /// A PCM whose open fails with -ENOENT (its slave card does not exist).
    public static let missingPCM = "baton_missing"
    /// A PCM that cannot be opened until a test names a real one in the environment variable
    /// ``lateVariable`` (ALSA reads it at each open): a device that appears later.
    public static let latePCM = "baton_late"
    public static let lateVariable = "BATON_TEST_LATE_PCM"
    /// A PCM that opens and then fails its writes with -EIO (a `file` PCM writing to /dev/full).
    public static var failingPCM: String {
        _ = directory  // the configuration that defines it
        return failingName
    }
    private static let failingName = "baton_failing"

    /// How many ``switching(_:)`` PCMs the rig defines.
    public static let switchingCount = 8

    /// PCM `index` (below ``switchingCount``) of a family that fails its writes (``failingPCM``)
    /// until a test names a working one in its environment variable, ``switchingVariable(_:)``
    /// (ALSA reads it at each open): a device that fails, then works. One per test case, since
    /// the environment is the process's.
    public static func switching(_ index: Int) -> String {
        _ = directory
        return "baton_switching_\(index)"
    }

    public static func switchingVariable(_ index: Int) -> String { "BATON_TEST_SWITCHING_\(index)" }

    private static let counter = Atomic<Int>(0)

    /// PulseAudio's `pulse` PCM (alsa-plugins) with the server as an argument (``pulse(server:)``).
    static let pulsePCM = "baton_pulse"

    /// The ALSA name of PulseAudio's `pulse` PCM playing to the server at `server`
    /// ("unix:/path/to/socket", ``PulseAudioServer/address``).
    public static func pulse(server: String) -> String {
        _ = directory  // the configuration that defines it
        return "\(pulsePCM):SERVER=\"\(server)\""
    }

    /// The directory the PCMs write into: the process's `TestDirectory.root`, always new (the
    /// cards append to their record and timing files: a directory found again once made a test
    /// read 435 periods where it wrote 100, the others 2.5 hours old).
    public static let directory: String = {
        let dir = TestDirectory.root
        var conf = "</usr/share/alsa/alsa.conf>\npcm.baton_null { type null }\n"
        conf += "pcm.\(missingPCM) { type hw card 97 }\n"
        for i in 0..<switchingCount {
            conf +=
                "pcm.baton_switching_\(i) { type plug slave.pcm { @func getenv vars [ \(switchingVariable(i)) ] default \"\(failingName)\" } }\n"
        }
        conf += "pcm.\(failingName) { type file slave.pcm \"baton_null\" file \"/dev/full\" format \"raw\" }\n"
        conf +=
            "pcm.\(latePCM) { type plug slave.pcm { @func getenv vars [ \(lateVariable) ] default \"\(missingPCM)\" } }\n"
        for i in 0..<pcmCount {
            conf +=
                "pcm.test_\(i) { type file slave.pcm \"baton_null\" file \"\(dir)/test_\(i).raw\" format \"raw\" perm 0644 }\n"
        }
        conf += "pcm.\(pulsePCM) { @args [ SERVER ] @args.SERVER { type string } type pulse server $SERVER }\n"
        conf += cardDefinition(directory: dir)
        let path = "\(dir)/asound.conf"
        let f = fopen(path, "w")!
        fputs(conf, f)
        fclose(f)
        ALSAConfiguration.use(file: path)
        PCM.silenceLibraryErrors()
        return dir
    }()

    /// A fresh file PCM: its ALSA name and the raw file it writes.
    public static func makePCM() -> (name: String, file: String) {
        let dir = directory
        let i = counter.add(1, ordering: .relaxed).newValue - 1
        precondition(i < pcmCount, "ALSATestRig: raise pcmCount")
        return ("test_\(i)", "\(dir)/test_\(i).raw")
    }

    /// Reads a raw S16_LE file as Float samples in [-1, 1).
    public static func readS16(_ path: String) -> [Float] {
        readBytes(path).withUnsafeBytes { raw in
            raw.bindMemory(to: Int16.self).map { Float(Int16(littleEndian: $0)) / 32768 }
        }
    }

    /// A file's bytes ([] when it cannot be read).
    public static func readBytes(_ path: String) -> [UInt8] {
        guard case .success(let bytes?) = FileIO.read(path, limit: .max) else { return [] }
        return bytes
    }
}

/// Polls `condition` every `interval` seconds (a millisecond unless told; longer for a condition that
/// asks another program, such as a server over its API) until it holds or `seconds` pass; returns
/// whether it held.
/// For waiting on another thread's progress with a bound, never for timing.
public func waitUntil(seconds: Double = 10, every interval: Double = 0.001, _ condition: () -> Bool) -> Bool {
    var start = timespec()
    clock_gettime(CLOCK_MONOTONIC, &start)
    while true {
        if condition() { return true }
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        if Double(now.tv_sec - start.tv_sec) + Double(now.tv_nsec - start.tv_nsec) / 1e9 > seconds { return false }
        usleep(UInt32(interval * 1_000_000))
    }
}
