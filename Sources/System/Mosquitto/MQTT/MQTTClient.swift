import CMosquitto
import Glibc
import OSThread
import Synchronization

/// libmosquitto's global state, initialized once, on first use (a global `let` is initialized
/// exactly once, thread-safely). Never cleaned up: it lives as long as the process.
private let libraryInitResult: Int32 = mosquitto_lib_init()

/// An MQTT 3.1.1 client over libmosquitto that stays connected: it connects on its own thread,
/// reconnects with exponential backoff after every failure or drop, re-subscribes on every connect,
/// and keeps an availability topic truthful (`online` on connect, `offline` by will or on stop).
///
/// Threads:
/// - ``start()`` starts one network thread that owns the connection. Every callback
///   runs on it: `onMessage` for each message received, `onStatusChange` for each state change. They
///   must return quickly (no blocking I/O, no waiting for the network thread) and must not call
///   ``stop()``. They may call ``publish(_:payload:qos:retain:)`` and ``subscribe(_:qos:)``.
/// - ``publish(_:payload:qos:retain:)``, ``subscribe(_:qos:)``, ``unsubscribe(_:)`` and ``status``:
///   any thread, at any time (before ``start()`` too). They never block on the network.
/// - ``start()`` and ``stop()``: the control thread, once each.
///
/// While running, the network thread keeps the client alive: call ``stop()`` before dropping it.
///
/// What happens to messages published while disconnected: QoS 0 ones are dropped and `publish`
/// throws ``MQTTError/notConnected(topic:)``; QoS 1 and 2 ones are kept in memory (without bound) and
/// sent once the next connection is up, in order. The broker's session is clean on every connect, so
/// messages *to* us while we are disconnected are not kept by the broker unless retained.
public final class MQTTClient: @unchecked Sendable {
    // @unchecked: `handle` is a libmosquitto client in threaded mode (`mosquitto_threaded_set`):
    // publish, subscribe, unsubscribe and disconnect lock inside libmosquitto and may be called from
    // any thread; connect and loop are called only on the network thread, and destroy only in deinit,
    // after the network thread ended (the thread holds the client: joined, or left to end by
    // itself). All Swift state is in `shared` (a Mutex); the rest is `let`.

    /// Receives each message: its topic, its payload (cut to `MQTTConfiguration.maximumPayload`),
    /// the payload's whole length, and whether the broker kept it (`retained`: sent because we
    /// subscribed, not because someone published it now). Called on the network thread.
    public typealias MessageHandler =
        @Sendable (
            _ topic: String, _ payload: [UInt8], _ length: Int, _ retained: Bool
        ) -> Void
    /// Receives the new status after each change. Called on the network thread (and, for the final
    /// `.stopped`, on the thread that called ``stop()``).
    public typealias StatusHandler = @Sendable (_ status: MQTTStatus) -> Void

    /// The configuration the client was created with.
    public let configuration: MQTTConfiguration
    let handle: OpaquePointer
    let onMessage: MessageHandler
    let onStatusChange: StatusHandler
    /// A pipe the network thread polls while it waits out a backoff, so `stop()` ends the wait at once.
    let wakeRead: Int32
    let wakeWrite: Int32
    let shared = Mutex(Shared())
    /// Posted when the network thread's work is done (`stop` waits for it, bounded).
    let ended = Semaphore()
    /// Posted, while stopping, when the broker has acknowledged every message published.
    let allAcknowledged = Semaphore()

    struct Shared {
        var status = MQTTStatus()
        /// Every filter subscribed to, in subscription order, with its QoS: re-subscribed on connect.
        var subscriptions: [(filter: String, qos: MQTTQoS)] = []
        /// Message ids of the SUBSCRIBEs sent on this connect and not yet acknowledged.
        var pendingSubscribes: Set<Int32> = []
        /// The filter each SUBSCRIBE sent on this connection asked for (by message id), to name
        /// one the broker refuses.
        var subscribing: [Int32: String] = [:]
        /// Whether CONNACK arrived (accepted) on the current connection.
        var sessionUp = false
        /// Whether a connect succeeded since the network thread last looked (it resets the backoff
        /// unless the sessions are short, see `shortSessions`).
        var connectedSinceAttempt = false
        /// When the session now up began (monotonic ns), and how many in a row the broker ended
        /// within `shortSession` of their start.
        var sessionSince = 0
        var shortSessions = 0
        /// The text of a CONNACK refusal, kept over libmosquitto's vaguer "connection refused".
        var refusal: String?
        var thread: OSThread?
        var started = false
        var stopping = false
        /// Messages handed to libmosquitto to send, and those it said are done (`on_publish`: a
        /// QoS 1 one acknowledged by the broker, a QoS 0 one written): a clean stop waits until
        /// they meet, before its DISCONNECT.
        var published = 0
        var acknowledged = 0
    }

    /// Creates a client (not yet connecting: see ``start()``).
    /// - Parameters:
    ///   - onMessage: called on the network thread for every message matching a subscription.
    ///   - onStatusChange: called on the network thread after every status change.
    /// - Throws: ``MQTTError/invalidConfiguration(field:reason:)`` for the first unusable field, or
    ///   ``MQTTError/library(operation:code:message:)`` when libmosquitto refuses a setting (e.g. a
    ///   TLS file it cannot load).
    public init(
        configuration: MQTTConfiguration, onMessage: @escaping MessageHandler,
        onStatusChange: @escaping StatusHandler = { _ in }
    ) throws(MQTTError) {
        try configuration.validate()
        guard libraryInitResult == MOSQ_ERR_SUCCESS.rawValue else {
            throw .library(
                operation: "mosquitto_lib_init", code: libraryInitResult,
                message: Self.text(of: libraryInitResult, errno: 0))
        }
        handle = try Self.makeHandle(configuration)
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else {
            let code = errno
            mosquitto_destroy(handle)
            throw .library(operation: "pipe", code: MOSQ_ERR_ERRNO.rawValue, message: String(cString: strerror(code)))
        }
        for fd in fds {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, O_NONBLOCK)
        }
        wakeRead = fds[0]
        wakeWrite = fds[1]
        self.configuration = configuration
        self.onMessage = onMessage
        self.onStatusChange = onStatusChange
    }

    deinit {
        mosquitto_destroy(handle)
        close(wakeRead)
        close(wakeWrite)
    }

    /// A libmosquitto client with every setting of `configuration` applied, and our callbacks.
    static func makeHandle(_ configuration: MQTTConfiguration) throws(MQTTError) -> OpaquePointer {
        guard let handle = mosquitto_new(configuration.clientID, true, nil) else {
            throw .library(
                operation: "mosquitto_new", code: MOSQ_ERR_ERRNO.rawValue, message: String(cString: strerror(errno)))
        }
        func check(_ rc: Int32, _ operation: String) throws(MQTTError) {
            guard rc == MOSQ_ERR_SUCCESS.rawValue else {
                let code = errno
                mosquitto_destroy(handle)
                throw .library(operation: operation, code: rc, message: text(of: rc, errno: code))
            }
        }
        try check(mosquitto_threaded_set(handle, true), "mosquitto_threaded_set")
        if let username = configuration.username {
            try check(
                mosquitto_username_pw_set(handle, username, configuration.password), "setting the username and password"
            )
        }
        if let will = configuration.effectiveWill {
            let rc = will.payload.withUnsafeBytes {
                mosquitto_will_set(handle, will.topic, Int32($0.count), $0.baseAddress, will.qos.rawValue, will.retain)
            }
            try check(rc, "setting the will on \"\(will.topic)\"")
        }
        if configuration.broker.usesTLS {
            let tls = configuration.tls
            // Without a CA file, trust the system's store (hashed certificates in /etc/ssl/certs).
            let rc = mosquitto_tls_set(
                handle, tls.caFile, tls.caFile == nil ? "/etc/ssl/certs" : nil, tls.certFile,
                tls.keyFile, nil)
            try check(
                rc,
                "loading the TLS files (ca \(tls.caFile ?? "/etc/ssl/certs"), cert \(tls.certFile ?? "none"), key \(tls.keyFile ?? "none"))"
            )
        }
        mosquitto_connect_callback_set(handle) { _, context, code in
            guard let context else { return }
            Unmanaged<MQTTClient>.fromOpaque(context).takeUnretainedValue().didConnect(code: code)
        }
        mosquitto_disconnect_callback_set(handle) { _, context, code in
            let savedErrno = errno
            guard let context else { return }
            Unmanaged<MQTTClient>.fromOpaque(context).takeUnretainedValue().didDisconnect(code: code, errno: savedErrno)
        }
        mosquitto_subscribe_callback_set(handle) { _, context, mid, count, granted in
            guard let context else { return }
            let codes = (0..<Int(max(0, count))).map { granted![$0] }
            Unmanaged<MQTTClient>.fromOpaque(context).takeUnretainedValue().didSubscribe(mid: mid, granted: codes)
        }
        mosquitto_publish_callback_set(handle) { _, context, _ in
            guard let context else { return }
            Unmanaged<MQTTClient>.fromOpaque(context).takeUnretainedValue().didPublish()
        }
        mosquitto_message_callback_set(handle) { _, context, message in
            guard let context, let message = message?.pointee, let topic = message.topic else { return }
            let client = Unmanaged<MQTTClient>.fromOpaque(context).takeUnretainedValue()
            let length = Int(max(0, message.payloadlen))
            let kept = min(length, client.configuration.maximumPayload)
            let payload = kept > 0 ? Array(UnsafeRawBufferPointer(start: message.payload, count: kept)) : []
            client.onMessage(String(cString: topic), payload, length, message.retain)
        }
        return handle
    }

    // MARK: - Control

    /// The current status. Any thread.
    public var status: MQTTStatus { shared.withLock { $0.status } }

    /// Starts the network thread, which connects at once and keeps reconnecting until ``stop()``.
    /// A second call does nothing. Control thread; returns at once (the connection comes later:
    /// watch ``status`` or `onStatusChange`; the status is `.connecting` once the thread runs).
    public func start() {
        shared.withLock { shared in
            guard !shared.started else { return }
            shared.started = true
            mosquitto_user_data_set(handle, Unmanaged.passUnretained(self).toOpaque())
            shared.thread = OSThread.start(name: "mqtt-net") { [self] in
                run()
                ended.post()
            }
        }
    }

    /// Publishes `offline` to the availability topic (when connected), disconnects cleanly (so the
    /// broker does not publish the will), and joins the network thread. Blocks for at most 2.5 s
    /// (a broker that stops answering mid-disconnect), 1 s while not connected (a DNS lookup that
    /// does not end, whose thread is then left to end by itself: it connects no more, and says no
    /// status after `.stopped`). Control thread, never a callback. The client cannot be started
    /// again.
    public func stop() {
        let (thread, connected) = shared.withLock { shared -> (OSThread?, Bool) in
            guard shared.started, !shared.stopping else { return (nil, false) }
            shared.stopping = true
            return (shared.thread, shared.sessionUp)
        }
        guard let thread else { return }
        precondition(!thread.isCurrent, "MQTTClient.stop() called from its own callback")
        if connected, let topic = configuration.availabilityTopic {
            _ = try? publish(
                topic, payload: Array(MQTTConfiguration.offlinePayload.utf8), qos: .atLeastOnce, retain: true)
        }
        // What was published just before (batond's last states: a zone unavailable, nothing
        // playing) reaches the broker: the DISCONNECT went out ahead of messages libmosquitto had
        // not sent yet, and they were lost — the broker kept "music playing".
        let waitFrom = monotonicNanoseconds()
        if connected { waitForAcknowledgements(nanoseconds: Self.acknowledgementWaitNanoseconds) }
        // Within the stop's budget (systemd's 5 s for all of batond's stop), not on top of it.
        let waited = monotonicNanoseconds() - waitFrom
        _ = mosquitto_disconnect(handle)
        wake()
        // A thread in libmosquitto's DNS lookup (a broker named by a host name, a resolver that
        // does not answer: 5 s a try) cannot be cut short: the stop waited for it, past systemd's
        // 5 s, and batond was killed before its fade-out and its last state save. It is left to
        // end by itself (it holds the client, and stops after its lookup).
        if ended.wait(nanoseconds: connected ? Self.stopWaitNanoseconds - waited : 1_000_000_000) {
            thread.join()
        } else {
            thread.abandon()
        }
        updateStatus { $0.connection = .stopped }
    }

    /// How long `stop` waits for the broker to acknowledge what was published, before its
    /// DISCONNECT: a broker that does not answer (frozen, or the network gone) costs this at most.
    static let acknowledgementWaitNanoseconds = 500_000_000

    /// Waits until every message published has been acknowledged (or written, QoS 0), or
    /// `nanoseconds` passed. Only while stopping (`didPublish` posts then).
    func waitForAcknowledgements(nanoseconds: Int) {
        let deadline = monotonicNanoseconds() + nanoseconds
        while shared.withLock({ $0.acknowledged < $0.published }) {
            let left = deadline - monotonicNanoseconds()
            guard left > 0, allAcknowledged.wait(nanoseconds: left) else { return }
        }
    }

    /// `on_publish`: a message is done. Network thread.
    func didPublish() {
        let done = shared.withLock { shared in
            shared.acknowledged += 1
            return shared.stopping && shared.acknowledged >= shared.published
        }
        if done { allAcknowledged.post() }
    }

    /// How long `stop` waits for the network thread of a session that is up: the DISCONNECT's
    /// 2 s, and a little (1 s without one: nothing to send), counting the wait for what was
    /// published before it (`acknowledgementWaitNanoseconds`).
    static let stopWaitNanoseconds = 2_500_000_000

    // MARK: - Messages

    /// Publishes `payload` to `topic`.
    ///
    /// Any thread; never blocks on the network (the network thread sends it). While disconnected, a
    /// QoS 1 or 2 message is queued in memory and sent after the next connect; a QoS 0 one is dropped
    /// and this throws ``MQTTError/notConnected(topic:)``. Retained messages that describe current
    /// state are best republished by the caller on each connect (see `onStatusChange`) rather than
    /// queued. The corresponding C function is `mosquitto_publish`.
    /// - Throws: ``MQTTError/invalidTopic(topic:reason:)``, ``MQTTError/notConnected(topic:)``, or
    ///   ``MQTTError/library(operation:code:message:)`` (e.g. a payload over 256 MB).
    public func publish(_ topic: String, payload: [UInt8], qos: MQTTQoS = .atLeastOnce, retain: Bool = false)
        throws(MQTTError)
    {
        try MQTTTopic.checkName(topic)
        let rc = payload.withUnsafeBytes {
            mosquitto_publish(handle, nil, topic, Int32(clamping: $0.count), $0.baseAddress, qos.rawValue, retain)
        }
        let code = errno
        // libmosquitto 2.0 queues a QoS 1 or 2 message *before* trying to send it, and then returns
        // the send's MOSQ_ERR_NO_CONN although the message stays queued and goes out after the next
        // connect. Only for QoS 0 does NO_CONN mean dropped.
        if rc == MOSQ_ERR_SUCCESS.rawValue || (rc == MOSQ_ERR_NO_CONN.rawValue && qos != .atMostOnce) {
            shared.withLock { $0.published += 1 }
        }
        if rc == MOSQ_ERR_NO_CONN.rawValue && qos != .atMostOnce { return }
        if rc == MOSQ_ERR_NO_CONN.rawValue { throw .notConnected(topic: topic) }
        guard rc == MOSQ_ERR_SUCCESS.rawValue else {
            throw .library(operation: "publish to \"\(topic)\"", code: rc, message: Self.text(of: rc, errno: code))
        }
    }

    /// Publishes the UTF-8 of `text` to `topic` (see ``publish(_:payload:qos:retain:)``). Any thread.
    public func publish(_ topic: String, text: String, qos: MQTTQoS = .atLeastOnce, retain: Bool = false)
        throws(MQTTError)
    {
        try publish(topic, payload: Array(text.utf8), qos: qos, retain: retain)
    }

    /// Subscribes to `filter` now (when connected) and on every later connect. Messages arrive in
    /// `onMessage` on the network thread. Subscribing to the same filter again changes its QoS.
    /// Any thread. The corresponding C function is `mosquitto_subscribe`.
    /// - Throws: ``MQTTError/invalidTopic(topic:reason:)`` for a filter MQTT does not allow.
    public func subscribe(_ filter: String, qos: MQTTQoS = .atLeastOnce) throws(MQTTError) {
        try MQTTTopic.checkFilter(filter)
        let connected = shared.withLock { shared -> Bool in
            shared.subscriptions.removeAll { $0.filter == filter }
            shared.subscriptions.append((filter, qos))
            return shared.sessionUp
        }
        // Not connected: the network thread subscribes on connect. A connect racing with this call
        // may subscribe twice, which the broker treats as one subscription.
        if connected {
            // Under the lock: its SUBACK (on the network thread, which takes it too) must find the
            // filter stored. libmosquitto queues the packet without calling back here.
            shared.withLock { shared in
                var mid: Int32 = 0
                if mosquitto_subscribe(handle, &mid, filter, qos.rawValue) == MOSQ_ERR_SUCCESS.rawValue {
                    shared.subscribing[mid] = filter
                }
            }
        }
    }

    /// Stops receiving messages for `filter` (exactly as subscribed), now and after reconnects.
    /// Any thread. The corresponding C function is `mosquitto_unsubscribe`.
    public func unsubscribe(_ filter: String) {
        let connected = shared.withLock { shared -> Bool in
            shared.subscriptions.removeAll { $0.filter == filter }
            return shared.sessionUp
        }
        if connected { _ = mosquitto_unsubscribe(handle, nil, filter) }
    }

}
