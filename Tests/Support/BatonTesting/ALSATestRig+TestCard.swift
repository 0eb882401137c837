import Glibc
import Synchronization

/// A virtual sound card: one `batontest` PCM (Tests/Support/BatonTestCard, docs/TESTING.md) that
/// consumes at its rate from CLOCK_MONOTONIC, blocks, underruns, takes injected faults, and records
/// what it consumed with a timing sidecar. Made by `ALSATestRig.makeCard`; each card has its own files.
public struct TestCard: Sendable {
    /// Sample formats the card can be defined with.
    public enum Format: String, Sendable, CaseIterable {
        case s16LE = "S16_LE"
        case s32LE = "S32_LE"
        case floatLE = "FLOAT_LE"

        public var bytesPerSample: Int { self == .s16LE ? 2 : 4 }
    }

    /// How far the hardware pointer moves at a time: whole periods (a DMA card that interrupts once a
    /// period) or single frames (a card with a precise position register).
    public enum Pointer: String, Sendable {
        case period, frame
    }

    /// What a rewind (`snd_pcm_rewind`) does: the card follows it (most cards), or the stream stops
    /// (XRUN), as a driver that copies ahead to its hardware and cannot take back (the Raspberry Pi's
    /// bcm2835 since Linux 6.4, prepared or running: `xrun`; the kernel fails the rewind itself, the
    /// card at its next call), or stops only once it runs (`xrunRunning`: a driver that refuses only
    /// while it plays).
    public enum Rewind: String, Sendable {
        case follow, xrun
        case xrunRunning = "xrun-running"
    }

    /// A fault to inject while the card runs (one line of its control file).
    public enum Command: Sendable, Equatable {
        /// Underrun now (if running): the next call fails with -EPIPE until prepare.
        case xrun
        /// System suspend: -ESTRPIPE until `snd_pcm_resume` (which continues) or prepare.
        case suspend
        /// Suspend on a card that cannot resume: after `snd_pcm_resume` the stream is in XRUN, so the
        /// next call fails with -EPIPE and the application must prepare.
        case suspendNoRecover
        /// The card disappears: every call fails with -ENODEV, and opening it too, until `replug`.
        case unplug
        /// The card is back: it can be opened again (an open handle stays dead, as with USB).
        case replug
        /// The device stops consuming for this many milliseconds, then goes on at its rate.
        case stall(milliseconds: Int)
        /// From now on the card consumes at rate × (1 + ppm·10⁻⁶).
        case drift(ppm: Double)
        /// The card stops consuming until `revive`, also when opened again (a DAC whose clock is gone).
        case dead
        /// A `dead` card consumes again, from where it stood.
        case revive

        /// The control-file line.
        public var line: String {
            switch self {
            case .xrun: "xrun"
            case .suspend: "suspend"
            case .suspendNoRecover: "suspend norecover"
            case .unplug: "unplug"
            case .replug: "replug"
            case .stall(let ms): "stall \(ms)"
            case .drift(let ppm): "drift \(Self.decimal(ppm))"
            case .dead: "dead"
            case .revive: "revive"
            }
        }

        /// `ppm` as the card parses it: a plain decimal with at most three places (never `1e-05`).
        static func decimal(_ ppm: Double) -> String {
            let thousandths = Int((ppm * 1000).rounded())
            let whole = abs(thousandths) / 1000
            let fraction = abs(thousandths) % 1000
            let digits = String(fraction + 1000).dropFirst()
            return (thousandths < 0 ? "-" : "") + "\(whole).\(digits)"
        }
    }

    /// One line of the timing sidecar: `<CLOCK_MONOTONIC ns> <frames consumed since open> <event> [detail]`.
    public struct Event: Sendable, Equatable {
        public var nanoseconds: Int64
        /// Frames this PCM handle had consumed when the event happened.
        public var frames: Int
        /// `open`, `setup`, `prepare`, `start`, `period`, `xrun`, `xrun-found`, `suspend`, `resume`, `resume-refused`,
        /// `stall`, `drift`, `unplug`, `replug`, `stop`, `drained`, `close`, …
        public var kind: String
        public var detail: String
    }

    /// The ALSA PCM name to open, e.g. `batoncard:RATE=48000,PERIOD=480,BUFFER=1920,...,ID=3`.
    public let name: String
    /// The control file (append-only command log).
    public let control: String
    /// The raw interleaved samples the card consumed, exactly as written.
    public let record: String
    /// The timing sidecar: one line per period consumed and per event.
    public let timing: String
    /// While this file exists, another program holds the card (``hold()``, ``letGo()``): a
    /// non-blocking open fails with -EBUSY, a blocking one waits, as the kernel's exclusive open does.
    public let busy: String
    public let rate: Int
    public let periodFrames: Int
    public let bufferFrames: Int
    public let format: Format
    public let channels: Int

    /// Bytes of one frame.
    public var frameBytes: Int { format.bytesPerSample * channels }

    /// Injects a fault: appends the command's line to the control file with one write(2). Any thread;
    /// the card acts on it at its next call (at the latest at its next poll wake-up, within a period).
    public func send(_ command: Command) {
        let fd = open(control, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        precondition(fd >= 0, "TestCard: cannot open \(control)")
        let line = Array((command.line + "\n").utf8)
        let n = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        precondition(n == line.count, "TestCard: cannot write \(control)")
    }

    /// Another program takes the card: from now on opens find it busy (a handle open now plays on).
    public func hold() {
        let fd = open(busy, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        precondition(fd >= 0, "TestCard: cannot create \(busy)")
        close(fd)
    }

    /// The other program lets the card go: an open waiting for it goes on, the next one opens.
    public func letGo() { unlink(busy) }

    /// Everything the card consumed so far, as bytes.
    public func recordedBytes() -> [UInt8] { Self.readFile(record) }

    /// The frames consumed so far.
    public var recordedFrames: Int { recordedBytes().count / frameBytes }

    /// The sidecar's lines so far.
    public func events() -> [Event] {
        let text = String(decoding: Self.readFile(timing), as: UTF8.self)
        return text.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: true)
            guard parts.count >= 3, let ns = Int64(parts[0]), let frames = Int(parts[1]) else { return nil }
            return Event(
                nanoseconds: ns, frames: frames, kind: String(parts[2]),
                detail: parts.count > 3 ? String(parts[3]) : "")
        }
    }

    /// The sidecar's events of one kind.
    public func events(_ kind: String) -> [Event] { events().filter { $0.kind == kind } }

    static func readFile(_ path: String) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            out += chunk[0..<n]
        }
        return out
    }
}

extension ALSATestRig {
    /// The ALSA PCM that takes a card's shape from its name (ALSA runtime arguments).
    public static let cardPCM = "batoncard"
    /// Set this to the plugin's path to override where the rig looks for it.
    public static let cardLibraryVariable = "BATON_TESTCARD_LIB"

    private static let cardCounter = Atomic<Int>(0)

    /// alsa-lib's `route` plugin over a two-channel card, left to left and right to right
    /// (``routed(_:)``).
    public static let routePCM = "batonroute"

    /// The ALSA name of a two-channel `card` behind alsa-lib's own `route` plugin (a plugin that maps
    /// its slave and copies the samples through, as a `plug` chain or a `ttable` does): it can take
    /// back what it was given, and passes the rewind on to the card.
    public static func routed(_ card: TestCard) -> String { "\(routePCM):CARD=\"\(card.name)\"" }

    /// The ALSA name of `card` behind alsa-lib's own `plug` (its built-in `plug:SLAVE=...`): opened in
    /// another format, it inserts a converter; it can take back and passes the rewind on to the card.
    public static func plugged(_ card: TestCard) -> String { "plug:SLAVE=\"\(card.name)\"" }

    /// alsa-lib's `rate` plugin over a card (``rateConverted(_:)``).
    public static let rateConverterPCM = "batonrate"

    /// The ALSA name of `card` behind alsa-lib's own `rate` plugin: opened at any rate, converted to
    /// the card's. Such a PCM cannot take back what it was given (`snd_pcm_rewindable` is 0), as on a
    /// `plug` chain that converts the rate.
    public static func rateConverted(_ card: TestCard) -> String {
        "\(rateConverterPCM):CARD=\"\(card.name)\",RATE=\(card.rate)"
    }

    /// The plugin, `libasound_module_pcm_batontest.so`: from ``cardLibraryVariable``, else next to the
    /// test binary (SwiftPM puts products there), else in this checkout's `.build/debug` or `.build/release`.
    /// Nil when it was not built.
    public static let cardLibrary: String? = {
        let file = "libasound_module_pcm_batontest.so"
        var candidates: [String] = []
        if let p = getenv(cardLibraryVariable) { candidates.append(String(cString: p)) }
        candidates.append(Subprocess.buildDirectory + "/" + file)
        // #filePath is <package>/Tests/Support/BatonTesting/ALSATestRig+TestCard.swift.
        var root = "\(#filePath)"
        for _ in 0..<4 { root = String(root[..<(root.lastIndex(of: "/") ?? root.startIndex)]) }
        candidates += ["debug", "release"].map { "\(root)/.build/\($0)/\(file)" }
        return candidates.first { access($0, R_OK) == 0 }
    }()

    /// The configuration lines for the virtual cards (part of the rig's one configuration file):
    /// `pcm_type.batontest` names the plugin; `pcm.batoncard` takes the shape and an ID from the name.
    public static func cardDefinition(directory dir: String) -> String {
        let library = cardLibrary ?? "/nonexistent/libasound_module_pcm_batontest.so"
        return """
            pcm_type.batontest { lib "\(library)" }
            pcm.\(cardPCM) {
                @args [ RATE PERIOD BUFFER FORMAT CHANNELS DRIFT POINTER REWIND ID ]
                @args.RATE { type integer default 48000 }
                @args.PERIOD { type integer default 480 }
                @args.BUFFER { type integer default 1920 }
                @args.FORMAT { type string default "S16_LE" }
                @args.CHANNELS { type integer default 2 }
                @args.DRIFT { type string default "0" }
                @args.POINTER { type string default "period" }
                @args.REWIND { type string default "follow" }
                @args.ID { type string default "0" }
                type batontest
                rate $RATE
                period $PERIOD
                buffer $BUFFER
                format $FORMAT
                channels $CHANNELS
                drift-ppm $DRIFT
                pointer $POINTER
                rewind $REWIND
                control { @func concat strings [ "\(dir)/card_" $ID ".ctl" ] }
                record { @func concat strings [ "\(dir)/card_" $ID ".raw" ] }
                busy { @func concat strings [ "\(dir)/card_" $ID ".busy" ] }
            }
            pcm.\(routePCM) {
                @args [ CARD ]
                @args.CARD { type string }
                type route
                slave.pcm $CARD
                ttable.0.0 1
                ttable.1.1 1
            }
            pcm.\(rateConverterPCM) {
                @args [ CARD RATE ]
                @args.CARD { type string }
                @args.RATE { type integer }
                type rate
                slave { pcm $CARD rate $RATE }
            }

            """
    }

    /// A fresh virtual card of this shape, with its own control, record and timing files.
    /// `rate`, `periodFrames` and `bufferFrames` are what the card grants (nothing else);
    /// `driftPPM` is its clock's error from the start (a `drift` command changes it later).
    public static func makeCard(
        rate: Int = 48000, periodFrames: Int = 480, bufferFrames: Int = 1920,
        format: TestCard.Format = .s16LE, channels: Int = 2, driftPPM: Double = 0,
        pointer: TestCard.Pointer = .period, rewind: TestCard.Rewind = .follow
    ) -> TestCard {
        let dir = directory
        let id = cardCounter.add(1, ordering: .relaxed).newValue
        let name =
            "\(cardPCM):RATE=\(rate),PERIOD=\(periodFrames),BUFFER=\(bufferFrames),FORMAT=\(format.rawValue),"
            + "CHANNELS=\(channels),DRIFT=\(TestCard.Command.decimal(driftPPM)),POINTER=\(pointer.rawValue),"
            + "REWIND=\(rewind.rawValue),ID=\(id)"
        let base = "\(dir)/card_\(id)"
        return TestCard(
            name: name, control: base + ".ctl", record: base + ".raw", timing: base + ".raw.timing",
            busy: base + ".busy",
            rate: rate, periodFrames: periodFrames, bufferFrames: bufferFrames, format: format,
            channels: channels)
    }

    /// A fresh virtual card of the default shape whose `drift-ppm` is `drift`, a value in ALSA's
    /// configuration syntax: `1000000` is an integer node, `1000000.5` a real, `"1000000"` a
    /// string, as a definition may give it (`makeCard`'s is always a string). The name gives the
    /// arguments in ALSA's `{ … }` form, which keeps each value's type.
    public static func makeCard(drift: String) -> TestCard {
        let dir = directory
        let id = cardCounter.add(1, ordering: .relaxed).newValue
        let base = "\(dir)/card_\(id)"
        return TestCard(
            name: "\(cardPCM):{ DRIFT \(drift) ID \"\(id)\" }", control: base + ".ctl", record: base + ".raw",
            timing: base + ".raw.timing", busy: base + ".busy",
            rate: 48000, periodFrames: 480, bufferFrames: 1920, format: .s16LE, channels: 2)
    }
}
