import BatonConfig
import OSThread
import Players
import Synchronization

/// The external sources' socket server (`external-sources:`), or why it could not start. Any thread.
package final class ExternalSources: Sendable {
    private let running = Mutex<(server: ExternalSourceServer?, error: String?)>((nil, nil))

    package var server: ExternalSourceServer? { running.withLock { $0.server } }
    package var error: String? { running.withLock { $0.error } }

    package func started(_ server: ExternalSourceServer) { running.withLock { $0 = (server, nil) } }
    package func failed(_ why: String) { running.withLock { $0 = (nil, why) } }

    /// Stops the server (every program connected gets an error). Control thread, at stop.
    package func stop() {
        running.withLock { s in
            defer { s.server = nil }
            return s.server
        }?.stop()
    }
}
