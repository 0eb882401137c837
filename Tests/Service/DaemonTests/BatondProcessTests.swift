import BatonTesting
import Glibc
import Testing

/// The `batond` executable itself: config validation at start-up.
@Suite(.ownThread) struct BatondProcessTests {
    var batond: String { Subprocess.buildDirectory + "/batond" }

    /// The shipped default config passes `--check`.
    @Test func defaultConfigChecksOut() {
        let r = Subprocess.run(batond, ["--config", TestDaemon.repoRoot + "/config/baton.yaml", "--check"])
        #expect(r.status == 0, "\(r.output)")
        #expect(r.output.contains("ok (2 zones)"))
    }

    /// An invalid config never starts the daemon: exit status 1 and every problem with file:line:col,
    /// key path and a suggestion for a misspelt key.
    @Test func invalidConfigDoesNotStart() throws {
        let dir = TestDirectory.make("badconfig")
        let path = dir + "/baton.yaml"
        let f = try #require(fopen(path, "w"))
        fputs(
            "api:\n  listen: 127.0.0.1:8470\nzones:\n  kitchen:\n    pcm: null\n    perod: 10ms\n    format: S24_LE\n",
            f)
        fclose(f)
        let r = Subprocess.run(batond, ["--config", path])
        #expect(r.status == 1)
        #expect(r.output.contains("\(path):6:5: zones.kitchen.perod"), "\(r.output)")
        #expect(r.output.contains("did you mean \"period\""), "\(r.output)")
        #expect(r.output.contains("\(path):7:13: zones.kitchen.format"), "\(r.output)")
        #expect(!r.output.contains("control API on"), "it did not start")
    }
}
