import CGPIOD
import Glibc
import OSThread
import Synchronization

/// One GPIO line requested for edge events through libgpiod v1 (the kernel's GPIO character
/// device), read on its own thread.
///
/// It always asks the kernel for both edges, whatever edge makes a press: the debouncer needs every
/// edge to tell bounce from a new press.
///
/// Threads: `init` and ``stop()`` on the control thread; ``start(_:)`` starts one reader thread
/// that waits in `poll` on the line's event file and a wake pipe (so ``stop()`` ends it at once)
/// and calls the handler there, in kernel order. A read error ends the thread after calling
/// `onError` there.
public final class GPIOLineReader: EdgeSource, @unchecked Sendable {
    // @unchecked: `chip` and `line` are used by the reader thread only between start() and the join
    // in stop(); init, stop and deinit use them on the control thread when no reader runs. The rest
    // is `let` or in a Mutex.
    public let chipName: String
    public let offset: Int
    private let chip: OpaquePointer
    private let line: OpaquePointer
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let onError: @Sendable (GPIOError) -> Void
    private let thread = Mutex<OSThread?>(nil)
    /// The line's level read right after the request, from which its edges are queued (nil when
    /// the read failed): the debouncer's settled level before the first edge.
    public let initialLevel: Bool?

    /// Opens `chip` and requests line `offset` as an input with edge events and `bias`, under the
    /// consumer name `consumer` (shown by `gpioinfo`). Control thread.
    /// - Throws: ``GPIOError/system(subject:action:code:)`` naming the chip (`gpiochip0: No such
    ///   file or directory`) or the line (`gpiochip0 line 17: request for edge events: Device or
    ///   resource busy`), or ``GPIOError/invalidConfiguration(field:reason:)`` for a line the chip
    ///   does not have.
    public init(
        chip chipName: String, line offset: Int, bias: GPIOBias, consumer: String = "batond",
        onError: @escaping @Sendable (GPIOError) -> Void = { _ in }
    ) throws(GPIOError) {
        guard let chip = Self.open(chipName) else {
            throw .system(subject: chipName, action: "", code: errno)
        }
        let lines = Int(gpiod_chip_num_lines(chip))
        guard offset >= 0, offset < lines else {
            gpiod_chip_close(chip)
            throw .invalidConfiguration(
                field: "\(chipName) line \(offset)",
                reason: "the chip has \(lines) lines (0...\(lines - 1))")
        }
        guard let line = gpiod_chip_get_line(chip, UInt32(offset)) else {
            let code = errno
            gpiod_chip_close(chip)
            throw .system(subject: "\(chipName) line \(offset)", action: "get line", code: code)
        }
        var flags: Int32 = 0
        switch bias {
        case .pullUp: flags = Int32(GPIOD_LINE_REQUEST_FLAG_BIAS_PULL_UP)
        case .pullDown: flags = Int32(GPIOD_LINE_REQUEST_FLAG_BIAS_PULL_DOWN)
        case .disabled: flags = Int32(GPIOD_LINE_REQUEST_FLAG_BIAS_DISABLE)
        case .asIs: flags = 0
        }
        let rc = consumer.withCString { name in
            var request = gpiod_line_request_config(
                consumer: name, request_type: Int32(GPIOD_LINE_REQUEST_EVENT_BOTH_EDGES),
                flags: flags)
            return gpiod_line_request(line, &request, 0)
        }
        guard rc == 0 else {
            let code = errno
            gpiod_chip_close(chip)
            throw .system(subject: "\(chipName) line \(offset)", action: "request for edge events", code: code)
        }
        let value = gpiod_line_get_value(line)
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else {
            let code = errno
            gpiod_chip_close(chip)
            throw .system(subject: "\(chipName) line \(offset)", action: "wake pipe", code: code)
        }
        _ = fcntl(fds[0], F_SETFL, O_NONBLOCK)
        // Not inherited by what batond starts (a control command, the speech engine).
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        self.chipName = chipName
        self.offset = offset
        self.chip = chip
        self.line = line
        wakeRead = fds[0]
        wakeWrite = fds[1]
        self.onError = onError
        initialLevel = value < 0 ? nil : value != 0
    }

    deinit {
        stop()
        gpiod_chip_close(chip)  // releases the line too
        close(wakeRead)
        close(wakeWrite)
    }

    /// Opens a chip by path (`/dev/gpiochip0`), number (`0`), name (`gpiochip0`) or else label, each
    /// with its own libgpiod call so errno is that of the one attempt made.
    private static func open(_ name: String) -> OpaquePointer? {
        if name.hasPrefix("/") { return gpiod_chip_open(name) }
        if let number = UInt32(name) { return gpiod_chip_open_by_number(number) }
        if name.hasPrefix("gpiochip") { return gpiod_chip_open_by_name(name) }
        return gpiod_chip_open_by_label(name)
    }

    /// Starts the reader thread, which calls `handler` for each edge. Control thread; a second call
    /// does nothing.
    public func start(_ handler: @escaping @Sendable (EdgeEvent) -> Void) {
        thread.withLock { thread in
            guard thread == nil else { return }
            let created = OSThread.start(name: "gpio") { [self] in readEdges(handler) }
            thread = created
        }
    }

    /// Ends the reader thread and waits for it. Control thread, never the handler.
    public func stop() {
        guard
            let running = thread.withLock({ thread in
                defer { thread = nil }
                return thread
            })
        else { return }
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
        running.join()
        while read(wakeRead, &byte, 1) == 1 {}
    }

    /// The reader thread: waits for an edge or the wake pipe, and reads edges until stopped.
    private func readEdges(_ handler: @Sendable (EdgeEvent) -> Void) {
        let eventFD = gpiod_line_event_get_fd(line)
        var fds = [
            pollfd(fd: eventFD, events: Int16(POLLIN), revents: 0),
            pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            let ready = poll(&fds, 2, -1)
            if ready < 0 {
                if errno == EINTR { continue }
                onError(.system(subject: "\(chipName) line \(offset)", action: "poll", code: errno))
                return
            }
            if fds[1].revents != 0 { return }
            guard fds[0].revents != 0 else { continue }
            var event = gpiod_line_event()
            guard gpiod_line_event_read(line, &event) == 0 else {
                onError(.system(subject: "\(chipName) line \(offset)", action: "read edge event", code: errno))
                return
            }
            let timestamp = Int64(event.ts.tv_sec) * 1_000_000_000 + Int64(event.ts.tv_nsec)
            handler(
                EdgeEvent(event.event_type == Int32(GPIOD_LINE_EVENT_RISING_EDGE) ? .rising : .falling, at: timestamp))
        }
    }
}
