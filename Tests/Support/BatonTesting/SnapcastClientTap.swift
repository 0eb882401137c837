import AudioCore
import Glibc
import Synchronization

/// A real snapclient whose "sound card" is a FIFO the test reads in real time (its file player
/// paces itself by its own clock, 50 ms at a time). Every read is timestamped, so a sample's
/// play-out time can be recovered to well under a millisecond (see `playTime(ofFrame:)`).
///
/// Thread: the reader runs on its own OS thread; everything else from the test's thread.
public final class SnapcastClientTap: @unchecked Sendable {
    // @unchecked: `received` and `reads` are guarded by `lock`; `process`, `earlierLogs` and
    // `restarts` change on the test's thread only, which the reader never reads; the rest is
    // immutable or set before the reader starts.
    public let id: String
    public let fifo: String
    /// The running client; replaced by `restart` (from the test's thread only).
    private var process: BackgroundProcess
    private let arguments: [String]
    private let logDirectory: String
    /// What the clients before `process` printed (see `restart`).
    private var earlierLogs = ""
    /// How many times the client was restarted.
    public private(set) var restarts = 0
    private var reader: pthread_t?
    private let lock = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let stopping = Atomic<Bool>(false)
    private var received: [UInt8] = []
    /// (bytes received in total after the read, monotonic ns when the read returned).
    private var reads: [(end: Int, at: Int)] = []
    public static let bytesPerFrame = 4
    public static let rate = 48_000

    public init(id: String, server: SnapcastServer) throws {
        self.id = id
        fifo = "\(server.directory)/\(id).raw"
        unlink(fifo)
        guard mkfifo(fifo, 0o644) == 0 else {
            throw BackgroundProcess.SpawnError(description: "mkfifo \(fifo): \(String(cString: strerror(errno)))")
        }
        pthread_mutex_init(lock, nil)
        arguments = [
            "-h", "127.0.0.1", "-p", "\(server.streamPort)", "--hostID", id, "--player", "file:filename=\(fifo)",
            "--logfilter", "*:notice",
        ]
        logDirectory = server.directory
        process = try Self.spawn(arguments, log: "\(logDirectory)/\(id).log")
        let fifo = self.fifo
        reader = startThread { [self] in read(fifo) }
    }

    deinit {
        stop()
        pthread_mutex_destroy(lock)
        lock.deallocate()
    }

    /// Stops the client and the reader.
    public func stop() {
        process.stop()
        stopping.store(true, ordering: .releasing)
        if let reader { pthread_join(reader, nil) }
        reader = nil
    }

    /// What the client printed (every client, when it was restarted).
    public var log: String { earlierLogs + process.output }

    /// The client's exit status (128 + the signal that killed it) once it has exited, else nil.
    /// snapclient 0.26 with the file player this tap uses can crash when its server goes away (see
    /// docs/SNAPCAST.md).
    public var exitStatus: Int32? { process.wait(seconds: 0) }

    /// Kills the client with `signal` (SIGKILL: as a crash would, with no goodbye to the server)
    /// and reaps it; the reader goes on. `restart` brings a client back.
    public func kill(_ signal: Int32 = SIGKILL) {
        process.stop(signal: signal)
    }

    /// Starts a new client on the same FIFO, as a speaker's systemd unit restarts snapclient after
    /// a crash (`Restart=on-failure`): the reader goes on, and what the first printed stays in
    /// `log`. For a client that exited (`exitStatus`).
    public func restart() throws {
        process.stop()
        earlierLogs += process.output + "--- restarted by the test ---\n"
        process = try Self.spawn(arguments, log: "\(logDirectory)/\(id)-\(restarts + 2).log")
        restarts += 1
    }

    /// A snapclient with `arguments`, printing into the file `log`.
    private static func spawn(_ arguments: [String], log: String) throws -> BackgroundProcess {
        try BackgroundProcess("/usr/bin/snapclient", arguments, outputPath: log)
    }

    /// Where the client's threads are (see `ProcessThreads.whereTheyWait`).
    public var threads: String { ProcessThreads.whereTheyWait(process: "\(process.pid)") }

    /// Frames received so far.
    public var frameCount: Int { locked { received.count / Self.bytesPerFrame } }

    /// The left channel of everything received, as floats.
    public func left() -> [Float] {
        locked {
            stride(from: 0, to: received.count - 3, by: Self.bytesPerFrame).map { i in
                Float(Int16(bitPattern: UInt16(received[i]) | UInt16(received[i + 1]) << 8)) / 32768
            }
        }
    }

    /// The file player's tick (snapclient `kDefaultBuffer`): each write holds this much audio.
    public static let tickNanoseconds = 50_000_000
    /// How far ahead of each write its audio is meant to be heard (`getPlayerChunkOrSilence(…, 10ms, …)`).
    public static let dacNanoseconds = 10_000_000

    /// The monotonic time (ns) frame `frame` is heard, as the client's clock schedules it: the
    /// file player writes contiguous ticks on a steady clock, each meant for the DAC 10 ms after the
    /// write. Over the reads within ±`window` of the frame, `readTime − bytesSoFar/byteRate` is
    /// smallest for the read that woke soonest after its write; that fixes the write time of every
    /// frame near it to within the reader's best wake-up latency. Reconnects restart the client's
    /// clock; keep the window away from them.
    public func playTime(ofFrame frame: Int, window: Double = 0.6) -> Int {
        locked {
            let byte = frame * Self.bytesPerFrame
            let span = Int(window * Double(Self.rate)) * Self.bytesPerFrame
            let bytesPerNs = Double(Self.rate * Self.bytesPerFrame) / 1e9
            var best = Int.max
            for r in reads where abs(r.end - byte) <= span {
                best = min(best, r.at - Int(Double(r.end) / bytesPerNs))
            }
            // `best + end/byteRate` is a tick's write time; its first frame is heard a DAC offset
            // after it, one tick before its end.
            return best == .max ? 0 : best + Int(Double(byte) / bytesPerNs) + Self.tickNanoseconds + Self.dacNanoseconds
        }
    }

    private func locked<T>(_ body: () -> T) -> T {
        pthread_mutex_lock(lock)
        defer { pthread_mutex_unlock(lock) }
        return body()
    }

    private func read(_ path: String) {
        let fd = open(path, O_RDONLY | O_NONBLOCK)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while !stopping.load(ordering: .acquiring) {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&p, 1, 20) <= 0 { continue }
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            let now = monotonicNanoseconds()
            if n > 0 {
                locked {
                    received += buffer[0..<n]
                    reads.append((received.count, now))
                }
            } else if n == 0 {
                usleep(5_000)  // no writer (the client is reconnecting)
            }
        }
    }
}
