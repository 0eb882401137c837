import BatonTesting
import Glibc
import OSThread
import Synchronization
import Testing

@testable import BatonDaemon
@testable import Players

/// An external program's stream, on a socket pair (filling a slot of a test daemon's zone).
@Suite(.ownThread) struct ExternalStreamTests {
    /// Discarding (`drop` while interrupted), a program that paused (sent nothing for a while) is
    /// taken at its rate again when it goes on, not at once for as long as it paused: the clock
    /// owed it the pause, and the first frames of its resume went in one gulp (the music's
    /// resume swallowed, the program unpaced).
    @Test func aDiscardedProgramThatPausedIsNotTakenAtOnce() throws {
        let pair = try PairedStream(program: "shairport-sync", logging: .error)
        defer { pair.stop() }
        let (stream, send) = (pair.stream, pair.send)
        stream.setDiscarding(true)
        let format = [0, 2, 48_000, 24_000, 480]  // S16_LE, stereo, 0.5 s buffer
        send(Self.formatMessage(format))
        send(ExternalWire.message(.data, [UInt8](repeating: 1, count: 480 * 4)))
        #expect(waitUntil(seconds: 5) { stream.framesConsumed == 480 })
        usleep(500_000)  // the program's pause, in real time: nothing sent
        let resumed = monotonicNanoseconds()
        send(ExternalWire.message(.data, [UInt8](repeating: 1, count: 24_000 * 4)))
        #expect(waitUntil(seconds: 5) { stream.framesConsumed > 480 })
        let taken = stream.framesConsumed - 480
        let since = Double(monotonicNanoseconds() - resumed) / 1e9
        // At its rate from about when it went on: from the thread's last look before (every 10 ms
        // while discarding; up to 0.1 s on a loaded machine) — not for the 0.5 s it paused.
        #expect(Double(taken) <= (since + 0.1) * 48_000, "\(taken) frames taken \(since) s after it went on")
    }

    /// A program that sends DROP after DROP while Baton holds it paused (pause mode: what it drops
    /// is kept for the resume) says so in the log once, not once a message: a program in group
    /// `audio` could flood the journal, whose rate limit then hid batond's real warnings.
    @Test func repeatedDropsWhilePausedAreLoggedOnce() throws {
        let pair = try PairedStream(program: "mpd")
        defer { pair.stop() }
        let (stream, send) = (pair.stream, pair.send)
        stream.setHeld(true, keepingDropped: true)
        let format = [0, 2, 48_000, 24_000, 480]  // S16_LE, stereo, 0.5 s buffer
        send(Self.formatMessage(format))
        send(ExternalWire.message(.data, [UInt8](repeating: 1, count: 480 * 4)))
        for _ in 0..<50 { send(ExternalWire.message(.drop)) }
        let kept = { pair.lines.filter { $0.contains("kept for the resume") }.count }
        #expect(waitUntil(seconds: 5) { kept() >= 1 }, "\(pair.lines)")
        // The stream answers each DROP (POSITION): once the last is answered, all were read.
        Self.awaitAnswers(from: pair.program, drops: 50)
        #expect(kept() == 1, "\(pair.lines)")
    }

    /// Frames kept at a DROP while Baton paused the player (the music just after the cut) stay
    /// kept through a DROP the player sends after the resume let go of them (mpv's prepare when it
    /// plays again): they were counted as consumed at the first DROP, so they are no longer the
    /// program's to drop. The second DROP emptied the FIFO, and what the rings had not taken yet of
    /// the kept frames was skipped: the music resumed from the cut, then jumped ahead.
    @Test func framesKeptForTheResumeOutliveALaterDrop() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        let (output, release) = try Self.kitchenOutput(t)
        defer { release() }
        output.slot.pause()  // nothing is taken from its ring: it holds what was written into it
        let pair = try PairedStream(program: "mpv")
        defer { pair.stop() }
        let (stream, send) = (pair.stream, pair.send)
        stream.setHeld(true, keepingDropped: true)  // Baton paused the player
        let fields = [0, output.channels, output.rate, 4_410, 441]  // S16_LE, buffer, period
        send(Self.formatMessage(fields))
        send(ExternalWire.message(.data, [UInt8](repeating: 1, count: 441 * output.channels * 2)))
        send(ExternalWire.message(.drop))  // the player's pause
        let kept = { pair.lines.contains { $0.contains("dropped 441 frames while paused by Baton") } }
        #expect(waitUntil(seconds: 5) { kept() }, "\(pair.lines)")
        stream.setHeld(false)  // the resume: what it drops now is its own again
        send(ExternalWire.message(.drop))  // the player's prepare as it plays again
        // The stream answers a DROP (POSITION): once the second is answered, it was read.
        Self.awaitAnswers(from: pair.program, drops: 2)
        stream.attach([output])
        #expect(
            waitUntil(seconds: 2) { output.slot.ring.readable == 441 * output.channels },
            "the kept frames go into the slot: \(output.slot.ring.readable) samples")
    }

    /// Frames kept at a DROP while Baton paused the player (the music just after the cut) stay
    /// kept through a FORMAT the player sends before it is heard again (its hw_params again on the
    /// same connection, at another rate and sample format): they were counted as consumed at the
    /// DROP, so they are Baton's to play. The FORMAT replaced the FIFO with them in it: the resume
    /// began up to a buffer after the cut.
    @Test func framesKeptForTheResumeOutliveAFormatChange() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        let (output, release) = try Self.kitchenOutput(t)
        defer { release() }
        output.slot.pause()  // nothing is taken from its ring: it holds what was written into it
        let pair = try PairedStream(program: "mpd")
        defer { pair.stop() }
        let (stream, send) = (pair.stream, pair.send)
        stream.setHeld(true, keepingDropped: true)  // Baton paused the player
        func format(_ sample: Int, rate: Int) -> [UInt8] {
            let fields = [sample, output.channels, rate, 4_410, 441]  // buffer, period
            return Self.formatMessage(fields)
        }
        // 441 frames of S16 at a level of 8192 (a quarter of full scale).
        let level = ExternalWire.bytes(of: UInt32(8192)).prefix(2)
        send(format(0, rate: output.rate))
        send(ExternalWire.message(.data, Array((0..<(441 * output.channels)).map { _ in level }.joined())))
        send(ExternalWire.message(.drop))  // the player's pause
        let kept = { pair.lines.contains { $0.contains("dropped 441 frames while paused by Baton") } }
        #expect(waitUntil(seconds: 5) { kept() }, "\(pair.lines)")
        // The player sets itself up again, at twice the rate in FLOAT_LE, before it is heard again.
        send(format(2, rate: 2 * output.rate))
        Self.awaitAnswers(from: pair.program, drops: 1, formats: 2)
        #expect(waitUntil { stream.formatDescription == "FLOAT_LE \(output.channels) ch \(2 * output.rate) Hz" })
        stream.setHeld(false)  // heard again
        stream.attach([output])
        // Resampled there and back: the same 441 frames but for what a converter holds back.
        #expect(
            waitUntil(seconds: 2) { output.slot.ring.readable >= 300 * output.channels },
            "the kept frames go into the slot: \(output.slot.ring.readable) samples")
        #expect(output.slot.ring.readable <= 460 * output.channels, "\(output.slot.ring.readable) samples")
    }

    /// A player held paused by Baton whose DROP kept a whole large buffer (more than the socket
    /// holds), then written into again after its prepare (the plugin counts the kept frames as
    /// consumed, so it sees the whole buffer free), has what it writes taken into batond's FIFO:
    /// the kept frames filled it, the rest filled the socket, and the player waited in its send
    /// until the plugin's 2 s timeout took batond for gone.
    @Test func aBufferWrittenAfterAKeepingDropIsTaken() throws {
        let pair = try PairedStream(program: "mpd")
        defer { pair.stop() }
        let (stream, send) = (pair.stream, pair.send)
        stream.setHeld(true, keepingDropped: true)  // Baton paused the player
        let buffer = 131_072  // S16_LE stereo: 512 KiB, more than a socket pair holds
        let format = [0, 2, 48_000, buffer, 1_024]
        send(Self.formatMessage(format))
        send(ExternalWire.message(.data, [UInt8](repeating: 1, count: buffer * 4)))
        send(ExternalWire.message(.drop))  // the player's pause: all of it kept
        Self.awaitAnswers(from: pair.program, drops: 1)
        #expect(pair.lines.contains { $0.contains("dropped \(buffer) frames while paused by Baton") }, "\(pair.lines)")
        // The player's prepare, and its buffer written again while it is still held.
        let data = ExternalWire.message(.data, [UInt8](repeating: 2, count: buffer * 4))
        var sent = 0
        let deadline = monotonicNanoseconds() + 5_000_000_000
        while sent < data.count && monotonicNanoseconds() < deadline {
            var ready = pollfd(fd: pair.program, events: Int16(POLLOUT), revents: 0)
            _ = poll(&ready, 1, 100)
            let n = data.withUnsafeBytes {
                Glibc.send(pair.program, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_DONTWAIT | MSG_NOSIGNAL))
            }
            if n > 0 { sent += n }
        }
        #expect(sent == data.count, "\(sent) of \(data.count) bytes taken in 5 s")
    }

    /// A program held paused by Baton that writes a buffer and drops it, again and again, has at
    /// most a buffer kept (the head, the music just after the cut): each DROP kept all the FIFO
    /// held and grew it by a whole buffer (4 MiB here), without end — the memory bound on a
    /// connection gone (32 of them filled a Pi Zero 2 W).
    @Test func repeatedKeepingDropsKeepAtMostABuffer() throws {
        let pair = try PairedStream(program: "mpd")
        defer { pair.stop() }
        let (stream, send) = (pair.stream, pair.send)
        stream.setHeld(true, keepingDropped: true)  // Baton paused the player
        let buffer = ExternalFormat.maxBufferBytes / 4  // S16_LE stereo: 4 MiB, the most there is
        let format = [0, 2, 48_000, buffer, 1_024]
        send(Self.formatMessage(format))
        let data = ExternalWire.message(.data, [UInt8](repeating: 1, count: buffer * 4))
        for _ in 0..<20 {
            send(data)
            send(ExternalWire.message(.drop))
        }
        Self.awaitAnswers(from: pair.program, drops: 20)
        let bytes = stream.fifoBytes.load(ordering: .acquiring)
        #expect(bytes <= 2 * ExternalFormat.maxBufferBytes, "a FIFO of \(bytes) bytes")
        let cut = pair.lines.filter { $0.contains("more than the 4 MiB kept at most") }
        #expect(cut.count == 1, "\(pair.lines)")
    }

    /// Frames kept for the resume, then a FORMAT at the highest rate and channel count there is:
    /// only what fits the new buffer is carried (the head), converted a block at a time. The kept
    /// frames were converted whole, 48 times as many frames of 8 channels of Float — from 4 MiB
    /// kept, 3.2 GB, which aborted batond.
    @Test func aFormatCarriesAtMostABufferOfTheKeptFrames() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        let (output, release) = try Self.kitchenOutput(t)
        defer { release() }
        output.slot.pause()  // nothing is taken from its ring: it holds what was written into it
        let pair = try PairedStream(program: "mpd")
        defer { pair.stop() }
        let (stream, send) = (pair.stream, pair.send)
        stream.setHeld(true, keepingDropped: true)  // Baton paused the player
        // 32 768 frames of S16 mono at 8 kHz: the first 4 096 at a quarter of full scale, then silence.
        let kept = 32_768
        let first = [0, 1, 8_000, kept, 1_024]
        send(Self.formatMessage(first))
        let level = ExternalWire.bytes(of: UInt32(8192)).prefix(2)
        let head = Array((0..<4_096).map { _ in level }.joined())
        send(ExternalWire.message(.data, head + [UInt8](repeating: 0, count: (kept - 4_096) * 2)))
        send(ExternalWire.message(.drop))  // the player's pause: all of it kept
        // FLOAT_LE, 8 channels at 384 kHz: a buffer of 4 MiB, 131 072 frames (2 731 at 8 kHz).
        let room = ExternalFormat.maxBufferBytes / 32
        let second = [2, 8, 384_000, room, 1_024]
        send(Self.formatMessage(second))
        Self.awaitAnswers(from: pair.program, drops: 1, formats: 2)
        #expect(waitUntil { stream.formatDescription == "FLOAT_LE 8 ch 384000 Hz" })
        let bytes = stream.fifoBytes.load(ordering: .acquiring)
        #expect(bytes <= 2 * room * 32, "a FIFO of \(bytes) bytes")
        #expect(pair.lines.contains { $0.contains("the first 2731 fill the 4 MiB kept at most") }, "\(pair.lines)")
        stream.setHeld(false)  // heard again
        stream.attach([output])
        // The head goes into the slot: the music just after the cut, not silence.
        #expect(waitUntil(seconds: 5) { output.slot.ring.readable >= 256 * output.channels })
        var samples = [Float](repeating: 0, count: output.slot.ring.readable)
        let n = samples.withUnsafeMutableBufferPointer {
            output.slot.ring.read(into: $0.baseAddress!, count: $0.count, releasing: false)
        }
        let loudest = samples[0..<n].map(abs).max() ?? 0
        #expect(loudest > 0.1, "the loudest of \(n) samples carried: \(loudest)")
    }

    /// A player Baton paused (its DROP kept a buffer for the resume), played on through its own
    /// controls while the doorbell still holds its zone and paused again: the second DROP keeps
    /// both buffers, all of it the music after the cut. Kept up to one buffer of its own, the
    /// resume jumped a buffer ahead (up to 21 s with a 4 MiB buffer).
    @Test func aPlayerPlayedOnAndPausedAgainKeepsAllItsMusicForTheResume() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        let (output, release) = try Self.kitchenOutput(t)
        defer { release() }
        output.slot.pause()  // nothing is taken from its ring: it holds what was written into it
        let pair = try PairedStream(program: "mpd")
        defer { pair.stop() }
        let (stream, send) = (pair.stream, pair.send)
        stream.setHeld(true, keepingDropped: true)  // Baton paused the player
        let fields = [0, output.channels, output.rate, 441, 441]  // S16_LE, buffer, period
        send(Self.formatMessage(fields))
        let buffer = ExternalWire.message(.data, [UInt8](repeating: 1, count: 441 * output.channels * 2))
        send(buffer)
        send(ExternalWire.message(.drop))  // its pause
        send(buffer)  // played on through its own controls, a buffer more
        send(ExternalWire.message(.drop))  // and paused again
        Self.awaitAnswers(from: pair.program, drops: 2)
        stream.setHeld(false)  // the resume
        stream.attach([output])
        #expect(
            waitUntil(seconds: 2) { output.slot.ring.readable == 882 * output.channels },
            "both buffers go into the slot: \(output.slot.ring.readable) samples")
    }

    /// A program that sends control messages without end (DRAINs, 8 bytes each) does not keep the
    /// stream's thread from a stop: it read them until the socket was empty, which it never was.
    @Test func aFloodOfMessagesDoesNotHoldTheStream() throws {
        let pair = try PairedStream(program: "flood", logging: .error)
        defer { pair.stop() }
        let (stream, program) = (pair.stream, pair.program)
        let flooding = Atomic<Bool>(true)
        let sent = Atomic<Int>(0)
        let flood = startThread {
            let drains = (0..<8_192).flatMap { _ in ExternalWire.message(.drain) }
            while flooding.load(ordering: .relaxed) {
                let n = drains.withUnsafeBytes { Glibc.send(program, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if n <= 0 { return }
                sent.add(n, ordering: .relaxed)
            }
        }
        // It reads what the stream answers (DRAINED, POSITION), as the plugin does.
        let reader = startThread {
            var answers = [UInt8](repeating: 0, count: 65_536)
            while answers.withUnsafeMutableBytes({ recv(program, $0.baseAddress, $0.count, 0) }) > 0 {}
        }
        defer {
            flooding.store(false, ordering: .relaxed)
            pthread_join(flood, nil)
            shutdown(program, Int32(SHUT_RDWR))
            pthread_join(reader, nil)
        }
        #expect(waitUntil(seconds: 5) { sent.load(ordering: .relaxed) > 1 << 20 }, "a MiB of DRAINs taken")
        stream.stop()
        #expect(waitUntil(seconds: 2) { stream.isFinished }, "stopped while the program floods")
    }

    /// A stream detached while its thread waits in a send (the program reads nothing) writes into
    /// its slots no more once `detach` returned: the control plane releases them next, and another
    /// source (a doorbell) may claim them. It waited 100 ms, returned, and the thread, let go,
    /// pumped the frames it had read into the released slot — a second producer on its ring.
    @Test func aDetachedStreamWritesIntoItsSlotsNoMore() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        let (output, release) = try Self.kitchenOutput(t)
        defer { release() }
        output.slot.pause()  // nothing is taken from its ring: it holds what was written into it
        let announced = Semaphore()
        let pair = try PairedStream(program: "aplay", logging: .error) { _ in announced.post() }
        defer { pair.stop() }
        let (stream, send, ours, program) = (pair.stream, pair.send, pair.ours, pair.program)
        func format(channels: Int) -> [UInt8] {
            let fields = [0, channels, output.rate, 4_410, 441]  // S16_LE, buffer, period
            return Self.formatMessage(fields)
        }
        func data(channels: Int) -> [UInt8] {
            ExternalWire.message(.data, [UInt8](repeating: 1, count: 441 * channels * 2))
        }

        send(format(channels: output.channels) + data(channels: output.channels))
        #expect(announced.wait(nanoseconds: 5_000_000_000), "its first frames announce it")
        stream.attach([output])
        #expect(waitUntil { output.slot.ring.readable == 441 * output.channels }, "they went into the slot")
        // The program reads nothing: the socket's buffer towards it is filled, so that the OK of the
        // next FORMAT waits in its send.
        var junk = [UInt8](repeating: 0, count: 4096)
        for size in [4096, 1] {
            while junk.withUnsafeMutableBytes({ Glibc.send(ours, $0.baseAddress, size, Int32(MSG_DONTWAIT)) }) > 0 {}
        }
        send(format(channels: 1) + data(channels: 1))
        #expect(waitUntil { stream.formatDescription == "S16_LE 1 ch \(output.rate) Hz" })
        stream.detach()
        let held = output.slot.ring.readable
        // The program reads again: the thread goes on, and frames it sends once it has let go of the
        // slot announce it anew (those read with the ones before, before it let go, do not).
        while junk.withUnsafeMutableBytes({ recv(program, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }) > 0 {}
        var again = false
        for _ in 0..<8 where !again {
            send(data(channels: 1))
            again = announced.wait(nanoseconds: 500_000_000)
        }
        #expect(again, "announced again once detached")
        #expect(
            output.slot.ring.readable == held, "written into after the detach: \(held) → \(output.slot.ring.readable)")
    }

    /// An `ExternalStream` on one end of a socket pair, run by a thread of its own; the other end is
    /// the program's, for the test to write to and read the answers from, and the lines the stream
    /// logs at `logging` and above are kept.
    final class PairedStream: Sendable {
        let stream: ExternalStream
        /// The stream's end of the pair, and the program's.
        let ours: Int32, program: Int32
        private let logged: Logged

        /// What a stream logs (`Mutex` cannot be moved into a closure made before `self` is whole).
        private final class Logged: Sendable {
            let lines = Mutex<[String]>([])
        }

        init(
            program name: String, logging minimum: Logger.Level = .info,
            onFrames: @escaping @Sendable (ExternalStream) -> Void = { _ in }
        ) throws {
            var fds: [Int32] = [0, 0]
            try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
            (ours, program) = (fds[0], fds[1])
            let logged = Logged()
            self.logged = logged
            let stream = ExternalStream(
                name: name, peer: ExternalPeer(pid: 1, program: name), fd: ours,
                logger: Logger(minimum: minimum, sink: { line in logged.lines.withLock { $0.append(line) } }),
                onFrames: onFrames)
            self.stream = stream
            OSThread.detach(name: "external-stream") { stream.run() }
        }

        /// The lines logged so far.
        var lines: [String] { logged.lines.withLock { $0 } }

        /// Writes `bytes` as the program, whole.
        func send(_ bytes: [UInt8]) {
            #expect(bytes.withUnsafeBytes { write(program, $0.baseAddress, $0.count) } == bytes.count)
        }

        /// Stops the stream and closes the program's end.
        func stop() {
            stream.stop()
            close(program)
        }
    }

    /// A slot of a test daemon's kitchen zone as a source's output, once the zones are up; `release`
    /// gives it back.
    static func kitchenOutput(_ t: TestDaemon) throws -> (SourceOutput, release: () -> Void) {
        #expect(waitUntil { t.daemon.zones.zones.allSatisfy { $0.device.snapshot().available } })
        let kitchen = try #require(t.daemon.output("kitchen"))
        let output = kitchen.output(try #require(kitchen.mixer.claimSlot(gain: 0)), resampler: .callsDefault)
        return (output, { kitchen.mixer.release(output.slot) })
    }

    /// A FORMAT message of `fields`: sample format (0 S16_LE, 1 S32_LE, 2 FLOAT_LE), channels,
    /// rate, buffer frames, period frames.
    static func formatMessage(_ fields: [Int]) -> [UInt8] {
        ExternalWire.message(.format, fields.flatMap { ExternalWire.bytes(of: UInt32($0)) })
    }

    /// Reads what the stream answered the program after `formats` FORMATs and `drops` DROPs — an OK
    /// for each FORMAT, and a POSITION (24 bytes) for each DROP — so that all of them were read by
    /// its thread.
    static func awaitAnswers(from program: Int32, drops: Int, formats: Int = 1) {
        var answers = [UInt8](repeating: 0, count: 65_536)
        var got = 0
        _ = waitUntil(seconds: 5) {
            let n = answers.withUnsafeMutableBytes { recv(program, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n > 0 { got += n }
            return got >= 8 * formats + drops * 24
        }
    }
}
