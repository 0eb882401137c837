import BatonTesting
import FoundationEssentials
import Glibc
import Testing

/// A program that opens the `baton` PCM non-blocking and drains it (MPD does, at the end of its
/// queue): through real alsa-lib, from Python's ctypes — no player in Debian drains non-blocking on
/// its own at a moment a test can choose.
@Suite(.ownThread) struct NonBlockingDrainTests {
    /// Opens `baton_x` with SND_PCM_NONBLOCK (a 1 s buffer), writes 1.5 s, waits for the `go` file
    /// (the doorbell holds the source before what it wrote has played), then drains:
    /// prints the first call's answer and how long it took; then, as MPD does, polls until the
    /// state leaves DRAINING, and prints the state, when, after how many wake-ups, the CPU time,
    /// and what a drain then answers.
    static let probe = #"""
        import ctypes, os, sys, time, math, struct
        lib = ctypes.CDLL("libasound.so.2")
        pcm = ctypes.c_void_p()
        assert lib.snd_pcm_open(ctypes.byref(pcm), b"baton_x", 0, 1) == 0  # playback, SND_PCM_NONBLOCK
        assert lib.snd_pcm_set_params(pcm, 2, 3, 2, 48000, 0, 1000000) == 0  # S16_LE, RW interleaved, 1 s
        frames = 72000
        data = b"".join(struct.pack("<hh", int(8000 * math.sin(i * 0.05)), 0) for i in range(frames))
        at = 0
        while at < frames:
            n = lib.snd_pcm_writei(pcm, data[at * 4:], frames - at)
            if n == -11:
                lib.snd_pcm_wait(pcm, 100)
            elif n < 0:
                print("write", n, flush=True); sys.exit(1)
            else:
                at += n
        print("written", flush=True)
        while not os.path.exists(sys.argv[1]):
            time.sleep(0.01)
        start, cpu = time.monotonic(), time.process_time()
        rc = lib.snd_pcm_drain(pcm)
        print("first %d %.3f" % (rc, time.monotonic() - start), flush=True)
        # As MPD: no second drain; wake on the device's poll until its state leaves DRAINING (5).
        state, wakes = lib.snd_pcm_state(pcm), 0
        while rc == -11 and state == 5 and time.monotonic() - start < 8:
            lib.snd_pcm_wait(pcm, 1000)
            state, wakes = lib.snd_pcm_state(pcm), wakes + 1
        print("drained %d %.3f %d %.3f %d" % (state, time.monotonic() - start, wakes, time.process_time() - cpu,
                                              lib.snd_pcm_drain(pcm)), flush=True)
        """#

    /// Drained while a doorbell holds the source (`hold`): the first call answers -EAGAIN at once,
    /// and the program, polling, sees the stream set up again once the doorbell ended and its last
    /// frames played — in a few wake-ups, not a busy loop. The plugin waited inside the first call
    /// for the whole doorbell, and MPD's output thread hung with it.
    @Test func aNonBlockingDrainAnswersAtOnceWhileTheSourceIsHeld() throws {
        let bell: [Int16] = (0..<(48_000 * 3)).flatMap { [0, Int16(8_000 * sin(Double($0) * 0.1))] }
        let rig = try ExternalRig(sources: "  x: {class: music, when-interrupted: hold}", sounds: ["bell": bell])
        let script = rig.directory + "/drain.py"
        let go = rig.directory + "/go"
        ExternalRig.write(script, Self.probe)
        let probe = try rig.program("python3", [script, go], log: "drain.log")
        defer { _ = probe.stop() }
        #expect(waitUntil(seconds: 10) { probe.output.contains("written") }, "\(probe.output)")
        #expect(rig.post("/api/v1/announce", #"{"sound": "bell"}"#).contains("\"id\""))
        #expect(rig.eventsSoon(contain: "interruption-began"))
        ExternalRig.write(go, "")
        #expect(waitUntil(seconds: 10) { probe.output.contains("drained") }, "\(probe.output)")
        let lines = probe.output.split(separator: "\n")
        let first = try #require(lines.first { $0.hasPrefix("first") }?.split(separator: " "))
        #expect(first[1] == "-11" && (Double(first[2]) ?? 9) < 0.1, "the first call: \(first)")
        // `drained STATE SECONDS WAKES CPU DRAIN`: SETUP (1) by itself, after the doorbell; a drain
        // then answers 0.
        let drained = try #require(lines.first { $0.hasPrefix("drained") }?.split(separator: " "))
        #expect(drained[1] == "1" && (Double(drained[2]) ?? 0) > 1, "set up again after the doorbell: \(drained)")
        #expect(drained[5] == "0", "a drain then answers 0: \(drained)")
        // Not a busy loop: few wake-ups, and the CPU of a program asleep in poll (the eventfd woke
        // it at once while draining, again and again, inside alsa-lib's wait).
        #expect((Int(drained[3]) ?? 999) < 20 && (Double(drained[4]) ?? 9) < 0.3, "wake-ups, CPU s: \(drained)")
    }
}
