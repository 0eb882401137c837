import AudioCore
import BatonConfig
import BatonTesting
import Engine
import Glibc
import OSThread
import Snapcast
import Synchronization

@testable import BatonDaemon
@testable import ControlParts

/// A house in a test: a real snapserver, two real snapclients (`bedroom-pi`, `bath-pi`) whose
/// output the test reads, and a Baton daemon with one Snapcast zone `upstairs` feeding the server
/// and grouping both speakers. Sounds: `music440` (1 s of 440 Hz, loops seamlessly) and `bell1`,
/// `bell2`, `bell3` (0.4 s of 1 kHz), at 48 kHz stereo like the stream.
final class SnapcastTestRig {
    let server: SnapcastServer
    let bedroom: SnapcastClientTap
    let bath: SnapcastClientTap
    let daemon: Daemon
    let control: SnapcastControl
    let log = LogLines()

    init(bufferMilliseconds: Int, clients: [SnapcastConfig.Client]) throws {
        server = try SnapcastServer(bufferMilliseconds: bufferMilliseconds)
        control = SnapcastControl(control: server.control)
        bedroom = try SnapcastClientTap(id: "bedroom-pi", server: server)
        bath = try SnapcastClientTap(id: "bath-pi", server: server)
        let control = self.control
        guard
            waitUntil(
                seconds: 10, every: 0.02,
                {
                    let status = try? control.status()
                    return ["bedroom-pi", "bath-pi"].allSatisfy { status?.client($0)?.connected == true }
                })
        else { throw TestSetupError("the snapclients did not connect:\n\(bedroom.log)\n\(server.log)") }

        let sounds = TestDirectory.make("snapcast-sounds")
        WAVWriter.write(
            Signals.sine(frequency: 440, rate: 48_000, frames: 48_000, channels: 2, amplitude: 0.5),
            rate: 48_000, channels: 2, to: "\(sounds)/music440.wav")
        // Three names for one bell: equal announcements within 3 s would coalesce into one.
        for name in ["bell1", "bell2", "bell3"] {
            WAVWriter.write(
                Signals.sine(frequency: 1000, rate: 48_000, frames: 19_200, channels: 2, amplitude: 0.5),
                rate: 48_000, channels: 2, to: "\(sounds)/\(name).wav")
        }
        let snapcast = SnapcastConfig(
            source: .tcp(host: "127.0.0.1", port: server.sourcePort), control: server.control,
            stream: server.stream, clients: clients, buffer: .milliseconds(bufferMilliseconds))
        let zone = ZoneConfig(
            name: "upstairs", pcm: snapcast.source.description, rate: 48_000, channels: 2, clock: .system,
            snapcast: snapcast)
        let config = BatonConfiguration(
            api: APIConfig(listen: ListenAddress(host: "127.0.0.1", port: 0)), zones: [zone],
            sounds: sounds, device: "test-house")
        let log = self.log
        daemon = Daemon(
            config: config, logger: Logger(minimum: .info) { line in log.lines.withLock { $0.append(line) } })
        daemon.start()
    }

    deinit {
        daemon.stop()
        bedroom.stop()
        bath.stop()
        server.stop()
    }

    /// The zone's output counters.
    var snapshot: DeviceOutputSnapshot { daemon.output("upstairs")!.device.snapshot() }

    /// Waits for an event of `type` for `source`.
    func waitForEvent(_ type: String, source: String, seconds: Double = 10) -> Event? {
        var found: Event?
        _ = waitUntil(seconds: seconds) {
            found = daemon.events.recent().first { $0.type == type && $0.source == source }
            return found != nil
        }
        return found
    }

    /// Announces `sound` (a 0.4 s 1 kHz bell) and returns its id and the monotonic time of the request (the grant, and
    /// so the mix of its first frame, follows within one period).
    func ring(_ sound: String) throws -> (id: String, at: Int) {
        let at = monotonicNanoseconds()
        let r = try daemon.announcer.announce(sound: sound, zones: ["upstairs"])
        return (r.id, at)
    }

    /// After snapserver (re)started at `restarted` (monotonic ns): waits until the zone carries
    /// audio again and the server has both speakers on the zone's stream, then until 3 s after the
    /// start (the latency has settled by then). Nil when all are back; else what is missing, with
    /// what the zone, the server, the speakers and the daemon said.
    ///
    /// A speaker whose snapclient exited when the server went away (snapclient 0.26's file player
    /// crashes so now and then, docs/SNAPCAST.md: not Baton's doing, which cannot reach a client on
    /// another machine) is started again, as its systemd unit would, saying so; the wait then runs
    /// 3 s from its new start. Anything else that keeps a speaker away fails.
    func waitUntilBack(restarted: Int) -> String? {
        guard waitUntil(seconds: 6, { snapshot.available && snapshot.reopens >= 1 }) else {
            return "the zone did not carry audio again within 6 s (\(snapshot)); \(evidence())"
        }
        var settlesFrom = restarted
        var deadline = monotonicNanoseconds() + 8_000_000_000
        while !speakersBack() {
            guard monotonicNanoseconds() < deadline else {
                return "the speakers were not back on stream upstairs within 8 s; \(evidence())"
            }
            for tap in [bedroom, bath] where tap.restarts < 2 {
                guard let status = tap.exitStatus else { continue }
                print(
                    """
                    snapcast rig: \(tap.id)'s snapclient exited (\(Self.describe(status))) when the server went \
                    away (snapclient 0.26's file player, docs/SNAPCAST.md); starting it again, as its systemd unit \
                    would. Its last lines:
                    \(Self.tail(tap.log, 4))
                    """)
                do { try tap.restart() } catch { return "restarting \(tap.id) failed: \(error); \(evidence())" }
                settlesFrom = monotonicNanoseconds()
                deadline = max(deadline, settlesFrom + 8_000_000_000)
            }
            pause(0.05)
        }
        settle(since: settlesFrom)
        return nil
    }

    /// Waits until 3 s after `start` (monotonic ns), when a snapclient that (re)connected then
    /// plays at its settled latency.
    func settle(since start: Int) {
        pause(max(0, 3.0 - Double(monotonicNanoseconds() - start) / 1e9))
    }

    /// The Snapcast part of the zone's entry in the daemon's status.
    var zoneStatus: SnapcastStatus? { daemon.status().zones.first { $0.name == "upstairs" }?.snapcast }

    /// Whether the server has both speakers connected and on the zone's stream.
    func speakersBack() -> Bool {
        let s = try? control.status()
        return s?.client("bedroom-pi")?.connected == true && s?.client("bath-pi")?.connected == true
            && s?.group(of: "bath-pi")?.streamID == "upstairs"
    }

    /// An exit status from `BackgroundProcess.wait`, in words.
    static func describe(_ status: Int32) -> String {
        status > 128 ? "killed by signal \(status - 128)" : "exit status \(status)"
    }

    /// The last `count` lines of `text`.
    static func tail(_ text: String, _ count: Int) -> String {
        text.split(separator: "\n").suffix(count).joined(separator: "\n")
    }

    /// What the server says of the speakers, the ends of the speakers' and the server's logs, and
    /// the daemon's last lines: for a failure message.
    func evidence() -> String {
        let said: String
        do {
            let s = try control.status()
            said = ["bedroom-pi", "bath-pi"].map { id in
                "\(id) connected \(s.client(id)?.connected.description ?? "unknown"), on stream \(s.group(of: id)?.streamID ?? "none")"
            }.joined(separator: ", ")
        } catch {
            said = "no status (\(error))"
        }
        let tail = { (text: String) in Self.tail(text, 12) }
        let speaker = { (tap: SnapcastClientTap) in
            "\(tap.frameCount) frames heard, restarted \(tap.restarts) times; "
                + (tap.exitStatus.map { "exited: \(Self.describe($0))" } ?? "threads: \(tap.threads)")
        }
        return """
            the server says: \(said)
            bedroom-pi (\(speaker(bedroom))):
            \(tail(bedroom.log))
            bath-pi (\(speaker(bath))):
            \(tail(bath.log))
            snapserver:
            \(tail(server.log))
            batond:
            \(log.lines.withLock { $0.suffix(12) }.joined(separator: "\n"))
            """
    }

    /// Sleeps on the test's own thread (never a Task).
    func pause(_ seconds: Double) { usleep(UInt32(seconds * 1_000_000)) }
}

typealias DeviceOutputSnapshot = DeviceOutput.Snapshot

/// The daemon's log lines, for failure messages.
final class LogLines: Sendable {
    let lines = Mutex<[String]>([])
}

/// Where a tone starts in one client's output, and when that sample was played.
struct Onset {
    var frame: Int
    var at: Int
}

extension SnapcastClientTap {
    /// The first frame at or after `from` whose left sample exceeds `threshold` (over silence).
    func onset(in left: [Float], from: Int, threshold: Float = 0.02) -> Onset? {
        guard from < left.count, let i = left[from...].firstIndex(where: { abs($0) > threshold }) else { return nil }
        return Onset(frame: i, at: playTime(ofFrame: i))
    }

    /// The first 5 ms block at or after `from` where `frequency` reaches `level` (over other sound).
    func toneStart(in left: [Float], frequency: Double, from: Int, level: Double = 0.1) -> Onset? {
        var i = from
        while i + 240 <= left.count {
            if Signals.windowedToneLevel(left[i..<i + 240], frequency: frequency, rate: 48_000) > level {
                return Onset(frame: i, at: playTime(ofFrame: i))
            }
            i += 240
        }
        return nil
    }
}
