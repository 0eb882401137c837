import Glibc
import OSThread
import Synchronization
import Systemd

/// `control: {mpris: BUS-NAME, bus: session|system}`: the player's MPRIS interface over D-Bus
/// (`org.mpris.MediaPlayer2.Player` on `/org/mpris/MediaPlayer2`), through sd-bus. `Pause` and
/// `Play` run on the control's queue; a watcher thread reads `PlaybackStatus` every 50 ms, so a pause
/// or play the user gives the player is seen and told apart from Baton's own.
public final class MPRISControl: PlayerControl, @unchecked Sendable {
    // @unchecked: the mutable state is behind Mutexes and atomics; the rest is `let`.
    public let busName: String
    public let systemBus: Bool
    private let queue = ControlQueue()
    private let report: @Sendable (String) -> Void
    private let failure = Mutex<String?>(nil)
    private let states = PlayerStateWatch(paused: "Paused", playing: "Playing")
    private let running = Atomic<Bool>(true)
    static let path = "/org/mpris/MediaPlayer2"
    static let interface = "org.mpris.MediaPlayer2.Player"

    public init(busName: String, systemBus: Bool, report: @escaping @Sendable (String) -> Void) {
        self.busName = busName
        self.systemBus = systemBus
        self.report = report
        OSThread.detach { [self] in watch() }
    }

    public var description: String { "mpris \(busName) (\(systemBus ? "system" : "session") bus)" }
    public var lastError: String? { failure.withLock { $0 } }
    public func takeUserChange() -> PlayerChange? { states.takeUserChange() }
    public func pause() { command("Pause", expecting: "Paused") }
    public func play() { command("Play", expecting: "Playing") }

    public func close() {
        running.store(false, ordering: .releasing)
        queue.close()
    }

    private func command(_ member: String, expecting state: String) {
        states.expect(state)
        queue.run { [self] in
            do {
                let bus = try DBusConnection(systemBus: systemBus)
                try bus.call(destination: busName, path: Self.path, interface: Self.interface, member: member)
                failure.withLock { $0 = nil }
            } catch {
                let why = "MPRIS \(member) to \(busName) failed: \(error)"
                failure.withLock { $0 = why }
                report(why)
            }
        }
    }

    private func watch() {
        var reported = false
        while running.load(ordering: .acquiring) {
            do {
                let bus = try DBusConnection(systemBus: systemBus)
                while running.load(ordering: .acquiring) {
                    let state = try bus.stringProperty(
                        destination: busName, path: Self.path, interface: Self.interface, name: "PlaybackStatus")
                    reported = false
                    states.saw(state)
                    usleep(50_000)
                }
            } catch {
                if !reported {
                    reported = true
                    let why = "cannot follow \(busName)'s PlaybackStatus: \(error)"
                    failure.withLock { $0 = why }
                    report(why)
                }
                usleep(1_000_000)
            }
        }
    }
}
