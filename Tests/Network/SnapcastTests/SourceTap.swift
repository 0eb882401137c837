import BatonTesting
import Glibc
import OSThread
import Synchronization

/// A stand-in for snapserver's `mode=server` TCP source: it accepts every connection (counting
/// them) and reads the newest, keeping the last 0.1 s of S16_LE stereo at 48 kHz it sent, on a
/// thread of its own, until `stop`.
final class SourceTap: Sendable {
    private final class Shared: Sendable {
        let accepts = Atomic<Int>(0)
        let stopping = Atomic<Bool>(false)
        /// The left channel of the last 4800 frames read.
        let recent = Mutex<[Float]>([])
    }
    private let fd: Int32
    private let shared = Shared()
    private let thread: OSThread
    let port: Int

    init() throws {
        let listener = try Listener()
        let fd = listener.fd
        self.fd = fd
        port = Int(listener.port)
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        let shared = shared
        thread = OSThread.start(name: "source-tap") {
            var client: Int32 = -1
            var pending: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while !shared.stopping.load(ordering: .acquiring) {
                var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0)]
                if client >= 0 { fds.append(pollfd(fd: client, events: Int16(POLLIN), revents: 0)) }
                guard poll(&fds, nfds_t(fds.count), 20) > 0 else { continue }
                if fds[0].revents != 0 {
                    let c = accept(fd, nil, nil)
                    if c >= 0 {
                        shared.accepts.add(1, ordering: .releasing)
                        if client >= 0 { close(client) }
                        client = c
                        pending = []
                        shared.recent.withLock { $0 = [] }
                    }
                }
                guard client >= 0, fds.count > 1, fds[1].revents != 0 else { continue }
                let n = buffer.withUnsafeMutableBytes { read(client, $0.baseAddress, $0.count) }
                guard n > 0 else {
                    close(client)
                    client = -1
                    continue
                }
                pending += buffer[0..<n]
                let frames = pending.count / 4
                var left: [Float] = []
                left.reserveCapacity(frames)
                for f in 0..<frames {
                    let sample = Int16(bitPattern: UInt16(pending[4 * f]) | UInt16(pending[4 * f + 1]) << 8)
                    left.append(Float(sample) / 32_768)
                }
                pending.removeFirst(frames * 4)
                shared.recent.withLock { r in
                    r += left
                    if r.count > 4_800 { r.removeFirst(r.count - 4_800) }
                }
            }
            if client >= 0 { close(client) }
        }
    }

    /// Connections accepted so far.
    var accepted: Int { shared.accepts.load(ordering: .acquiring) }

    /// The level of `frequency` in the last 0.1 s read (0 before 0.1 s was read).
    func level(_ frequency: Double) -> Double {
        let samples = shared.recent.withLock { $0 }
        guard samples.count == 4_800 else { return 0 }
        return Signals.toneLevel(samples[...], frequency: frequency, rate: 48_000)
    }

    func stop() {
        shared.stopping.store(true, ordering: .releasing)
        thread.join()
        close(fd)
    }
}
