import BatonTesting
import Glibc
import Testing

/// The packaging: the default /etc config, the systemd unit and the .deb layout. The release build of
/// `scripts/build-deb.sh` is too slow for the suite, so the layout is built from the test build's
/// binaries (`BATON_BIN_DIR`); docs/PACKAGING.md shows the real package.
@Suite(.ownThread) struct PackagingTests {
    static let root = BatondProcess.repoRoot

    /// The shipped /etc/baton/baton.yaml is a valid configuration.
    @Test func defaultEtcConfigChecksOut() {
        let r = Subprocess.run(
            Subprocess.buildDirectory + "/batond", ["--config", Self.root + "/packaging/baton.yaml", "--check"])
        #expect(r.status == 0, "\(r.output)")
        #expect(r.output.contains("ok (1 zones)"))
    }

    /// `systemd-analyze verify` accepts baton.service (with ExecStart pointed at the built batond,
    /// since /usr/bin/batond is not installed here).
    @Test func unitVerifies() throws {
        let dir = TestDirectory.make("unit")
        let unit = Self.read(Self.root + "/packaging/baton.service")
        #expect(unit.contains("\nType=notify\n"))
        #expect(unit.contains("\nExecStart=/usr/bin/batond --config /etc/baton/baton.yaml\n"))
        let file = try #require(fopen(dir + "/baton.service", "w"))
        fputs(unit.replacingFirst("/usr/bin/batond", with: Subprocess.buildDirectory + "/batond"), file)
        fclose(file)
        let r = Subprocess.run("/usr/bin/systemd-analyze", ["verify", dir + "/baton.service"])
        #expect(r.status == 0, "\(r.output)")
        #expect(r.output.isEmpty, "no warnings: \(r.output)")
    }

    /// scripts/test-deb.sh debootstraps from the one mirror this machine's apt sources give for
    /// bookworm: Debian's own first. Raspberry Pi OS lists deb.debian.org in sources.list and the
    /// Raspberry Pi archive in raspi.list, both for bookworm: the two went to debootstrap as one
    /// URI with a newline in it, and test.sh failed there as root. The same in deb822 form.
    @Test func theDebTestTakesOneMirrorDebiansFirst() {
        let dir = TestDirectory.make("apt")
        mkdir(dir + "/sources.list.d", 0o755)
        TextFile.write(
            dir + "/sources.list",
            "deb http://deb.debian.org/debian bookworm main contrib non-free-firmware\n"
                + "deb http://deb.debian.org/debian-security/ bookworm-security main\n")
        TextFile.write(dir + "/sources.list.d/raspi.list", "deb http://archive.raspberrypi.com/debian/ bookworm main\n")
        let mirror = { Subprocess.run("/bin/bash", [Self.root + "/scripts/test-deb.sh", "--mirror", dir]).output }
        #expect(mirror() == "http://deb.debian.org/debian\n")
        unlink(dir + "/sources.list")
        TextFile.write(
            dir + "/sources.list.d/debian.sources",
            "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n")
        #expect(mirror() == "http://mirror.example/debian\n")
    }

    /// scripts/build-deb.sh packages binaries, unit, conffile, sounds, boards, docs and maintainer
    /// scripts, with Depends from dpkg-shlibdeps.
    @Test func debLayout() {
        let out = TestDirectory.make("deb")
        let build = Subprocess.run(
            "/bin/bash", [Self.root + "/scripts/build-deb.sh", out],
            environment: ["BATON_BIN_DIR": Subprocess.buildDirectory, "BATON_VERSION": "0.0.0~test"],
            seconds: 120)
        #expect(build.status == 0, "\(build.output)")
        let deb =
            out + "/baton_0.0.0~test_" + Subprocess.run("/usr/bin/dpkg", ["--print-architecture"]).output.trimmed
            + ".deb"
        let contents = Subprocess.run("/usr/bin/dpkg-deb", ["-c", deb]).output
        for path in [
            "./usr/bin/batond", "./usr/bin/batonctl", "./lib/systemd/system/baton.service", "./etc/baton/baton.yaml",
            "./usr/share/baton/sounds/doorbell.wav", "./usr/share/baton/boards/pi4-hifiberry-dacplus.yaml",
            "./usr/share/doc/baton/copyright", "./usr/share/doc/baton/BATONCTL.md",
        ] {
            #expect(contents.contains(" \(path)\n"), "\(path) in\n\(contents)")
        }
        #expect(contents.contains("-rwxr-xr-x root/root"), "binaries are executable and owned by root")
        let info = Subprocess.run("/usr/bin/dpkg-deb", ["-I", deb]).output
        #expect(info.contains(" Package: baton\n"))
        #expect(info.contains(" Version: 0.0.0~test\n"))
        for library in [
            "libasound2", "libsamplerate0", "libsoxr0", "libopus0", "libyaml-0-2", "libmicrohttpd12", "libsystemd0",
        ] {
            #expect(info.contains(library), "Depends has \(library):\n\(info)")
        }
        // ExecReload's /bin/kill (procps is not required), and espeak-ng for text announcements (a
        // package install answered every text with 503).
        #expect(info.contains(", passwd, procps\n"), "\(info)")
        #expect(info.contains(" Recommends: alsa-utils, espeak-ng\n"), "\(info)")
        for script in ["postinst", "prerm", "postrm", "conffiles"] { #expect(info.contains(" \(script)"), "\(info)") }
        #expect(Subprocess.run("/usr/bin/dpkg-deb", ["-I", deb, "conffiles"]).output == "/etc/baton/baton.yaml\n")
        let postinst = Subprocess.run("/usr/bin/dpkg-deb", ["-I", deb, "postinst"]).output
        #expect(postinst.contains("useradd --system"))
        #expect(postinst.contains("--groups audio baton"))
    }

    /// The maintainer scripts are valid POSIX shell.
    @Test(arguments: ["postinst", "prerm", "postrm"])
    func maintainerScriptParses(script: String) {
        let r = Subprocess.run("/bin/sh", ["-n", Self.root + "/packaging/debian/" + script])
        #expect(r.status == 0, "\(r.output)")
    }

    static func read(_ path: String) -> String {
        guard let file = fopen(path, "rb") else { return "" }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        while true {
            let c = fgetc(file)
            if c == EOF { break }
            bytes.append(UInt8(truncatingIfNeeded: c))
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
