import CMosquitto
import Glibc
import OSThread
import Synchronization

// The MQTT client's network thread (see MQTTClient.swift).
extension MQTTClient {
    // MARK: - The network thread

    var isStopping: Bool { shared.withLock { $0.stopping } }

    /// Connects, serves the connection until it ends, waits out the backoff, and again, until stopped.
    func run() {
        var backoff = ReconnectBackoff(
            minimum: configuration.minimumReconnectDelay,
            maximum: configuration.maximumReconnectDelay)
        let broker = configuration.broker
        let keepAlive = Int32(configuration.keepAlive.components.seconds)
        while !isStopping {
            updateStatus { $0.connection = .connecting }
            // Non-blocking TCP connect (the DNS lookup still blocks); the loop completes it.
            let rc = mosquitto_connect_async(handle, broker.host, Int32(broker.port), keepAlive)
            let code = errno
            // Stopped during the lookup (`stop` may have given up on this thread): no connection
            // now — it would subscribe and say `online` after the stop.
            if isStopping {
                if rc == MOSQ_ERR_SUCCESS.rawValue { _ = mosquitto_disconnect(handle) }
                break
            }
            if rc == MOSQ_ERR_SUCCESS.rawValue {
                serveConnection()
            } else {
                failed(Self.text(of: rc, errno: code, host: broker.host))
            }
            // A session starts the waits over, unless it is the second or later short one in a
            // row: a broker that ends each at once (another client with this id takes it over) is
            // not reconnected to every second — and one restarted once, shortly after a long
            // outage, is not waited for a minute.
            let reset = shared.withLock { shared in
                defer { shared.connectedSinceAttempt = false }
                return shared.connectedSinceAttempt && shared.shortSessions < 2
            }
            if reset { backoff.reset() }
            if isStopping { break }
            waitForWake(backoff.nextDelay())
        }
    }

    /// Runs libmosquitto's loop until the connection ends (or, once stopping, until the DISCONNECT
    /// is sent, at most 2 s).
    func serveConnection() {
        var stopDeadline: ContinuousClock.Instant?
        while true {
            let rc = mosquitto_loop(handle, 1000, 1)
            let code = errno
            if rc != MOSQ_ERR_SUCCESS.rawValue {
                // libmosquitto reports most ends through the disconnect callback; report the rest.
                let unreported = shared.withLock { $0.status.connection != .disconnected }
                if unreported && !isStopping {
                    failed(Self.text(of: rc, errno: code, host: configuration.broker.host))
                }
                return
            }
            let (stopping, up) = shared.withLock { ($0.stopping, $0.sessionUp) }
            if stopping {
                if !up { return }
                let now = ContinuousClock.now
                if let stopDeadline, now > stopDeadline { return }
                if stopDeadline == nil { stopDeadline = now + .seconds(2) }
            }
        }
    }

    /// CONNACK arrived: re-subscribe, and when there is nothing to wait for, go online.
    func didConnect(code: Int32) {
        guard code == 0 else {
            let reason = "the broker refused the connection: \(String(cString: mosquitto_connack_string(code)))"
            shared.withLock { $0.refusal = reason }
            failed(reason)
            return
        }
        let subscriptions = shared.withLock { shared in
            shared.sessionUp = true
            shared.connectedSinceAttempt = true
            shared.sessionSince = monotonicNanoseconds()
            shared.refusal = nil
            shared.pendingSubscribes = []
            shared.subscribing = [:]
            return shared.subscriptions
        }
        // Asked again on this connection: what the broker refuses now is said anew.
        updateStatus { $0.refusedSubscriptions = [] }
        var mids: [Int32: String] = [:]
        for (filter, qos) in subscriptions {
            var mid: Int32 = 0
            if mosquitto_subscribe(handle, &mid, filter, qos.rawValue) == MOSQ_ERR_SUCCESS.rawValue {
                mids[mid] = filter
            }
        }
        let ready = shared.withLock { shared in
            // SUBACKs arrive on this thread, so none can have been handled before this point.
            shared.pendingSubscribes = Set(mids.keys)
            shared.subscribing.merge(mids) { _, new in new }
            return mids.isEmpty
        }
        if ready { goOnline() }
    }

    /// A SUBACK: when the last re-subscription is acknowledged, go online.
    /// A refused one (0x80: mosquitto's answer to a filter its ACL denies) is named in
    /// `refusedSubscriptions` and `lastError`: its messages will not come, though the rest do.
    func didSubscribe(mid: Int32, granted: [Int32]) {
        let refused = granted.contains(0x80)
        let (ready, filter) = shared.withLock { shared in
            let filter = shared.subscribing.removeValue(forKey: mid)
            guard shared.pendingSubscribes.remove(mid) != nil else { return (false, filter) }
            return (shared.pendingSubscribes.isEmpty, filter)
        }
        if refused {
            let name = filter ?? "a topic filter"
            updateStatus {
                $0.lastError =
                    "the broker refused the subscription to \(name) (not authorised for it?): its messages do not come"
                if let filter, !$0.refusedSubscriptions.contains(filter) { $0.refusedSubscriptions.append(filter) }
            }
        }
        if ready { goOnline() }
    }

    /// Every subscription is in place: publish `online` and report `.connected`.
    func goOnline() {
        if let topic = configuration.availabilityTopic {
            // Through `publish`, which counts it for a stop's wait (its `on_publish` will come).
            _ = try? publish(
                topic, payload: Array(MQTTConfiguration.onlinePayload.utf8), qos: .atLeastOnce, retain: true)
        }
        updateStatus {
            $0.connection = .connected
            $0.connectCount += 1
        }
    }

    /// The connection ended: `code` 0 when we asked for it.
    func didDisconnect(code: Int32, errno savedErrno: Int32) {
        let (refusal, short) = shared.withLock { shared in
            // A session the broker ended within seconds of its start, again and again: what the
            // broker does when another client connects with the same id (a cloned SD card, two
            // batonds with the same `device`). Each said only "the connection closed".
            if shared.sessionUp && code != 0 {
                let lasted = monotonicNanoseconds() - shared.sessionSince >= Self.shortSession
                shared.shortSessions = lasted ? 0 : shared.shortSessions + 1
            }
            shared.sessionUp = false
            shared.pendingSubscribes = []
            shared.subscribing = [:]
            return (shared.refusal, shared.shortSessions)
        }
        if code == 0 {
            updateStatus { $0.connection = .disconnected }
        } else if code == MOSQ_ERR_CONN_REFUSED.rawValue, let refusal {
            failed(refusal)
        } else {
            let why = Self.text(of: code, errno: savedErrno, host: configuration.broker.host)
            failed(
                short < 3
                    ? why
                    : "\(why) — the broker ended the last \(short) sessions within seconds of their start: is another client using the id \(configuration.clientID) (two batonds with the same `device`)?"
            )
        }
    }

    /// A session shorter than this, ended by the broker, is a short one (see `didDisconnect`).
    static let shortSession = 10_000_000_000

    /// Records a failed attempt or a dropped connection.
    func failed(_ reason: String) {
        let broker = configuration.broker.description
        updateStatus {
            $0.connection = .disconnected
            $0.lastError = "\(broker): \(reason)"
        }
    }

    /// Applies `change` and reports the new status if it differs. Never called with the lock held.
    func updateStatus(_ change: (inout MQTTStatus) -> Void) {
        let changed = shared.withLock { shared -> MQTTStatus? in
            let old = shared.status
            // `.stopped` is the last word (a thread left to end by itself says nothing after it).
            if shared.stopping && old.connection == .stopped { return nil }
            change(&shared.status)
            return shared.status == old ? nil : shared.status
        }
        if let changed { onStatusChange(changed) }
    }

    /// Waits `delay` or until ``stop()`` writes to the wake pipe.
    func waitForWake(_ delay: Duration) {
        var pfd = pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)
        let deadline = ContinuousClock.now + delay
        while true {
            let (seconds, attoseconds) = (deadline - ContinuousClock.now).components
            let milliseconds = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
            if milliseconds <= 0 { break }
            let rc = poll(&pfd, 1, Int32(clamping: milliseconds))
            if rc > 0 || rc < 0 && errno != EINTR { break }
        }
        var byte: UInt8 = 0
        while read(wakeRead, &byte, 1) == 1 {}
    }

    func wake() {
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    /// libmosquitto's text for `code`, with errno's text for `MOSQ_ERR_ERRNO`.
    static func text(of code: Int32, errno: Int32, host: String = "") -> String {
        switch code {
        case MOSQ_ERR_ERRNO.rawValue: return String(cString: strerror(errno))
        case MOSQ_ERR_EAI.rawValue: return "cannot resolve the host name \"\(host)\""
        // libmosquitto 2.0.11's mosquitto_strerror has no text for this one ("Unknown error.").
        case MOSQ_ERR_KEEPALIVE.rawValue: return "the broker did not answer within the keep-alive time"
        default: return String(cString: mosquitto_strerror(code))
        }
    }
}
