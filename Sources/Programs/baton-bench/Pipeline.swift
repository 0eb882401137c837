import ALSA
import AudioCore
import Engine
import Glibc
import Media
import OSThread
import Synchronization

// `baton-bench --pipeline URL|PATH`: one music stream through Baton's own pipeline, unpaced.
//
// What runs is what the daemon runs for one Subsonic track into one zone:
//   network thread:  HTTP body → the daemon's `StreamBuffer` (Media, 256 KiB)
//   streamer thread: `StreamDecoders.make` (by Content-Type) → the decoder (opusfile) → the daemon's
//                    `TrackRenderer` (Media: gain, channel map, `makeResampler`, soxr-hq by default)
//                    → the slot's `FloatRing`
//                    → `ZoneMixer.render` (slot gain, zone volume 0.8) → `convertToS16` → `PCM.write`.
// Differences from the daemon, all outside the per-sample path:
// - the HTTP GET is a plain socket read here (baton-bench may not link libcurl); its cost is a few
//   ms for the whole stream either way (see docs/PERFORMANCE.md, "Side by side");
// - the zone is rendered on the streamer thread as soon as a period is buffered (ALSA `null` never
//   blocks, so a separate output thread would spin on silence), instead of on `DeviceOutput`'s thread
//   paced by the device — same calls (`render`, `convertToS16`, `PCM.write`), in the same order;
// - no HTTP API, no arbiter, no Subsonic client (the URL is played as is), no control thread.

struct BenchError: Error, CustomStringConvertible {
    var description: String
}

/// A plain HTTP/1.1 GET of `http://IPv4:port/path`: connects and reads the answer's head on the
/// caller's thread, then a network thread copies the body into `buffer` in 16 KiB chunks (libcurl's
/// write-callback size) until the server closes.
final class BenchHTTPGet: @unchecked Sendable {
    // @unchecked: `fd` and `leftover` are handed to the network thread once and not touched again here.
    let buffer = StreamBuffer()  // the daemon's (Media)
    let contentType: String?
    private let fd: Int32
    private var leftover: [UInt8]
    private var thread: OSThread?

    init(_ url: String) throws {
        guard url.hasPrefix("http://") else { throw BenchError(description: "\(url): only http:// URLs") }
        let rest = url.dropFirst("http://".count)
        let hostPort = rest.prefix { $0 != "/" }
        let path = rest.dropFirst(hostPort.count)
        let parts = hostPort.split(separator: ":")
        let host = String(parts[0])
        let port = parts.count > 1 ? UInt16(parts[1]) ?? 80 : 80
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else {
            throw BenchError(description: "\(url): the host must be a numeric IPv4 address")
        }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.fd = fd
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            throw BenchError(description: "\(url): connect: \(String(cString: strerror(errno)))")
        }
        let request =
            "GET \(path.isEmpty ? "/" : path) HTTP/1.1\r\nHost: \(hostPort)\r\nUser-Agent: baton-bench\r\n"
            + "Accept: */*\r\nConnection: close\r\n\r\n"
        _ = request.utf8CString.withUnsafeBufferPointer { send(fd, $0.baseAddress, $0.count - 1, 0) }
        var head: [UInt8] = []
        var body: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { throw BenchError(description: "\(url): the server closed before its answer's head") }
            head += chunk[..<n]
            if let end = head.indices.first(where: { i in
                i + 3 < head.count && head[i..<(i + 4)].elementsEqual([13, 10, 13, 10])
            }) {
                body = Array(head[(end + 4)...])
                head = Array(head[..<end])
                break
            }
        }
        let lines = String(decoding: head, as: UTF8.self).split(separator: "\r\n")
        guard let status = lines.first, status.split(separator: " ").dropFirst().first == "200" else {
            throw BenchError(description: "\(url): \(lines.first ?? "no status line")")
        }
        leftover = body
        contentType = lines.dropFirst().first { $0.lowercased().hasPrefix("content-type:") }
            .map { String($0.dropFirst("content-type:".count).drop { $0 == " " }) }
    }

    func start() {
        thread = OSThread.start { [self] in
            _ = leftover.withUnsafeBytes { buffer.write($0) }
            var chunk = [UInt8](repeating: 0, count: 16_384)
            while true {
                let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if n < 0 && errno == EINTR { continue }
                if n < 0 {
                    buffer.fail(ByteSourceError(message: "recv: \(String(cString: strerror(errno)))"))
                    break
                }
                if n == 0 {
                    buffer.finish()
                    break
                }
                _ = chunk.withUnsafeBytes { buffer.write(UnsafeRawBufferPointer(rebasing: $0[..<n])) }
            }
            close(fd)
        }
    }

    func join() { thread?.join() }
}

/// CPU seconds each stage took on the streamer thread (with `--stages`; else zeros).
struct StageTimes {
    var decode = 0.0, glue = 0.0, render = 0.0
}

/// One zone fed by one stream, rendered inline (see the file's head).
final class PipelineStreamer {
    struct Target {
        let slot: SourceSlot
        let rate: Int
        let channels: Int
        let resampler: ResamplerKind
    }

    let targets: [Target]
    let mixer: ZoneMixer
    let pcm: PCM
    let bytes: UnsafeMutableRawPointer
    let timeStages: Bool
    var stages = StageTimes()
    var framesWritten = 0
    private var mark = 0.0

    init(
        zoneRate: Int, channels: Int, periodFrames: Int, bufferFrames: Int, device: String, volume: Float,
        resampler: ResamplerKind, timeStages: Bool
    ) throws {
        // The daemon's zone: 10 ms ramps, 8 slots, 500 ms rings (ZoneTable.deviceSpec).
        mixer = ZoneMixer(
            channels: channels, periodFrames: periodFrames, slotCount: 8,
            ringSamples: max(zoneRate / 2, periodFrames * 4) * channels, rampFrames: max(1, zoneRate / 100))
        mixer.setInitialVolume(volume)
        pcm = try PCM(
            PCMRequest(
                name: device, rate: zoneRate, channels: channels, format: .s16LE,
                periodFrames: periodFrames, bufferFrames: bufferFrames))
        bytes = .allocate(byteCount: periodFrames * channels * 2, alignment: 16)
        targets = [Target(slot: mixer.claimSlot(gain: 1)!, rate: zoneRate, channels: channels, resampler: resampler)]
        self.timeStages = timeStages
    }

    deinit { bytes.deallocate() }

    @inline(__always) private func lap(_ keyPath: WritableKeyPath<StageTimes, Double>) {
        guard timeStages else { return }
        let now = threadSeconds()
        stages[keyPath: keyPath] += now - mark
        mark = now
    }

    /// One output cycle of `DeviceOutput.play` (one zone owning the device): render, convert, write.
    private func renderPeriod() {
        let period = mixer.periodFrames
        let channels = mixer.channels
        mixer.render()
        convertToS16(mixer.mix, bytes.assumingMemoryBound(to: Int16.self), count: period * channels)
        var written = 0
        while written < period {
            let r = pcm.write(bytes + written * channels * 2, frames: period - written)
            if r >= 0 {
                written += r
                continue
            }
            if pcm.recover(Int32(r)) != 0 { return }
        }
        framesWritten += period
    }

    /// Renders every whole period buffered in the slot (the output thread's share of the work).
    private func drain() {
        lap(\.glue)
        let t = targets[0]
        while t.slot.ring.readable >= mixer.periodFrames * t.channels { renderPeriod() }
        lap(\.render)
    }

    /// Plays the stream to its end through the daemon's `TrackRenderer`, rendering a period whenever
    /// one is buffered (the output thread's share of the work), then renders what is left.
    func run(decoder: any AudioDecoder, downloaded: () -> Bool) throws {
        if timeStages { mark = threadSeconds() }
        let renderer = try TrackRenderer(
            decoder: decoder,
            outputs: targets.map {
                TrackRenderer.Output(channels: $0.channels, rate: $0.rate, resampler: $0.resampler)
            })
        while true {
            lap(\.glue)
            let more = try renderer.step(afterRead: {
                lap(\.decode)
                _ = downloaded()
            }) { k, samples in
                push(samples, into: targets[k])
            }
            if !more { break }
        }
        lap(\.glue)
        let t = targets[0]
        t.slot.finish()
        while !t.slot.isDrained { renderPeriod() }
        lap(\.render)
    }

    /// Writes `samples` into the slot's ring, rendering periods when it is full (where the daemon's
    /// streamer waits for its output thread).
    private func push(_ samples: UnsafeBufferPointer<Float>, into t: Target) -> Bool {
        var offset = 0
        while offset < samples.count {
            let n = t.slot.write(samples.baseAddress! + offset, count: samples.count - offset)
            offset += n
            if n == 0 { drain() }
        }
        return true
    }
}

/// `--pipeline`: plays `target` (an http:// URL or a file) through Baton's pipeline and prints the
/// figures. Returns the exit status.
func runPipeline(target: String, kind: ResamplerKind, device: String, volume: Float, timeStages: Bool) -> Int32 {
    PCM.silenceLibraryErrors()
    let wall0 = monotonicNanoseconds()
    do {
        let streamer = try PipelineStreamer(
            zoneRate: 44_100, channels: 2, periodFrames: 441, bufferFrames: 1_764,
            device: device, volume: volume, resampler: kind, timeStages: timeStages)
        let source: any ByteSource
        let contentType: String?
        var get: BenchHTTPGet?
        if target.hasPrefix("http://") {
            let g = try BenchHTTPGet(target)
            g.start()
            get = g
            source = g.buffer
            contentType = g.contentType
        } else {
            source = try FileByteSource(path: target)
            contentType = nil
        }
        let decoder = try StreamDecoders.make(contentType: contentType, source: source, name: target)
        try streamer.run(decoder: decoder, downloaded: { get?.buffer.isComplete ?? true })
        get?.join()
        let wall = Double(monotonicNanoseconds() - wall0) / 1e9
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        let cpu =
            Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
            + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
        let audio = Double(streamer.framesWritten) / 44_100
        print(
            """
            baton-bench --pipeline: \(target) → \(kind.rawValue) → 44100 Hz S16 stereo, zone volume \(volume), ALSA \(device)
              audio: \(f(audio, 2)) s in \(f(wall, 2)) s wall
              process CPU (all threads, incl. start-up): \(f(cpu, 3)) s = \(f(cpu / audio, 5)) s per audio second (\(f(audio / cpu, 1))× real time)
              peak RSS: \(f(Double(usage.ru_maxrss) / 1024, 1)) MiB
            """)
        if timeStages {
            let s = streamer.stages
            let total = s.decode + s.glue + s.render
            print(
                """
                  streamer thread, by stage (thread CPU; the timing itself adds ≈ 1 %):
                    decode (opusfile):                 \(f(s.decode / audio, 5)) s/s (\(f(100 * s.decode / total, 1)) %)
                    glue + resample (MusicStreamer):   \(f(s.glue / audio, 5)) s/s (\(f(100 * s.glue / total, 1)) %)
                    mix + S16 + snd_pcm_writei:        \(f(s.render / audio, 5)) s/s (\(f(100 * s.render / total, 1)) %)
                """)
        }
        return 0
    } catch {
        print("baton-bench --pipeline: \(error)")
        return 1
    }
}
