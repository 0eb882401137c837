import BatonTesting
import Testing

/// Two minutes of the soak (scripts/soak.sh runs it for 30 and more): the real batond with two zones,
/// looping music, an announcement every 10 s, an RTP call from ffmpeg, a config reload every 30 s.
/// The script fails on any xrun or late cycle, RSS growth of 1 MiB after the warm-up, an unmatched
/// interruption, or a second where the reported state does not match what the output files hold.
@Suite struct SoakTests {
    @Test func twoMinuteSoak() {
        let batond = Subprocess.buildDirectory + "/batond"
        let r = Subprocess.run(
            "/usr/bin/python3", [BatondProcess.repoRoot + "/scripts/bench/soak.py", batond, "2"], seconds: 400)
        #expect(r.status == 0, "\(r.output)")
        #expect(r.output.contains("0 mismatches"), "\(r.output)")
    }
}
