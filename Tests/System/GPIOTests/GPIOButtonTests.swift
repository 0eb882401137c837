import GPIO
import Synchronization
import Testing

@Suite struct GPIOButtonTests {
    /// A recorded trace through a button gives the debounced presses to the handler. (The release
    /// at 120 ms ends high: the line cannot fall at 300 ms from low.)
    @Test func reportsDebouncedPressesFromASource() {
        let trace: [EdgeEvent] = [
            .falling(ms: 0), .rising(ms: 0.5), .falling(ms: 1), .rising(ms: 120), .falling(ms: 120.5),
            .rising(ms: 121), .falling(ms: 300), .rising(ms: 300.2),
        ]
        let presses = Mutex<[EdgeEvent]>([])
        let configuration = GPIOButtonConfiguration(line: 17)
        let button = GPIOButton(source: RecordedEdgeSource(trace), debouncer: EdgeDebouncer(configuration)) { event in
            presses.withLock { $0.append(event) }
        }
        button.start()
        button.stop()
        #expect(presses.withLock { $0 } == [.falling(ms: 0), .falling(ms: 300)])
    }

    /// The line's level at start is the settled one before the first edge: a press whose first
    /// edge the kernel called rising (the level read during its bounce) is a press, reported as
    /// the falling edge it was.
    @Test func takesTheSourcesLevelAtStart() {
        final class HighLine: EdgeSource {
            let trace: [EdgeEvent] = [.rising(ms: 500), .falling(ms: 500.3), .rising(ms: 501), .falling(ms: 502)]
            var initialLevel: Bool? { true }
            func start(_ handler: @escaping @Sendable (EdgeEvent) -> Void) { for e in trace { handler(e) } }
            func stop() {}
        }
        let presses = Mutex<[EdgeEvent]>([])
        let button = GPIOButton(
            source: HighLine(), debouncer: EdgeDebouncer(GPIOButtonConfiguration(line: 17))
        ) { event in presses.withLock { $0.append(event) } }
        button.start()
        button.stop()
        #expect(presses.withLock { $0 } == [.falling(ms: 500)])
    }
}

@Suite struct GPIOLineReaderTests {
    /// This machine has no GPIO chip: opening one fails with the chip's name and errno's text.
    @Test(arguments: [
        ("gpiochip0", "gpiochip0: No such file or directory"),
        ("/dev/gpiochip0", "/dev/gpiochip0: No such file or directory"),
        ("gpiochip4", "gpiochip4: No such file or directory"),
    ])
    func reportsAMissingChip(chip: String, message: String) {
        let error = #expect(throws: GPIOError.self) { try GPIOLineReader(chip: chip, line: 17, bias: .pullUp) }
        #expect(error?.description == message)
        #expect(error == .system(subject: chip, action: "", code: 2))
    }

    /// A device that is not a GPIO chip is refused by libgpiod's own check, with the path.
    @Test func refusesADeviceThatIsNotAGPIOChip() {
        let error = #expect(throws: GPIOError.self) { try GPIOLineReader(chip: "/dev/null", line: 0, bias: .asIs) }
        #expect(error?.description == "/dev/null: Inappropriate ioctl for device")
    }
}

@Suite struct GPIOButtonConfigurationTests {
    /// Config text becomes a configuration.
    @Test func parsesConfigText() throws {
        let configuration = try GPIOButtonConfiguration(
            chip: "gpiochip0", line: 17, edge: "falling", bias: "pull-up",
            debounceMilliseconds: 50, at: "gpio.doorbell")
        #expect(
            configuration
                == GPIOButtonConfiguration(
                    chip: "gpiochip0", line: 17, edge: .falling, bias: .pullUp,
                    debounce: .milliseconds(50)))
        for bias in GPIOBias.allCases {
            #expect(
                try GPIOButtonConfiguration(
                    chip: "0", line: 4, edge: "both", bias: bias.rawValue,
                    debounceMilliseconds: 0, at: "b"
                ).bias == bias)
        }
    }

    /// Each bad value is refused with its key and the accepted values.
    @Test(arguments: [
        (
            "gpiochip0", 17, "down", "pull-up", 50,
            "gpio.doorbell.edge: \"down\" is not an edge: use rising, falling or both"
        ),
        (
            "gpiochip0", 17, "falling", "pullup", 50,
            "gpio.doorbell.bias: \"pullup\" is not a bias: use pull-up, pull-down, disabled or as-is"
        ),
        ("", 17, "falling", "pull-up", 50, "gpio.doorbell.chip: is empty (e.g. gpiochip0)"),
        ("gpio chip0", 17, "falling", "pull-up", 50, "gpio.doorbell.chip: \"gpio chip0\" contains spaces"),
        (
            "dev/gpiochip0", 17, "falling", "pull-up", 50,
            "gpio.doorbell.chip: \"dev/gpiochip0\" is a relative path: use /dev/gpiochipN"
        ),
        ("gpiochip0", -1, "falling", "pull-up", 50, "gpio.doorbell.line: -1 is not a line number (0 or more)"),
        (
            "gpiochip0", 17, "falling", "pull-up", -5,
            "gpio.doorbell.debounce: -0.005 seconds is not between 0 ms and 5.0 seconds"
        ),
        (
            "gpiochip0", 17, "falling", "pull-up", 6000,
            "gpio.doorbell.debounce: 6.0 seconds is not between 0 ms and 5.0 seconds"
        ),
    ])
    func refusesBadValues(chip: String, line: Int, edge: String, bias: String, debounce: Int, message: String) {
        let error = #expect(throws: GPIOError.self) {
            try GPIOButtonConfiguration(
                chip: chip, line: line, edge: edge, bias: bias, debounceMilliseconds: debounce,
                at: "gpio.doorbell")
        }
        #expect(error?.description == message)
    }
}
