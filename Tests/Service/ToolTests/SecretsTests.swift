import BatonTesting
import FoundationEssentials
import Glibc
import Testing

/// Secrets never leave batond: a wrong Subsonic password and an MQTT password (to a broker that is
/// not there) are used, fail and are retried, and neither appears in the log, the effective config,
/// the status, the events or an error answer.
@Suite(.ownThread) struct SecretsTests {
    @Test func secretsAreNeverLoggedOrReturned() throws {
        let dir = TestDirectory.make("secrets")
        let subsonicSecret = "subsonic-Secret-\(UInt32.random(in: 1000...9999))"
        let mqttSecret = "mqtt-Secret-\(UInt32.random(in: 1000...9999))"
        for (name, secret) in [("subsonic.pw", subsonicSecret), ("mqtt.pw", mqttSecret)] {
            let f = try #require(fopen(dir + "/" + name, "w"))
            fputs(secret + "\n", f)
            fclose(f)
        }
        let music = try CrashRecoveryTests.musicSection()
            .replacingPasswordFile(with: dir + "/subsonic.pw")
        let port = try FreePort.next()
        let daemon = try BatondProcess(
            extra: music + """

                mqtt: {broker: "mqtt://127.0.0.1:\(port)", username: baton, password-file: "\(dir)/mqtt.pw"}
                """)
        defer { daemon.stop() }
        let play = daemon.batonctl("play", "--search", "Tone 440")
        #expect(play.status != 0 && play.output.contains("music server"), "\(play.output)")
        let outputs = [
            play.output, daemon.batonctl("status", "--json").output, daemon.batonctl("events").output,
            daemon.batonctl("config").output,
        ]
        #expect(waitUntil(seconds: 5) { daemon.log.contains("mqtt") })
        daemon.stop()
        for text in outputs + [daemon.log] {
            #expect(!text.contains(subsonicSecret) && !text.contains(mqttSecret), "a secret leaked: \(text)")
        }
    }
}

extension String {
    /// This music section with its `password-file` replaced.
    func replacingPasswordFile(with path: String) -> String {
        let parts = components(separatedBy: "password-file: \"")
        guard parts.count == 2, let end = parts[1].firstIndex(of: "\"") else { return self }
        return parts[0] + "password-file: \"" + path + parts[1][end...]
    }
}
