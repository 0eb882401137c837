import BatonTesting
import Glibc
import Testing

/// The `baton` PCM's callbacks called as a program may call them, through real alsa-lib from
/// Python's ctypes (no player in Debian calls them at a moment a test can choose), with the real batond.
@Suite(.serialized, .ownThread) struct PluginCallbackTests {
    /// Opens `baton_x` and asks its status before any hw_params: prints `status RC`.
    static let statusProbe = #"""
        import ctypes, sys
        lib = ctypes.CDLL("libasound.so.2")
        pcm = ctypes.c_void_p()
        assert lib.snd_pcm_open(ctypes.byref(pcm), b"baton_x", 0, 0) == 0
        status = ctypes.c_void_p()
        assert lib.snd_pcm_status_malloc(ctypes.byref(status)) == 0
        print("status", lib.snd_pcm_status(pcm, status), flush=True)
        lib.snd_pcm_close(pcm)
        """#

    /// A program that asks the status (or the avail) right after the open, before setting the
    /// stream up, gets an answer: the pointer callback divided by a buffer size of 0 (SIGFPE).
    @Test func theStatusBeforeHWParamsAnswers() throws {
        let rig = try ExternalRig(sources: "  x: {class: music}")
        let script = rig.directory + "/status.py"
        ExternalRig.write(script, Self.statusProbe)
        let probe = try rig.program("python3", [script], log: "status.log")
        defer { _ = probe.stop() }
        let status = probe.wait(seconds: 10)
        #expect(status == 0, "python exited with \(String(describing: status)): \(probe.output)")
        #expect(probe.output.contains("status 0"), "\(probe.output)")
    }

    /// Writes 1 s of `music` (left 10000 + n) into a 1 s buffer, prepares at once, writes 0.25 s of
    /// its negative (left −10000 − n) and drains: prints `drained RC`.
    static let prepareProbe = #"""
        import ctypes, struct
        lib = ctypes.CDLL("libasound.so.2")
        pcm = ctypes.c_void_p()
        assert lib.snd_pcm_open(ctypes.byref(pcm), b"baton_x", 0, 0) == 0
        assert lib.snd_pcm_set_params(pcm, 2, 3, 2, 48000, 0, 1000000) == 0  # S16_LE, RW interleaved, 1 s
        def write(data, frames):
            at = 0
            while at < frames:
                n = lib.snd_pcm_writei(pcm, data[at * 4:], frames - at)
                assert n > 0, n
                at += n
        write(b"".join(struct.pack("<hh", 10000 + i % 20000, 0) for i in range(48000)), 48000)
        assert lib.snd_pcm_prepare(pcm) == 0
        write(b"".join(struct.pack("<hh", -10000 - i, 0) for i in range(12000)), 12000)
        print("drained", lib.snd_pcm_drain(pcm), flush=True)
        lib.snd_pcm_close(pcm)
        """#

    /// `snd_pcm_prepare` discards what was written and not played, as it does on a sound card: the
    /// program writes its new buffer after it expecting so. The plugin reset only its own count, and
    /// batond played the whole discarded second before the new frames.
    @Test func aPrepareDiscardsWhatWasNotPlayed() throws {
        let rig = try ExternalRig(sources: "  x: {class: music}")
        let script = rig.directory + "/prepare.py"
        ExternalRig.write(script, Self.prepareProbe)
        let probe = try rig.program("python3", [script], log: "prepare.log")
        defer { _ = probe.stop() }
        #expect(probe.wait(seconds: 15) == 0, "\(probe.output)")
        #expect(probe.output.contains("drained 0"), "\(probe.output)")
        func left() -> [Int16] { rig.zoneSamples().enumerated().filter { $0.offset % 2 == 0 }.map(\.element) }
        // The zone's file PCM writes a buffer behind: wait for the last new frame.
        #expect(waitUntil(seconds: 5) { left().contains(-10_000 - 11_999) }, "the new frames reach the zone")
        let heard = left()
        let discarded = heard.filter { $0 >= 10_000 }.count
        let new = heard.filter { $0 <= -10_000 }
        #expect(discarded < 48_000 / 4, "\(discarded) frames of the discarded second were played")
        #expect(
            new.count == 12_000 && new == (0..<12_000).map { Int16(-10_000 - $0) }, "the new frames, once, in order")
    }
}
