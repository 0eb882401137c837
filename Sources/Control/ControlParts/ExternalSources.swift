import BatonConfig
import OSThread
import Players
import Synchronization

/// The external sources' socket server (`external-sources:`), or why it could not start. Any thread.
package final class ExternalSources: Sendable {
    private let running = Mutex<(server: ExternalSourceServer?, error: String?, stopped: Bool)>((nil, nil, false))

    package var server: ExternalSourceServer? { running.withLock { $0.server } }
    package var error: String? { running.withLock { $0.error } }

    /// Keeps `server`, started — unless batond stopped meanwhile (a reload that set it up as batond
    /// stopped): it is stopped then, not left listening.
    package func started(_ server: ExternalSourceServer) {
        let kept = running.withLock { s in
            if !s.stopped { s = (server, nil, false) }
            return !s.stopped
        }
        if !kept { server.stop() }
    }
    /// Lets a server be kept again (batond starts). Control thread, at start.
    package func open() { running.withLock { $0.stopped = false } }
    package func failed(_ why: String) { running.withLock { $0 = (nil, why, $0.stopped) } }

    /// Stops the server (every program connected gets an error), and any started after. Control
    /// thread, at stop.
    package func stop() {
        running.withLock { s in
            defer {
                s.server = nil
                s.stopped = true
            }
            return s.server
        }?.stop()
    }
}
