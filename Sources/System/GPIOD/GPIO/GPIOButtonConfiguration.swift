/// Which edges count as a press.
public enum EdgeSelection: String, Sendable, Equatable, CaseIterable {
    /// Low to high: a button to 3.3 V with a pull-down.
    case rising
    /// High to low: a button to GND with a pull-up (the usual wiring).
    case falling
    /// Both: every debounced change (press and release each trigger).
    case both

    /// Whether `edge` is one of the selected edges.
    public func matches(_ edge: Edge) -> Bool {
        switch self {
        case .rising: return edge == .rising
        case .falling: return edge == .falling
        case .both: return true
        }
    }
}

/// The line's internal bias resistor.
public enum GPIOBias: String, Sendable, Equatable, CaseIterable {
    /// Pull up to 3.3 V: the line reads high until the button shorts it to GND.
    case pullUp = "pull-up"
    /// Pull down to GND: the line reads low until the button connects it to 3.3 V.
    case pullDown = "pull-down"
    /// No bias: the circuit has its own resistor.
    case disabled
    /// Leave the bias as it is (set by the device tree or an earlier user).
    case asIs = "as-is"
}

/// A push button on one GPIO line: where it is, which edge is a press, bias, and debounce time.
///
/// A plain value: build it on any thread.
public struct GPIOButtonConfiguration: Sendable, Equatable {
    /// The chip: a name (`gpiochip0`), a path (`/dev/gpiochip0`), a number (`0`) or a label
    /// (`pinctrl-bcm2711`).
    public var chip: String
    /// The line offset on that chip (the BCM GPIO number on a Raspberry Pi's main chip).
    public var line: Int
    public var edge: EdgeSelection
    public var bias: GPIOBias
    /// Edges this soon after the previous edge are contact bounce and ignored.
    public var debounce: Duration

    /// The longest debounce accepted.
    public static let maximumDebounce = Duration.seconds(5)

    public init(
        chip: String = "gpiochip0", line: Int, edge: EdgeSelection = .falling, bias: GPIOBias = .pullUp,
        debounce: Duration = .milliseconds(50)
    ) {
        self.chip = chip
        self.line = line
        self.edge = edge
        self.bias = bias
        self.debounce = debounce
    }

    /// Builds a configuration from the text of a config file, checking every value; errors name the
    /// key under `path` (e.g. `gpio.doorbell.edge: "up" is not an edge: use rising, falling or both`).
    public init(
        chip: String, line: Int, edge: String, bias: String, debounceMilliseconds: Int,
        at path: String
    ) throws(GPIOError) {
        guard let parsedEdge = EdgeSelection(rawValue: edge) else {
            throw .invalidConfiguration(
                field: "\(path).edge", reason: "\"\(edge)\" is not an edge: use rising, falling or both")
        }
        guard let parsedBias = GPIOBias(rawValue: bias) else {
            throw .invalidConfiguration(
                field: "\(path).bias",
                reason: "\"\(bias)\" is not a bias: use pull-up, pull-down, disabled or as-is")
        }
        self.init(
            chip: chip, line: line, edge: parsedEdge, bias: parsedBias, debounce: .milliseconds(debounceMilliseconds))
        try validate(at: path)
    }

    /// Checks every field; the error names the first one at fault under `path`.
    public func validate(at path: String) throws(GPIOError) {
        if chip.isEmpty {
            throw .invalidConfiguration(field: "\(path).chip", reason: "is empty (e.g. gpiochip0)")
        }
        if chip.contains(where: { $0.isWhitespace || $0 == "\0" }) {
            throw .invalidConfiguration(field: "\(path).chip", reason: "\"\(chip)\" contains spaces")
        }
        if chip.contains("/") && !chip.hasPrefix("/") {
            throw .invalidConfiguration(
                field: "\(path).chip", reason: "\"\(chip)\" is a relative path: use /dev/gpiochipN")
        }
        if !(0...65535).contains(line) {
            throw .invalidConfiguration(field: "\(path).line", reason: "\(line) is not a line number (0 or more)")
        }
        if debounce < .zero || debounce > Self.maximumDebounce {
            throw .invalidConfiguration(
                field: "\(path).debounce",
                reason: "\(debounce) is not between 0 ms and \(Self.maximumDebounce)")
        }
    }
}
