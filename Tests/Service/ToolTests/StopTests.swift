import BatonTesting
import Glibc
import OSThread
import Synchronization
import Testing

/// batond's stop while a request waits on the music server: systemd gives the stop 5 s
/// (`TimeoutStopSec`), then kills it (no fade-out, no last save).
@Suite(.ownThread) struct StopTests {
    /// `music/play` waits on a server that never answers (its request may take 30 s) when batond
    /// gets SIGTERM: it stops within systemd's 5 s, with its fade-out and last save ("stopped"),
    /// and the request ends unplayed. Before, the API's stop waited for the request, and batond was
    /// killed.
    @Test func aStopEndsWhileARequestWaitsOnTheMusicServer() throws {
        let server = try HeldHTTPServer()
        defer { server.close() }
        let password = TestDirectory.make("silent-server") + "/password"
        let file = try #require(fopen(password, "w"))
        fputs("secret\n", file)
        fclose(file)
        let daemon = try BatondProcess(
            extra: """
                music:
                  subsonic: {url: "http://127.0.0.1:\(server.port)", user: baton, password-file: "\(password)", format: raw}
                """)
        defer { daemon.stop() }
        let answer = Mutex<Int?>(nil)
        let port = daemon.port
        OSThread.detach(name: "play") {
            let client = try? RawClient(port: port)
            let body = #"{"random": 5}"#
            client?.send(
                "POST /api/v1/music/play HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                    + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
            let status = (try? client?.readResponse())?.status ?? 0
            answer.withLock { $0 = status }
        }
        #expect(waitUntil(seconds: 10) { server.count("getRandomSongs") == 1 })
        let status = daemon.stop()  // SIGTERM; SIGKILL after 5 s, as systemd
        #expect(status == 0, "exit status \(status): \(daemon.log)")
        #expect(daemon.log.contains("stopped"), "\(daemon.log)")
        #expect(waitUntil(seconds: 5) { answer.withLock { $0 } != nil })
        // Answered with an error, or its connection closed with the API (0): not played.
        let code = answer.withLock { $0 } ?? 0
        #expect(!(200..<300).contains(code), "the play was answered \(code)")
    }

    /// Wrong tokens wait before they are answered (four a second for a client): sixteen of them
    /// pending (four seconds of waits) when batond gets SIGTERM end with the stop, which takes
    /// well under a second. The API's stop waited for every one, and with the rest of the stop
    /// went past systemd's 5 s, which then killed batond before its fade-out and last save.
    @Test func aStopDoesNotWaitForWrongTokens() throws {
        let daemon = try BatondProcess(token: "the-right-token")
        defer { daemon.stop() }
        let answered = Mutex(0)
        let port = daemon.port
        for _ in 0..<16 {
            OSThread.detach(name: "guess") {
                let client = try? RawClient(port: port)
                client?.send(
                    "GET /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                        + "Authorization: Bearer not-the-token\r\n\r\n")
                _ = try? client?.readResponse()
                answered.withLock { $0 += 1 }
            }
        }
        usleep(500_000)  // the guesses are in (a wait of its own, not one a clock could stand for)
        #expect(answered.withLock { $0 } < 12, "the guesses wait to be answered")
        let began = monotonicNanoseconds()
        let status = daemon.stop()
        let took = Double(monotonicNanoseconds() - began) / 1e9
        #expect(status == 0, "exit status \(status): \(daemon.log)")
        #expect(took < 2, "the stop took \(took) s")
        #expect(daemon.log.contains("stopped"), "\(daemon.log)")
    }
}
