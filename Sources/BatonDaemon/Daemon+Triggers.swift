import AudioCore
import BatonConfig
import GPIO
import MQTT

/// The triggers that are not HTTP: MQTT (see `MQTTBridge`) and GPIO buttons. Each press of a
/// button, after debouncing, announces its `announce:` (a sound or a text) through the arbiter like
/// any request. A chip or broker that cannot be used is reported (log, event, status) and the daemon
/// runs on without it.
extension Daemon {
    /// Where a button's edges come from: the real GPIO line, or what a test installs before `start()`.
    typealias EdgeSourceFactory = @Sendable (GPIOButtonConfig) throws(GPIOError) -> any EdgeSource

    /// Replaces the GPIO line reader (tests, on a machine without a GPIO chip). Before `start()`.
    func useEdgeSources(_ factory: @escaping EdgeSourceFactory) { edgeSourceFactory.withLock { $0 = factory } }

    /// Starts the MQTT bridge and the GPIO buttons of the configuration. Control thread, at start.
    func startTriggers() {
        let config = self.config
        if let mqtt = config.mqtt {
            do {
                let bridge = try MQTTBridge(daemon: self, config: mqtt, device: config.device, logger: logger)
                bridge.start()
                mqttBridge.withLock { $0 = (bridge, nil) }
            } catch {
                logger.error("\(error.message); MQTT is off")
                mqttBridge.withLock { $0 = (nil, error.message) }
                events.publish(type: "mqtt-error", reason: error.message)
            }
        }
        let installed: EdgeSourceFactory? = edgeSourceFactory.withLock { $0 }
        let real: EdgeSourceFactory = { (button: GPIOButtonConfig) throws(GPIOError) -> any EdgeSource in
            try GPIOLineReader(chip: button.chip, line: button.line, bias: GPIOBias(rawValue: button.bias.rawValue) ?? .pullUp)
        }
        let factory = installed ?? real
        var started: [(GPIOButtonConfig, GPIOButton?, String?)] = []
        for (index, button) in config.gpio.enumerated() {
            let name = "gpio[\(index)] (\(button.chip) line \(button.line))"
            switch Result(catching: { () throws(GPIOError) -> any EdgeSource in try factory(button) }) {
            case .success(let source):
                let debouncer = EdgeDebouncer(edges: EdgeSelection(rawValue: button.edge.rawValue) ?? .falling, debounce: button.debounce)
                let action = button.announce
                let gpio = GPIOButton(source: source, debouncer: debouncer) { [weak self] _ in
                    // The reader's thread: the announcement (possibly speech) is made on its own thread.
                    guard let self else { return }
                    self.buttonPresses.withLock { $0[index, default: 0] += 1 }
                    _ = startThread { self.press(action, from: name) }
                }
                started.append((button, gpio, nil))
                logger.info("\(name): listening for \(button.edge.rawValue) edges (debounce \(button.debounce))")
            case .failure(let error):
                started.append((button, nil, error.description))
                logger.error("\(name): \(error); this button is off")
                events.publish(type: "gpio-error", reason: "\(name): \(error)")
            }
        }
        buttons.withLock { $0 = started.map { ($0.0, $0.1, $0.2) } }
        for case let (_, gpio?, _) in started { gpio.start() }
    }

    /// Stops the buttons and the MQTT bridge (which publishes `offline`). Control thread, at stop.
    func stopTriggers() {
        for case let (_, gpio?, _) in buttons.withLock({ $0 }) { gpio.stop() }
        mqttBridge.withLock { $0.bridge }?.stop()
    }

    /// A debounced press: its announcement through the arbiter. Any thread.
    func press(_ action: AnnounceAction, from name: String) {
        let result: Result<(id: String, outcome: Outcome, skipped: [String]), RequestError>
        if let text = action.text {
            result = Result { () throws(RequestError) in try announce(text: text, zones: action.zones, volume: Float(action.volume)) }
        } else {
            result = Result { () throws(RequestError) in
                try announce(sound: action.sound ?? "doorbell", zones: action.zones, volume: Float(action.volume))
            }
        }
        switch result {
        case .success(let r): logger.info("\(name): pressed → \(r.id) \(r.outcome)")
        case .failure(let error): logger.error("\(name): pressed, but \(error.message)")
        }
    }

    /// MQTT and GPIO for the status report. Any thread.
    func triggerStatus() -> (mqtt: StatusReport.MQTT?, gpio: [StatusReport.Button]) {
        let mqtt = config.mqtt.map { m in
            let (bridge, error) = mqttBridge.withLock { ($0.bridge, $0.error) }
            let status = bridge?.status
            return StatusReport.MQTT(broker: m.broker, topic: bridge?.base, connection: status?.connection.rawValue ?? "off",
                                     error: error ?? status?.lastError)
        }
        let presses = buttonPresses.withLock { $0 }
        let gpio = buttons.withLock { $0 }.enumerated().map { index, b in
            StatusReport.Button(chip: b.0.chip, line: b.0.line, state: b.1 == nil ? "unavailable" : "listening", error: b.2,
                                presses: presses[index] ?? 0)
        }
        return (mqtt, gpio)
    }
}
