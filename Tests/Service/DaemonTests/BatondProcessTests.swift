import BatonTesting
import Glibc
import OSThread
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
    /// a speaker rebooted before its network stayed down. It is found before anything starts: no
    /// zone's output opens (systemd starts batond again every 2 s, and each start opened every card,
    /// said "online" on MQTT and read the state).
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
        #expect(!r.output.contains("output thread started"), "nothing started: \(r.output)")
    }

    /// A port below 1024 without CAP_NET_BIND_SERVICE (EACCES) will not come by waiting: exit
    /// status 1, which systemd does not restart, saying what must change. It was 3, and batond was
    /// started again every 2 s for ever. (batond runs with that capability out of its bounding set;
    /// root keeps the rest.)
    @Test(
        .enabled(
            if: getuid() == 0
                && (Int(
                    TextFile.read("/proc/sys/net/ipv4/ip_unprivileged_port_start")?.split(separator: "\n").first ?? "")
                    ?? 0) > 81,
            "drops CAP_NET_BIND_SERVICE from root (setpriv); port 81 is privileged"))
    func aPortItMayNeverHaveIsExitStatusOne() throws {
        let dir = TestDirectory.make("privileged-port")
        let path = dir + "/baton.yaml"
        let f = try #require(fopen(path, "w"))
        fputs("api:\n  listen: 127.0.0.1:81\nzones:\n  kitchen:\n    pcm: \"null\"\n    clock: system\n", f)
        fclose(f)
        let r = Subprocess.run("/usr/bin/setpriv", ["--bounding-set=-net_bind_service", batond, "--config", path])
        #expect(r.status == 1, "\(r.output)")
        #expect(r.output.contains("control API: cannot listen on 127.0.0.1:81: Permission denied"), "\(r.output)")
        #expect(r.output.contains("exiting with status 1 (not started again"), "\(r.output)")
        #expect(!r.output.contains("output thread started"), "nothing started: \(r.output)")
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

    /// The files a start opens are checked by `--check` too, each problem at its key with the path:
    /// a missing or empty `api.token-file`, an unreadable `alsa-config`, an `output-dir` that cannot
    /// be made. `--check` said "ok" and the next start (at boot) exited 1, which systemd does not
    /// restart. (A start reads the file as `--check` does.)
    @Test(arguments: [
        (
            "api:\n  token-file: missing.token\n",
            "3:15: api.token-file: cannot read \"DIR/missing.token\": No such file or directory"
        ),
        ("api:\n  token-file: empty.token\n", "3:15: api.token-file: \"DIR/empty.token\" is empty"),
        (
            "alsa-config: alsa/missing.conf\n",
            "2:14: alsa-config: cannot read \"DIR/alsa/missing.conf\": No such file or directory"
        ),
        ("output-dir: no/such/out\n", "2:13: output-dir: cannot create \"DIR/no/such/out\": No such file or directory"),
    ])
    func checkRefusesTheFilesAStartCannotOpen(section: String, expected: String) throws {
        let dir = TestDirectory.make("check-files")
        let path = dir + "/baton.yaml"
        _ = FileIO.writeAtomically(Array("\n".utf8), to: dir + "/empty.token")
        let yaml = "zones:\n  kitchen: {pcm: \"null\", clock: system}\n"
        _ = FileIO.writeAtomically(Array(("# files\n" + section + yaml).utf8), to: path)
        let message = "\(path):" + expected.replacing("DIR", with: dir)
        let check = Subprocess.run(batond, ["--config", path, "--check"])
        #expect(check.status == 1, "\(check.output)")
        #expect(check.output.contains(message), "\(check.output)")
        #expect(!check.output.contains("ok ("), "\(check.output)")
    }

    /// What a start took another way than written (a fractional keepalive, rounded; a bus beside
    /// mpd, ignored; an output-dir that is a file, informational) is a warning that `--check` prints
    /// (as a start logs it), and the file passes: refusing it made a package upgrade restart batond
    /// into exit 1, which systemd does not restart.
    @Test func checkWarnsOfWhatAStartTakesOtherwise() throws {
        let dir = TestDirectory.make("check-warnings")
        let path = dir + "/baton.yaml"
        _ = FileIO.writeAtomically(Array("x\n".utf8), to: dir + "/out")
        let yaml = """
            output-dir: out
            mqtt: {broker: "mqtt://127.0.0.1:1", keepalive: 7.5s}
            external-sources:
              socket: sources.sock
              player: {control: {mpd: "127.0.0.1:6600", bus: system}}
            zones:
              kitchen: {pcm: "null", clock: system}

            """
        _ = FileIO.writeAtomically(Array(yaml.utf8), to: path)
        let check = Subprocess.run(batond, ["--config", path, "--check"])
        #expect(check.status == 0, "\(check.output)")
        #expect(check.output.contains("\(path): ok (1 zones)"), "\(check.output)")
        for warning in [
            "\(path):1:13: output-dir: \"\(dir)/out\" is not a directory: file PCMs cannot write there",
            "\(path):2:49: mqtt.keepalive: 7.5s is not a whole number of seconds: 8s is used",
            "\(path):5:45: external-sources.player.control.bus: bus is only for mpris",
        ] {
            #expect(check.output.contains(warning), "\(check.output)")
        }
    }
}
