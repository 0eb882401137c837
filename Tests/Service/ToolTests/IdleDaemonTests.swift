import BatonTesting
import Glibc
import Testing

/// The real batond, idle, with everything that listens configured: its threads sleep until
/// something happens (issue 15: no polling loops anywhere).
@Suite(.ownThread) struct IdleDaemonTests {
    /// Two zones, MQTT on a real broker (connected), the intercom's RTP port and an external source's
    /// socket, nothing playing: over 3 s every thread wakes at most a few times (the monitor once a
    /// second, for the state save). Before, the intercom's receiver looked every 20 ms (150 wake-ups
    /// here), the MQTT bridge built a status report every 50 ms (60) and the external sources'
    /// accept thread looked every 50 ms (60).
    @Test func everyThreadSleepsWhileNothingHappens() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let rtp = try FreePort.next()
        let d = try BatondProcess(
            extra: """
                mqtt:
                  broker: \(broker.url)
                intercom:
                  rtp:
                    listen: 127.0.0.1:\(rtp)
                    zones: [all]
                external-sources:
                  socket: sources.sock
                  x: {class: music}
                """)
        defer { _ = d.stop() }
        #expect(
            waitUntil(seconds: 10) {
                usleep(50_000)
                return d.batonctl("status", "--json").output.contains(#""connection":"connected""#)
            }, "MQTT connects: \(d.batonctl("status", "--json").output)")
        let ran = Self.wakeUpsOnceQuiet(d)
        let busiest = ran.first?.1 ?? 0
        #expect(busiest <= 5, "wake-ups in 3 s: \(ran)")
        #expect(ran.map(\.1).reduce(0, +) <= 20, "wake-ups in 3 s: \(ran)")
    }

    /// Music paused (overnight, say), MQTT connected: nothing moves, and no thread looks. The MQTT
    /// bridge took a source in its status for something moving, whatever its state, and built a
    /// status report every 50 ms for as long as the music stayed paused (60 wake-ups here).
    @Test func aPausedSourceLetsEveryThreadSleep() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let d = try BatondProcess(extra: "mqtt:\n  broker: \(broker.url)")
        defer { _ = d.stop() }
        func status() -> String { d.batonctl("status", "--json").output }
        #expect(
            waitUntil(seconds: 10) {
                usleep(50_000)
                return status().contains(#""connection":"connected""#)
            }, "MQTT connects: \(status())")
        #expect(d.batonctl("play", "chime", "--loop").status == 0)
        #expect(waitUntil(seconds: 10, every: 0.05) { status().contains(#""state":"playing""#) }, "\(status())")
        #expect(d.batonctl("pause").status == 0)
        #expect(waitUntil(seconds: 10, every: 0.05) { status().contains(#""state":"paused""#) }, "\(status())")
        let ran = Self.wakeUpsOnceQuiet(d)
        #expect((ran.first?.1 ?? 0) <= 5, "wake-ups in 3 s: \(ran)")
        #expect(status().contains(#""state":"paused""#), "still paused: \(status())")
    }

    /// How many times each of batond's threads woke in 3 s, busiest first, counted once what was
    /// set going has settled (the zones stop their cards half a second after the last frame heard,
    /// and each change wakes the monitor; a fixed second's wait was too short on a loaded CI
    /// runner). A thread that polls keeps it from settling, and is counted all the same.
    static func wakeUpsOnceQuiet(_ d: BatondProcess) -> [(String, Int)] {
        let pid = "\(d.pid)"
        _ = ProcessThreads.awaitQuiet(process: pid)
        let before = ProcessThreads.wakeUps(process: pid)
        usleep(3_000_000)
        let after = ProcessThreads.wakeUps(process: pid)
        return after.compactMap { tid, t in before[tid].map { (t.name, t.wakeUps - $0.wakeUps) } }.sorted {
            $0.1 > $1.1
        }
    }
}
