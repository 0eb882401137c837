import BatonConfig
import Testing

/// `announce:`: the hosts URL announcements may come from, and their caps.
struct ConfigAnnounceTests {
    /// Absent: no host is allowed, 16 MiB, 5 minutes, 10 s to the first bytes.
    @Test func defaultsAllowNoHost() throws {
        let configuration = try load(minimalZone)
        #expect(configuration.announce == AnnounceConfig())
        #expect(configuration.announce.allowURLHosts.isEmpty)
        #expect(!configuration.announce.allows(host: "homeassistant.local"))
    }

    /// Every key is read; hosts are compared without case, IPv6 with or without brackets.
    @Test func readsEveryKey() throws {
        let configuration = try load(
            minimalZone + """
                announce:
                  allow-url-hosts: [HomeAssistant.local, 192.168.1.10, "[fd00::1]"]
                  max-bytes: 2MiB
                  max-duration: 90s
                  first-byte-timeout: 3s

                """)
        let a = configuration.announce
        #expect(a.allowURLHosts == ["homeassistant.local", "192.168.1.10", "fd00::1"])
        #expect(a.maxBytes == 2 << 20 && a.maxDuration == .seconds(90) && a.firstByteTimeout == .seconds(3))
        #expect(a.allows(host: "HOMEASSISTANT.local") && a.allows(host: "[fd00::1]") && !a.allows(host: "ha.local"))
    }

    /// Each wrong value is reported at its place, naming the key.
    @Test func reportsWrongValues() {
        #expect(
            issueLines(
                minimalZone + """
                    announce:
                      allow-url-hosts: ["http://ha.local:8123", ha.local, ha.local]
                      max-bytes: 1KiB
                      max-duration: 90m
                      port: 8

                    """)
                == [
                    #"test.yaml:5:21: announce.allow-url-hosts: "http://ha.local:8123" is not a host (expected a name like ha.local or an address, without scheme, port or path)"#,
                    "test.yaml:5:55: announce.allow-url-hosts: ha.local is listed twice",
                    "test.yaml:6:14: announce.max-bytes: 1KiB is out of range (expected 64KiB...1024MiB)",
                    "test.yaml:7:17: announce.max-duration: 90m is out of range (expected 1s...1h)",
                    "test.yaml:8:3: announce.port: unknown key (expected one of: allow-url-hosts, max-bytes, max-duration, first-byte-timeout)",
                ])
    }
}
