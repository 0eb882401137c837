import BatonTesting
import Glibc
import OSThread
import Synchronization
import Testing

/// batond's log: under systemd its standard error is a socket to journald.
@Suite(.ownThread) struct LoggerTests {
    /// A journal that does not read (journald held by a busy disk) holds no thread that logs: what it
    /// does not take is dropped, and the next line that goes through says how many. batond waited in
    /// the write, and with it every thread that logs — the monitor too, with the control plane's lock.
    @Test func aJournalThatDoesNotReadHoldsNoLogger() throws {
        var ends: [Int32] = [0, 0]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends) == 0)
        defer {
            close(ends[0])
            close(ends[1])
        }
        var small: Int32 = 4_096
        setsockopt(ends[0], SOL_SOCKET, SO_SNDBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        let logger = Logger(fileDescriptor: ends[0])
        let done = Atomic<Bool>(false)
        let text = String(repeating: "x", count: 200)
        let thread = OSThread.start {
            for i in 0..<1_000 { logger.info("\(i) \(text)") }
            done.store(true, ordering: .releasing)
        }
        let finished = waitUntil(seconds: 5) { done.load(ordering: .acquiring) }
        // The journal reads at last (letting a waiting writer through, had it waited).
        var read = Self.readAll(ends[1]) { done.load(ordering: .acquiring) }
        thread.join()
        #expect(finished, "logging waited for the journal")
        #expect(read.count < 1_000 * 210, "every line was taken: \(read.count) bytes")
        logger.info("after")
        read = Self.readAll(ends[1]) { true }
        let lines = String(decoding: read, as: UTF8.self).split(separator: "\n")
        let notice = lines.first ?? ""
        #expect(
            notice.hasPrefix("batond warning: ")
                && notice.hasSuffix(" log lines dropped (the journal did not take them)"))
        #expect(lines.last == "batond info: after")
    }

    /// Reads what `fd` holds until `finished` says no more is coming and nothing is left.
    static func readAll(_ fd: Int32, finished: () -> Bool) -> [UInt8] {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            var one = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&one, 1, 100) > 0 {
                let n = read(fd, &buffer, buffer.count)
                if n > 0 {
                    bytes += buffer[..<n]
                    continue
                }
            }
            if finished() { return bytes }
        }
    }
}
