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

    /// An API address it cannot listen on (the port taken; at boot, an address DHCP has not given
    /// yet) is exit status 3, not the 1 of an invalid configuration, which systemd does not restart:
    /// a speaker rebooted before its network stayed down.
    @Test func anAPIAddressItCannotTakeIsExitStatusThree() throws {
        let taken = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(taken) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(taken, $0, length) == 0 && listen(taken, 1) == 0 && getsockname(taken, $0, &length) == 0
            }
        }
        #expect(bound)
        let port = UInt16(bigEndian: address.sin_port)
        let dir = TestDirectory.make("taken-port")
        let path = dir + "/baton.yaml"
        let f = try #require(fopen(path, "w"))
        fputs("api:\n  listen: 127.0.0.1:\(port)\nzones:\n  kitchen:\n    pcm: \"null\"\n    clock: system\n", f)
        fclose(f)
        let r = Subprocess.run(batond, ["--config", path])
        #expect(r.status == 3, "\(r.output)")
        #expect(r.output.contains("control API: cannot listen on 127.0.0.1:\(port)"), "\(r.output)")
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
