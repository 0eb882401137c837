import Synchronization

/// A push button: an ``EdgeSource`` whose edges go through an ``EdgeDebouncer``; each press calls
/// `onPress` with the edge that made it.
///
/// `onPress` runs on the source's thread (``GPIOLineReader``: its reader thread); it must return
/// quickly (hand the press to the daemon's control thread). ``start()`` and ``stop()``: control thread.
public final class GPIOButton: Sendable {
    public let source: any EdgeSource
    private let debouncer: Mutex<EdgeDebouncer>
    private let onPress: @Sendable (EdgeEvent) -> Void

    public init(source: any EdgeSource, debouncer: EdgeDebouncer, onPress: @escaping @Sendable (EdgeEvent) -> Void) {
        self.source = source
        self.debouncer = Mutex(debouncer)
        self.onPress = onPress
    }

    /// Starts the source. Control thread.
    public func start() {
        if let high = source.initialLevel { debouncer.withLock { $0.settle(high: high) } }
        source.start { [self] event in
            if let press = debouncer.withLock({ $0.press(event) }) { onPress(press) }
        }
    }

    /// Stops the source; no press is reported after it returns. Control thread.
    public func stop() {
        source.stop()
    }
}
