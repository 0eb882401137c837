import Glibc

/// A PulseAudio server of the test's own: no configuration of the machine's (`-n`), a socket in
/// `directory` that anyone may use, and one null sink, `baton`, in `rate` Hz S16 stereo — so a
/// stream in that format reaches it and its monitor unconverted. Stopped on deinit.
public final class PulseAudioServer {
    /// The socket, as a client names it: "unix:/…/pulse.sock".
    public let address: String
    /// The sink's monitor source, to record what the sink played (`parec -d`).
    public let monitor = "baton.monitor"
    private let process: BackgroundProcess

    /// Starts it and waits (up to 5 s) for its socket.
    /// - Throws: ``BackgroundProcess/SpawnError`` when it cannot be started or its socket does not appear.
    public init(directory: String, rate: Int = 48_000) throws {
        let socket = directory + "/pulse.sock"
        address = "unix:" + socket
        process = try BackgroundProcess(
            "/usr/bin/pulseaudio",
            [
                "-n", "--daemonize=no", "--exit-idle-time=-1", "--use-pid-file=no",
                "-L", "module-native-protocol-unix auth-anonymous=1 socket=\(socket)",
                "-L", "module-null-sink sink_name=baton rate=\(rate) format=s16le channels=2",
            ], outputPath: directory + "/pulse.log")
        guard waitUntil(seconds: 5, { access(socket, F_OK) == 0 }) else {
            throw BackgroundProcess.SpawnError(description: "pulseaudio made no socket: \(process.output)")
        }
    }

    /// Records the sink's monitor (raw S16 stereo at `rate`) into `file` until stopped.
    public func record(into file: String, rate: Int = 48_000) throws -> BackgroundProcess {
        try BackgroundProcess(
            "/usr/bin/parec",
            [
                "--server=\(address)", "--device=\(monitor)", "--format=s16le", "--rate=\(rate)", "--channels=2",
                "--raw", "--latency-msec=20", file,
            ], outputPath: file + ".log")
    }

    deinit { _ = process.stop() }
}
