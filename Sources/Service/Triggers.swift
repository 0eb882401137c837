import BatonConfig
import BatonDaemon
import ControlParts
import GPIO
import MQTT
import OSThread
import Synchronization

/// The triggers that are not HTTP: the MQTT bridge (see `MQTTBridge`) and the GPIO buttons. Each
/// press of a button, after debouncing, announces its `announce:` (a sound or a text) through the
/// control plane like any request. A chip or broker that cannot be used is reported (log, event,
/// status) and the daemon runs on without it. Owned by the service: `start` after the daemon's,
/// `stop` before it. Any thread for the status.
public final class Triggers: Sendable {
    /// Where a button's edges come from: the real GPIO line, or what a test installs.
    public typealias EdgeSourceFactory = @Sendable (GPIOButtonConfig) throws(GPIOError) -> any EdgeSource

    private let daemon: Daemon
    private let logger: Logger
    private let edgeSources: EdgeSourceFactory?
    /// The MQTT bridge, or why it could not start, and the broker it was started for (a reload does
    /// not change it: `needsRestart`).
    private let mqtt = Mutex<(bridge: MQTTBridge?, error: String?, broker: String?)>((nil, nil, nil))
    /// The buttons as configured, each running or with the reason it is not, and their presses.
    private let buttons = Mutex<[Button]>([])
    /// Renders the buttons' texts once at start and after each reload (`checkSpeech`), off the
    /// control thread; a reload during a check has the next one follow it.
    private let speechCheck = NewestJob(threadName: "speech-check")
    /// The event-log subscription that starts a check at each reload, while the buttons run.
    private let reloads = Mutex<Int?>(nil)

    /// One configured button: its reader (nil when it could not be set up), why it is off (`error`),
    /// why its last press rang nothing when its sound could not be played (`pressError`: a file
    /// that does not decode), why its text could not be rendered when it was last tried
    /// (`speechError`: a voice espeak-ng does not have), and its presses. A missing sound or speech
    /// program is looked for at each status (`ringsNothing`): a reload may change the sounds
    /// directory, a sound may be added, espeak-ng installed.
    private struct Button {
        let config: GPIOButtonConfig
        let button: GPIOButton?
        var error: String?
        var pressError: String? = nil
        var speechError: String? = nil
        var presses = 0
    }

    /// `edgeSources` replaces the GPIO line reader (tests, on a machine without a GPIO chip).
    public init(daemon: Daemon, logger: Logger, edgeSources: EdgeSourceFactory? = nil) {
        self.daemon = daemon
        self.logger = logger
        self.edgeSources = edgeSources
    }

    /// Starts the MQTT bridge and the GPIO buttons of the daemon's configuration. Control thread.
    public func start() {
        let config = daemon.config
        if let m = config.mqtt {
            do {
                let bridge = try MQTTBridge(daemon: daemon, config: m, device: config.device, logger: logger)
                bridge.start()
                mqtt.withLock { $0 = (bridge, nil, m.broker) }
            } catch {
                logger.error("\(error.message); MQTT is off")
                mqtt.withLock { $0 = (nil, error.message, m.broker) }
                daemon.events.publish(type: .mqttError, reason: error.message)
            }
        }
        var started: [Button] = []
        let sounds = daemon.sounds.names()
        let speech = config.speech.command
        for (index, button) in config.gpio.enumerated() {
            let name = "gpio[\(index)] (\(button.chip) line \(button.line))"
            // A reader that fails while it runs (the chip unplugged, a read error) ends its thread:
            // said, and the button shown unavailable. It was silent, the status "listening".
            let failed: @Sendable (GPIOError) -> Void = { [weak self] error in
                guard let self else { return }
                self.buttons.withLock { if index < $0.count { $0[index].error = "\(error)" } }
                self.logger.error("\(name): \(error); this button is off until batond restarts")
                self.daemon.events.publish(type: .gpioError, reason: "\(name): \(error)")
            }
            let made: Result<any EdgeSource, GPIOError>
            if let edgeSources {
                made = Result { () throws(GPIOError) -> any EdgeSource in try edgeSources(button) }
            } else {
                made = Result { () throws(GPIOError) -> any EdgeSource in
                    try GPIOLineReader(
                        chip: button.chip, line: button.line, bias: GPIOBias(button.bias), onError: failed)
                }
            }
            switch made {
            case .success(let source):
                let debouncer = EdgeDebouncer(edges: EdgeSelection(button.edge), debounce: button.debounce)
                // One press at a time per button, the newest waiting in place of an older: each
                // press was a thread of its own, and a chattering line (a long doorbell wire, no
                // bias) with speech that takes seconds to render piled them up without bound.
                let presses = NewestJob(threadName: "press")
                let gpio = GPIOButton(source: source, debouncer: debouncer) { [weak self] _ in
                    // The reader's thread: the announcement (possibly speech) is made on its own thread.
                    guard let self else { return }
                    self.buttons.withLock { $0[index].presses += 1 }
                    presses.run { self.press(button.announce, index: index, from: name) }
                }
                // A sound not in the sounds directory, or a speech program that cannot run, is
                // said now, not at the first press (a visitor's ring, silent). The button listens
                // on: the sound may be added, the program installed.
                if let missing = Self.ringsNothing(button.announce, sounds: sounds, speech: speech) {
                    logger.error("\(name): \(missing)")
                    daemon.events.publish(type: .gpioError, reason: "\(name): \(missing)")
                }
                started.append(Button(config: button, button: gpio, error: nil))
                logger.info("\(name): listening for \(button.edge.rawValue) edges (debounce \(button.debounce))")
            case .failure(let error):
                started.append(Button(config: button, button: nil, error: error.description))
                logger.error("\(name): \(error); this button is off")
                daemon.events.publish(type: .gpioError, reason: "\(name): \(error)")
            }
        }
        buttons.withLock { $0 = started }
        for case let gpio? in started.map(\.button) { gpio.start() }
        // A text the speech settings cannot say (a voice espeak-ng does not have: `englsh`) was
        // found at the first press, a visitor's ring lost, the status "listening" until then.
        // Tried now and after each reload (which may change `speech:`), off this thread; the
        // rendering kept, the first ring is not late by it either.
        if started.contains(where: { $0.button != nil && $0.config.announce.text != nil }) {
            let watch = ReloadWatch { [weak self] in self?.checkSpeechSoon() }
            reloads.withLock { $0 = daemon.events.subscribe(watch, after: nil) }
            checkSpeechSoon()
        }
    }

    /// Starts a check of the buttons' texts (`checkSpeech`) on its own thread. Any thread.
    private func checkSpeechSoon() { speechCheck.run { [weak self] in self?.checkSpeech() } }

    /// Renders each running button's text with the speech settings of now. One espeak-ng refuses
    /// is said as a missing sound is (the log, a `gpio-error` event, the button's status) until a
    /// check or a press renders it; one that could not be tried (a time-out, no temporary file)
    /// is a warning and the button's status, no event, until then; a speech program that cannot
    /// run is said by `ringsNothing` already.
    /// The check thread.
    private func checkSpeech() {
        let speech = daemon.config.speech.command
        guard Speech.whyCannotRun(speech) == nil else { return }
        let texts = buttons.withLock { buttons in
            buttons.indices.compactMap { i -> (index: Int, text: String, name: String)? in
                let b = buttons[i]
                guard b.button != nil, let text = b.config.announce.text else { return nil }
                return (i, text, "gpio[\(i)] (\(b.config.chip) line \(b.config.line))")
            }
        }
        for (index, text, name) in texts {
            var why: String?
            var refused = false
            do throws(ControlError) { try daemon.announcer.prepare(text: text) } catch {
                // batond stopping, not the text's fault.
                if error.message.hasPrefix("speech: stopped:") { return }
                // Only espeak-ng's own refusal (a voice it does not have, a text it will not say)
                // or the text's own checks fail every time. Anything else (espeak-ng past its
                // timeout on a Pi busy at boot, no temporary file, no audio written) may pass at
                // the next try: it was said as "a press rings nothing", a gpio-error, and not
                // looked at again until a reload or a good press.
                refused = error.kind == .badRequest || error.message.hasPrefix("speech: espeak-ng failed")
                why =
                    refused
                    ? "its text cannot be spoken: \(error.message): a press rings nothing"
                    : "its text could not be tried (\(error.message)); tried again at the next press"
            }
            let changed = buttons.withLock { b -> Bool in
                guard index < b.count else { return false }
                // Rendered now: a press's failure to render is over too.
                if why == nil, b[index].pressError?.hasPrefix("pressed, but speech: ") == true {
                    b[index].pressError = nil
                }
                guard b[index].speechError != why else { return false }
                b[index].speechError = why
                return true
            }
            guard changed, let why else { continue }
            guard refused else {
                logger.warning("\(name): \(why)")
                continue
            }
            logger.error("\(name): \(why)")
            daemon.events.publish(type: .gpioError, reason: "\(name): \(why)")
        }
    }

    /// Stops the buttons and the MQTT bridge (which publishes `offline`). Control thread.
    public func stop() {
        if let id = reloads.withLock({ $0.take() }) { daemon.events.unsubscribe(id) }
        for case let gpio? in buttons.withLock({ $0.map(\.button) }) { gpio.stop() }
        mqtt.withLock { $0.bridge }?.stop()
    }

    /// A debounced press: its announcement through the control plane. One that fails is said (a
    /// `gpio-error` event, the button's status) until a press rings again. Any thread.
    private func press(_ action: AnnounceAction, index: Int, from name: String) {
        do throws(ControlError) {
            let volume = Float(action.volume)
            let r =
                if let text = action.text {
                    try daemon.announcer.announce(text: text, zones: action.zones, volume: volume)
                } else {
                    try daemon.announcer.announce(
                        sound: Self.sound(of: action), zones: action.zones, volume: volume)
                }
            logger.info("\(name): pressed → \(r.id) \(r.outcome)")
            buttons.withLock {
                if index < $0.count {
                    $0[index].pressError = nil
                    $0[index].speechError = nil
                }
            }
        } catch {
            let why = "pressed, but \(error.message)"
            logger.error("\(name): \(why)")
            // A text that failed past its rendering (the text's checks are `badRequest`, espeak-ng's
            // failures "speech: …"; a zone a reload renamed, the policy's refusal are neither) was
            // rendered: what a check said of its rendering is over. The status, which says that
            // first, read "its text could not be tried …; tried again at the next press" after a
            // press that had just tried it.
            if action.text != nil && error.kind != .badRequest && !error.message.hasPrefix("speech: ") {
                buttons.withLock { if index < $0.count { $0[index].speechError = nil } }
            }
            // The button's own fault (its sound missing or not playable, its zones no longer
            // configured — renamed by a reload, which the running button does not take up) is an
            // event and, the file's, its status; the policy's refusal (a call holds the zones) or
            // zones away are said where they belong. Zones renamed were said nowhere: the status
            // read "listening", the presses counted, the doorbell rang nothing.
            // So is a text the speech program cannot say, or a speech program that cannot run
            // (`unavailable`: espeak-ng not installed, `speech.command` wrong).
            let spoken = action.text != nil && error.message.hasPrefix("speech: ")
            guard spoken || [.unknownSound, .unknownZone, .unprocessable, .badRequest].contains(error.kind) else {
                return
            }
            // A missing sound or speech program is looked for at each status (`ringsNothing`): kept
            // here, it outlived the sound added or the program installed until the next press.
            // batond stopping is no fault of the button's. (A speech failure that may pass at the
            // next try — espeak-ng past its deadline, no audio written — is `unavailable` too, and
            // kept: the status says it until a press or a check renders.)
            let notKept =
                error.kind == .unknownSound || error.message.hasPrefix("speech: cannot run")
                || error.message.hasPrefix("speech: stopped:")
            if !notKept { buttons.withLock { if index < $0.count { $0[index].pressError = why } } }
            daemon.events.publish(type: .gpioError, reason: "\(name): \(why)")
        }
    }

    /// The sound a press of a button without a text plays.
    private static func sound(of action: AnnounceAction) -> String { action.sound ?? "doorbell" }

    /// Why a press of `action` rings nothing, known before it is pressed: its sound is missing
    /// (`missingSound`), or its text's `speech` program cannot run; nil when neither.
    private static func ringsNothing(_ action: AnnounceAction, sounds: [String], speech: String) -> String? {
        guard action.text != nil else { return missingSound(action, among: sounds) }
        return Speech.whyCannotRun(speech).map { "its text cannot be spoken: speech: \($0): a press rings nothing" }
    }

    /// Why `action`'s sound cannot ring: not among `sounds` (the first ten named), or nil.
    private static func missingSound(_ action: AnnounceAction, among sounds: [String]) -> String? {
        let sound = Self.sound(of: action)
        guard action.text == nil && !sounds.contains(sound) else { return nil }
        let listed =
            sounds.isEmpty ? "none" : sounds.prefix(10).joined(separator: ", ") + (sounds.count > 10 ? ", …" : "")
        return "its sound \"\(sound)\" is not in the sounds directory (it has \(listed)): a press rings nothing"
    }

    /// The MQTT bridge that runs, if one does. Any thread.
    var mqttBridge: MQTTBridge? { mqtt.withLock { $0.bridge } }

    /// The MQTT connection for the status report: the bridge that runs, as it was started (a
    /// reload that changes `mqtt:` takes effect at the next start). Any thread.
    public var mqttStatus: StatusReport.MQTT? {
        let (bridge, error, broker) = mqtt.withLock { $0 }
        guard let broker else { return nil }
        let status = bridge?.status
        return StatusReport.MQTT(
            broker: broker, topic: bridge?.base, connection: status?.connection.rawValue ?? "off",
            error: error ?? status?.lastError)
    }

    /// The GPIO buttons for the status report. Any thread.
    public var gpioStatus: [StatusReport.Button] {
        let buttons = self.buttons.withLock { $0 }
        let sounds = buttons.isEmpty ? [] : daemon.sounds.names()
        let speech = daemon.config.speech.command
        return buttons.map { b in
            StatusReport.Button(
                chip: b.config.chip, line: b.config.line,
                state: b.button == nil || b.error != nil ? "unavailable" : "listening",
                error: b.error ?? Self.ringsNothing(b.config.announce, sounds: sounds, speech: speech) ?? b.speechError
                    ?? b.pressError,
                presses: b.presses)
        }
    }
}

/// Calls `reloaded` at each `reloaded` event (on the publishing thread: it must not block).
private final class ReloadWatch: EventSubscriber {
    let reloaded: @Sendable () -> Void
    init(_ reloaded: @escaping @Sendable () -> Void) { self.reloaded = reloaded }
    func deliver(_ event: Event) -> Bool {
        if event.type == EventType.reloaded.rawValue { reloaded() }
        return true
    }
}

extension GPIOBias {
    init(_ bias: GPIOButtonConfig.Bias) {
        switch bias {
        case .pullUp: self = .pullUp
        case .pullDown: self = .pullDown
        case .disabled: self = .disabled
        case .asIs: self = .asIs
        }
    }
}

extension EdgeSelection {
    init(_ edge: GPIOButtonConfig.Edge) {
        switch edge {
        case .falling: self = .falling
        case .rising: self = .rising
        case .both: self = .both
        }
    }
}
