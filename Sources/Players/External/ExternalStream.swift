import AudioCore
import Glibc
import Media
import OSThread
import Synchronization

/// One program's connection to a `baton` PCM, after its OPEN was accepted: the socket, the frames it
/// sent that batond has not taken yet (at most the program's ALSA buffer), and the thread that moves
/// them — converted to Float, channel-mapped and resampled — into the slots of the external source it
/// is attached to, answering with POSITION messages that pace the program.
///
/// Threads: the stream's own thread (`run`) owns the socket, the byte FIFO and the converters. The
/// control plane (under its lock) attaches and detaches slots, switches discarding and refuses the
/// stream, through `shared`; the atomics are read from any thread.
public final class ExternalStream: @unchecked Sendable {
    // @unchecked: the `var`s below `shared` are touched only by the stream's thread; what other
    // threads touch is `shared` (a Mutex) and the atomics.
    public let name: String
    public let peer: ExternalPeer
    let fd: Int32
    let logger: Logger
    /// How long after OPEN the program has to send its FORMAT (ns): a connection that sent OPEN and
    /// nothing more held a thread and one of the server's connections for ever (a few such leaks,
    /// and AirPlay or MPD were refused).
    let formatNanoseconds: Int
    /// CLOCK_MONOTONIC ns by which the FORMAT must have come.
    private let formatDeadline: Int
    /// How far ahead of the output thread the slot rings are kept beyond what one of its wake-ups
    /// takes (`DeviceOutput.burstNanoseconds`): with it, the latency batond adds (40 ms at the
    /// default period and a 40 ms buffer).
    static let marginNanoseconds = 30_000_000
    static let block = 256
    /// The most reads of the socket between two looks at `shared` (`readSocket`).
    static let readsPerLook = 256

    struct Shared {
        /// The slots to fill; nil while not attached (queued, or released while the program stays open).
        var targets: [SourceOutput]?
        var generation = 0
        /// Drop mode while interrupted: take frames at the program's rate and throw them away.
        var discarding = false
        /// Hold and pause modes while not heard: the slots are paused, so nothing is taken from them
        /// until `setHeld(false)`, which pokes the thread; it waits for that instead of looking every
        /// `pumpInterval` whether the full rings took something.
        var held = false
        /// Pause mode while Baton holds the player paused (`setHeld(_:keepingDropped:)`): a DROP
        /// keeps the frames it would discard — the music just after the cut — to be played when
        /// the source is heard again.
        var keepsDropped = false
        /// The control plane refused the stream: the sentence to send before closing, and whether
        /// it is logged as a warning.
        var refusal: (why: String, warning: Bool)?
        var stop = false
        /// Called once the thread has ended (`onFinish`).
        var finished: (@Sendable () -> Void)?
    }
    let shared = Mutex(Shared())
    /// Held by the stream's thread while it writes into the slots (`onCurrentSlots`), which it
    /// does only into those of the generation it applied, looked at under this lock: `detach`
    /// takes it once after its change, and then the thread writes into the old slots no more.
    let slotWrites = Mutex<Void>(())
    /// The stream's thread (`pthread_self()`), once `run` began: a `detach` on it (a source refused
    /// from within `onFrames`) has nothing to wait for.
    private let owner = Atomic<UInt>(0)
    let closedFlag = Atomic<Bool>(false)
    let finishedFlag = Atomic<Bool>(false)
    let lastDataAt = Atomic<Int>(0)
    let lastReceivedAt = Atomic<Int>(0)
    let consumedFrames = Atomic<Int>(0)
    let formatBits = Atomic<Int>(0)
    /// The FIFO's size in bytes (`fifoCapacity`), for any thread: at most `maxFIFOBytes`.
    let fifoBytes = Atomic<Int>(0)

    // Stream thread only.
    var format: ExternalFormat?
    var fifo: [UInt8] = []
    var fifoStart = 0
    var fifoCount = 0
    /// Frames at the FIFO's head kept by a DROP (`Shared.keepsDropped`): counted as consumed at the
    /// DROP, as the program expects, and played before what it sends after.
    var keptFrames = 0
    /// A DROP while held had more than a buffer to keep (said once a stream).
    var keptBeyondBufferSaid = false
    var received: UInt64 = 0
    var consumed: UInt64 = 0
    var drainAt: UInt64?
    var announced = false
    /// `received` when the stream was last detached: only frames after it announce it again.
    var receivedAtDetach: UInt64 = 0
    var flushedForDrain = false
    var onFrames: @Sendable (ExternalStream) -> Void
    var parser = Parser()
    var pumps: [Pump] = []
    /// The pumps' outputs, for what one zone's writes depend on the others' (a lost card).
    var pumpOutputs: [SourceOutput] = []
    var pumpGeneration = 0
    var discardSince: Int?
    var discarded: UInt64 = 0
    var lastPosition: (consumed: UInt64, delay: UInt64) = (0, 0)
    var lastPositionAt = 0
    var input: [Float] = []
    /// `input` in WAVE order for a downmix (`waveOrder`), made once per block when a pump needs it;
    /// `waveMap` the format's `waveOrder`, empty when it needs none.
    var waveInput: [Float] = []
    var waveMap: [Int] = []
    /// How long the thread sleeps while the slots are full (ms): the shortest wake-up interval of
    /// the attached zones' outputs (`DeviceOutput.burstNanoseconds`), 2…10 ms — their rings drop by
    /// at most that much per interval, so they never fall below `marginNanoseconds` — and at most
    /// 10 ms so that POSITION still follows the delay every 20 ms or so (`answer`).
    var pumpInterval: Int32 = 10
    /// Posted by the control plane when it changed `shared` (`poke`): the thread waits on it beside
    /// the socket instead of looking every 2 ms.
    let pokes = WakeFD()

    /// One target's conversion state.
    struct Pump {
        let output: SourceOutput
        let resampler: (any Resampler)?
        var mapped: [Float]
        var resampled: [Float]
        let leadSamples: Int
    }

    /// The reader's position in the byte stream.
    struct Parser {
        var header: [UInt8] = []
        var control: (type: ExternalWire.Message, need: Int, payload: [UInt8])?
        /// Bytes of the current DATA message still to come.
        var dataLeft = 0
        /// Bytes of a partial frame carried over (a DATA message split inside a frame is a violation).
    }

    init(
        name: String, peer: ExternalPeer, fd: Int32, logger: Logger,
        formatNanoseconds: Int = ExternalSourceServer.formatNanoseconds,
        onFrames: @escaping @Sendable (ExternalStream) -> Void
    ) {
        self.name = name
        self.peer = peer
        self.fd = fd
        self.logger = logger
        self.formatNanoseconds = formatNanoseconds
        formatDeadline = monotonicNanoseconds() + formatNanoseconds
        self.onFrames = onFrames
    }

    /// Wakes the stream's thread to look at `shared`. Any thread.
    func poke() { pokes.post() }

    // MARK: Any thread

    /// The peer closed (or the connection failed).
    public var isClosed: Bool { closedFlag.load(ordering: .acquiring) }
    /// The thread ended: everything the program sent was moved or the stream was abandoned.
    public var isFinished: Bool { finishedFlag.load(ordering: .acquiring) }
    /// CLOCK_MONOTONIC ns of the last DATA, or of the last frames of it moved on into the rings
    /// (0: none yet): a program that wrote its last frames ahead is not idle while they play.
    public var lastData: Int { lastDataAt.load(ordering: .acquiring) }
    /// CLOCK_MONOTONIC ns of the last DATA the program sent (0: none yet) — not of frames moved on.
    public var lastReceived: Int { lastReceivedAt.load(ordering: .acquiring) }
    /// Frames taken from the program so far.
    public var framesConsumed: Int { consumedFrames.load(ordering: .acquiring) }
    /// The program's format, once it sent one.
    public var formatDescription: String {
        shared.withLock { _ in formatText }
    }
    var formatText = ""

    // MARK: Control plane

    /// Starts (or replaces) the slots this stream fills. Control thread.
    public func attach(_ outputs: [SourceOutput]) {
        shared.withLock {
            $0.targets = outputs
            $0.generation += 1
        }
        poke()
    }

    /// Stops filling the slots and waits until the stream's thread writes into them no more (at
    /// most the rest of one pump), so they may be released. The next frames the program sends
    /// announce it again. Control thread.
    public func detach() {
        shared.withLock {
            $0.targets = nil
            $0.generation += 1
        }
        poke()
        // On the stream's own thread (its `onFrames`: the source refused, or a reload meanwhile) it
        // is not pumping. Elsewhere, the thread may be anywhere — in a send that waits for a
        // program not reading, too: it used to be waited for 100 ms, then written into the slots
        // anyway, released by then (a second producer on a ring another source may have claimed).
        guard owner.load(ordering: .acquiring) != UInt(pthread_self()) else { return }
        slotWrites.withLock { _ in }
    }

    /// Drop mode: while true, frames are taken at the program's rate and discarded. Control thread.
    public func setDiscarding(_ on: Bool) {
        shared.withLock { $0.discarding = on }
        poke()
    }

    /// Hold and pause modes: true while the slots are paused (the source is not audible). Call it
    /// after the slots were paused, and after they were resumed (it wakes the thread). The thread
    /// sleeps without a timeout only while this says held and every slot is paused.
    /// `keepingDropped` (pause mode: Baton paused the player, which drops what its buffer holds):
    /// a DROP meanwhile keeps those frames for the resume. Control thread.
    public func setHeld(_ on: Bool, keepingDropped: Bool = false) {
        shared.withLock {
            $0.held = on
            $0.keepsDropped = on && keepingDropped
        }
        poke()
    }

    /// Sends `why` to the program as an ERROR and closes the connection, and logs it with the
    /// program: a warning, or info for Baton's own doing (a stop, a release). Control thread.
    public func refuse(_ why: String, warning: Bool = false) {
        shared.withLock { $0.refusal = (why, warning) }
        poke()
    }

    /// Calls `body` (on the stream's thread, or at once) when the thread has ended. Any thread.
    public func onFinish(_ body: @escaping @Sendable () -> Void) {
        shared.withLock { $0.finished = body }
        if isFinished { body() }
    }

    /// Closes the connection at once (batond stops). Any thread.
    public func stop() {
        shared.withLock { $0.stop = true }
        poke()
    }

    // MARK: The stream's thread

    /// Reads, pumps and answers until the program leaves and everything it sent was taken.
    func run() {
        owner.store(UInt(pthread_self()), ordering: .releasing)
        defer {
            close(fd)
            closedFlag.store(true, ordering: .releasing)
            finishedFlag.store(true, ordering: .releasing)
            shared.withLock { $0.finished }?()
        }
        while true {
            let s = shared.withLock { $0 }
            if s.stop { return }
            if let refusal = s.refusal {
                // Said in batond's log too: only the program heard why its writes failed.
                let line = "external \(name): \(peer): \(refusal.why); closing its connection"
                if refusal.warning { logger.warning(line) } else { logger.info(line) }
                send(ExternalWire.error(refusal.why))
                return
            }
            if s.generation != pumpGeneration, let error = rebuildPumps(s.targets, generation: s.generation) {
                return end(with: error)
            }
            // Sleep until the program sends, the control plane pokes, or — while frames wait for
            // room in the slots, are dropped at the program's pace, or a DRAIN waits — the outputs
            // have taken some. Held slots take nothing until they are resumed, which pokes.
            let held = s.held && pumps.allSatisfy { $0.output.slot.isPauseRequested }
            var timeout: Int32 =
                s.discarding ? 10 : (!pumps.isEmpty ? (held ? -1 : pumpInterval) : (drainAt != nil ? 20 : -1))
            if format == nil && !isClosed {
                let left = formatDeadline - monotonicNanoseconds()
                guard left > 0 else {
                    return end(with: .protocolViolation("no FORMAT within \(Self.seconds(formatNanoseconds)) of OPEN"))
                }
                let ms = Int32(min(left / 1_000_000 + 1, 60_000))
                timeout = timeout < 0 ? ms : min(timeout, ms)
            }
            if !isClosed {
                if case .failure(let error) = readSocket(timeout: timeout) { return end(with: error) }
            }
            // A FORMAT in what was just read (`handle`): its DATA, read with it, must go through
            // the new format's converters (the old ones' buffers are sized for the old format).
            if pumpGeneration != s.generation {
                // What the control plane asks now (a detach may have come while the thread waited).
                let now = shared.withLock { (targets: $0.targets, generation: $0.generation) }
                if let error = rebuildPumps(now.targets, generation: now.generation) { return end(with: error) }
            }
            if received > receivedAtDetach && !announced && s.targets == nil {
                announced = true
                onFrames(self)
                continue
            }
            // Not into slots the control plane changed while the thread waited, read or sent (a
            // `detach` meanwhile returned at once): the top of the loop applies the change first.
            guard let moved = s.discarding ? discard() : onCurrentSlots(pump) else { continue }
            if !s.discarding { discardSince = nil }
            answer()
            if isClosed {
                dropPartialFrame()
                if fifoCount == 0 || s.targets == nil && !announced {
                    guard onCurrentSlots({ flushResamplers() }) != nil else { continue }
                    return
                }
                if !moved { _ = wait(socket: false, timeout: timeout) }
            }
        }
    }

    /// Runs `body`, which writes into the slots, holding `slotWrites` — unless the control plane
    /// changed the slots since the thread last applied a change (nil: apply it first). Stream thread.
    func onCurrentSlots<R: Sendable>(_ body: () -> R) -> R? {
        slotWrites.withLock { _ in shared.withLock { $0.generation } == pumpGeneration ? body() : nil }
    }

    /// `ns` as seconds for a sentence: `30 s`, `0.5 s`.
    static func seconds(_ ns: Int) -> String {
        ns % 1_000_000_000 == 0 ? "\(ns / 1_000_000_000) s" : "\(Double(ns) / 1e9) s"
    }

    /// Logs `error`, and tells the program before its connection closes. Stream thread.
    private func end(with error: ExternalStreamError) {
        logger.warning("external \(name): \(peer): \(error); closing its connection")
        send(ExternalWire.error(error.description))
    }

    /// Sends one message whole. `unlessFull`: not at all when the socket has no room for any of it
    /// (false; a POSITION, which the next one replaces). A program that reads nothing for
    /// `ExternalSourceServer.sendTimeoutSeconds` while a send waits is taken to be gone: it used to
    /// hold this thread in `send` for as long as it did not read, taking none of its frames, and
    /// deaf to a stop. Stream thread.
    @discardableResult
    func send(_ bytes: [UInt8], unlessFull: Bool = false) -> Bool {
        guard !bytes.isEmpty else { return true }
        var offset = 0
        while offset < bytes.count {
            // Once part of a message is out, the rest must follow (the stream is framed).
            let flags = Int32(unlessFull && offset == 0 ? MSG_NOSIGNAL | MSG_DONTWAIT : MSG_NOSIGNAL)
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, flags) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                if unlessFull && offset == 0 { return false }
                logger.warning(
                    "external \(name): \(peer) read nothing for \(ExternalSourceServer.sendTimeoutSeconds) s; closing its connection"
                )
            }
            if n <= 0 {
                closedFlag.store(true, ordering: .releasing)
                return false
            }
            offset += n
        }
        return true
    }

    var fifoCapacity: Int { fifo.count }

    /// The most the FIFO ever holds: the frames kept for the resume (at most a buffer) beside a
    /// buffer of the program's (`ExternalFormat.maxBufferBytes` at most).
    static let maxFIFOBytes = 2 * ExternalFormat.maxBufferBytes

    /// Makes the FIFO hold at least `capacity` bytes (a multiple of `frameBytes`; at most
    /// `maxFIFOBytes`), what it holds at its head. Stream thread; allocates (at a DROP that keeps
    /// frames).
    func growFIFO(to capacity: Int, frameBytes: Int) {
        let capacity = min(capacity, Self.maxFIFOBytes / frameBytes * frameBytes)
        guard capacity > fifoCapacity else { return }
        var grown = [UInt8](repeating: 0, count: capacity)
        let first = min(fifoCount, fifoCapacity - fifoStart)
        grown[0..<first] = fifo[fifoStart..<(fifoStart + first)]
        grown[first..<fifoCount] = fifo[0..<(fifoCount - first)]
        fifo = grown
        fifoStart = 0
        fifoBytes.store(fifo.count, ordering: .releasing)
    }
    var fifoRoom: Int { fifoCapacity - fifoCount }

    /// Waits (`timeout` ms at most, -1: no limit) for the socket, when there is room for what it
    /// brings, or a poke; true when the socket is readable. A poke is taken.
    func wait(socket: Bool, timeout: Int32) -> Bool {
        pokes.wait(for: socket ? fd : -1, timeout: timeout, fallback: 20)
    }

    /// Waits as `wait` does, then reads what the socket has — at most `readsPerLook` reads: a program
    /// that sent control messages without end (8-byte DRAINs, each a read) kept the thread here for
    /// as long as it did, deaf to a stop, a refusal and a detach. What is left is read at the next
    /// turn of the loop, at once.
    func readSocket(timeout: Int32) -> Result<Void, ExternalStreamError> {
        guard wait(socket: !(parser.dataLeft > 0 && fifoRoom == 0), timeout: timeout) else { return .success(()) }
        var scratch = [UInt8](repeating: 0, count: 4096)
        for _ in 0..<Self.readsPerLook where !isClosed {
            if parser.dataLeft > 0 {
                guard fifoRoom > 0 else { return .success(()) }
                // Straight into the FIFO (its free part up to the end, then the wrap).
                let end = (fifoStart + fifoCount) % fifoCapacity
                let span = min(parser.dataLeft, fifoRoom, fifoCapacity - end)
                let n = fifo.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + end, span, Int32(MSG_DONTWAIT)) }
                if n == 0 { return peerClosed() }
                if n < 0 { return errno == EAGAIN || errno == EINTR ? .success(()) : peerClosed() }
                fifoCount += n
                parser.dataLeft -= n
                guard let format else { return .failure(.protocolViolation("DATA before FORMAT")) }
                received = consumed + UInt64(fifoCount / format.frameBytes - keptFrames)
                let now = monotonicNanoseconds()
                lastDataAt.store(now, ordering: .releasing)
                lastReceivedAt.store(now, ordering: .releasing)
                continue
            }
            let want: Int
            if let control = parser.control {
                want = control.need - control.payload.count
            } else {
                want = 8 - parser.header.count
            }
            let n = scratch.withUnsafeMutableBytes {
                recv(fd, $0.baseAddress!, min(want, $0.count), Int32(MSG_DONTWAIT))
            }
            if n == 0 { return peerClosed() }
            if n < 0 { return errno == EAGAIN || errno == EINTR ? .success(()) : peerClosed() }
            if parser.control != nil {
                parser.control!.payload += scratch[0..<n]
                if parser.control!.payload.count == parser.control!.need {
                    let control = parser.control!
                    parser.control = nil
                    if case .failure(let e) = handle(control.type, control.payload[...]) { return .failure(e) }
                }
                continue
            }
            parser.header += scratch[0..<n]
            guard parser.header.count == 8 else { continue }
            let code = ExternalWire.u32(parser.header[...], at: 0)
            let length = Int(ExternalWire.u32(parser.header[...], at: 4))
            parser.header = []
            guard let type = ExternalWire.Message(rawValue: code) else {
                return .failure(.protocolViolation("unknown message type \(code)"))
            }
            if type == .data {
                guard let format else { return .failure(.protocolViolation("DATA before FORMAT")) }
                guard length % format.frameBytes == 0 else {
                    return .failure(.protocolViolation("DATA of \(length) bytes is not whole \(format) frames"))
                }
                parser.dataLeft = length
                continue
            }
            guard length <= ExternalWire.maxControlPayload else {
                return .failure(.protocolViolation("a \(type) message of \(length) bytes"))
            }
            if length == 0 {
                if case .failure(let e) = handle(type, []) { return .failure(e) }
            } else {
                parser.control = (type, length, [])
            }
        }
        return .success(())
    }

    func peerClosed() -> Result<Void, ExternalStreamError> {
        closedFlag.store(true, ordering: .releasing)
        return .success(())
    }

    /// A connection closed (by the program, or by a send that failed) inside a frame: nothing takes
    /// less than a frame from the FIFO, so the stream would never be done, its source holding its
    /// zones for ever. The part is dropped, and said. Stream thread.
    func dropPartialFrame() {
        guard let format, fifoCount % format.frameBytes != 0 else { return }
        logger.warning(
            "external \(name): \(peer) closed its connection inside a frame; its last "
                + "\(fifoCount % format.frameBytes) bytes are dropped")
        fifoCount -= fifoCount % format.frameBytes
    }

    func handle(_ type: ExternalWire.Message, _ payload: ArraySlice<UInt8>) -> Result<Void, ExternalStreamError> {
        switch type {
        case .format:
            switch ExternalFormat.parse(payload) {
            case .failure(let e): return .failure(e)
            case .success(let f):
                // Frames kept for the resume (a DROP while Baton paused the player: the music just
                // after the cut) were counted as consumed at their DROP, so they are Baton's, not the
                // program's: a player that sets itself up again (hw_params, a new rate) before it is
                // heard again lost them, and resumed up to a buffer after the cut. They go on, in the
                // new format, at the head of the new FIFO (beside room for a whole buffer of it, which
                // the plugin, forgetting the rest, now sees free); what else the old format left is
                // forgotten (the plugin does the same).
                let carried = format.map { carryKept(from: $0, to: f) } ?? []
                consumed = received
                fifo = [UInt8](repeating: 0, count: f.bufferFrames * f.frameBytes + carried.count)
                fifo.replaceSubrange(0..<carried.count, with: carried)
                fifoStart = 0
                fifoCount = carried.count
                fifoBytes.store(fifo.count, ordering: .releasing)
                keptFrames = carried.count / f.frameBytes
                format = f
                shared.withLock { _ in formatText = f.description }
                formatBits.store(1, ordering: .releasing)
                pumpGeneration = -1  // rebuild the converters for the new format
                send(ExternalWire.message(.ok))
            }
        case .drain:
            drainAt = received
            flushedForDrain = false
        case .drop:
            if let format {
                let frames = fifoCount / format.frameBytes
                consumed += UInt64(frames - keptFrames)
                if shared.withLock({ $0.keepsDropped }) {
                    // Baton paused the player (`pause`): what it drops is the music just after the
                    // cut, which the resume must start from. MPD then closes its device, and this
                    // stream stays until they are played (the player's next one waits behind it).
                    // Said when it keeps more than it had: a DROP again (nothing new sent) is not
                    // a line each (a program could flood the journal past its rate limit).
                    let before = keptFrames
                    // At most the largest buffer a program may have (4 MiB): a program that wrote a
                    // buffer and dropped it again and again while held had all of it kept, the FIFO
                    // grown by a buffer (up to 4 MiB) each time, without end. The head is kept, the
                    // music just after the cut; the rest is dropped. Not its own buffer: a player
                    // played on through its own controls during the interruption and paused again
                    // holds more than one, all of it the music after the cut.
                    keptFrames = min(frames, ExternalFormat.maxBufferBytes / format.frameBytes)
                    if frames > keptFrames {
                        fifoCount = keptFrames * format.frameBytes
                        if !keptBeyondBufferSaid {
                            keptBeyondBufferSaid = true
                            logger.warning(
                                "external \(name): \(peer) dropped \(frames) frames while paused by Baton, more than "
                                    + "the \(ExternalFormat.maxBufferBytes >> 20) MiB kept at most; the first \(keptFrames) "
                                    + "are kept for the resume, the rest dropped")
                        }
                    }
                    // Beside them, room for a whole buffer: the plugin counts them as consumed, and
                    // after the player's prepare it sees its whole buffer free. A player that wrote
                    // while still held filled what room was left, then the socket, and waited in a
                    // send until the plugin's timeout (2 s) took batond for gone — when the kept
                    // frames were more than the socket holds (hi-res, large buffers).
                    growFIFO(to: (keptFrames + format.bufferFrames) * format.frameBytes, frameBytes: format.frameBytes)
                    if keptFrames > before {
                        logger.info(
                            "external \(name): \(peer) dropped \(frames) frames while paused by Baton; "
                                + "\(keptFrames) kept for the resume"
                        )
                    }
                } else {
                    // What an earlier DROP kept (at the FIFO's head) was counted as consumed then:
                    // it is the music just after a cut, no longer the program's to drop. A DROP
                    // after the resume let go of it (the player's xrun or prepare as it plays
                    // again) threw away what the rings had not taken yet: the music jumped ahead.
                    fifoCount = keptFrames * format.frameBytes
                    if keptFrames == 0 { fifoStart = 0 }
                }
                consumedFrames.store(Int(consumed), ordering: .releasing)
            }
            drainAt = nil
            answer(force: true)
        case .open, .ok, .error, .drained, .position, .data:
            return .failure(.protocolViolation("unexpected \(type) message"))
        }
        return .success(())
    }

}
