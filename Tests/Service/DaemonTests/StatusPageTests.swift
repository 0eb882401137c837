import BatonTesting
import Dispatch
import FoundationEssentials
import Glibc
import HTTPServer
import OSThread
import Synchronization
import Testing

@testable import BatonDaemon
@testable import BatonService
@testable import ControlParts

/// The web app (`GET /`) rendered by a real headless browser (Debian's `chromium`), as a DOM dump:
/// the quick check; the Selenium run (`scripts/test-webapp.py`) drives it like a person.
@Suite(.ownThread) struct StatusPageTests {
    /// Whether a zone card's HTML shows `state`: as its state, or as the last one it said before
    /// batond stopped answering (the dump is taken once the server is gone).
    static func said(_ card: String, _ state: String) -> Bool {
        card.contains("data-state=\"\(state)\"") || card.contains("data-was=\"\(state)\"")
    }

    static let chromium = "/usr/bin/chromium"

    /// With looping music in the kitchen and a bell announced while the page is open, the rendered page
    /// shows the bell among the other sources as `playing`, the kitchen's music as interrupted by the
    /// bell (in words), a `granted` line for the bell in `#events`, and a timeline bar for the bell.
    @Test func showsAnAnnouncementInterruptingMusic() throws {
        try #require(
            access(Self.chromium, X_OK) == 0,
            "\(Self.chromium) is missing: scripts/install-deps.sh --test installs Debian's chromium")
        // The rig's null PCM: this test needs no output files, and the numbered file PCMs are counted.
        let t = try TestDaemon(zones: [("kitchen", 44_100, "baton_null"), ("patio", 48_000, "baton_null")])
        defer { t.stop() }
        try #require(waitUntil { t.daemon.status().zones.allSatisfy { $0.state == "available" } }, "zones never opened")
        // A bell of 8 s, not `bell1k`'s 0.5: the page must fetch a status while it plays, and a
        // browser on a loaded machine took longer than half a second for that, and once (in the
        // parallel suite of a fresh clone, 2026-12-04) longer than the 3 s the bell had then.
        WAVWriter.write(
            Signals.sine(frequency: 1000, rate: 48_000, frames: 384_000, channels: 2, amplitude: 0.5),
            rate: 48_000, channels: 2, to: "\(t.sounds)/bell8s.wav")
        let music = try #require(
            try t.json(
                "POST", "/api/v1/music/play",
                #"{"sound": "music440", "zones": ["kitchen"], "loop": true}"#
            ).object["id"])
        let page = try OpenPage(t)
        defer { page.close() }
        let answered = page.answered

        let before = answered.count
        let bell = try #require(
            try t.json("POST", "/api/v1/announce", #"{"sound": "bell8s", "zones": ["kitchen"]}"#).object["id"])
        // Each event the page receives makes it fetch the status: wait for one answered with the bell
        // playing (the bell is `starting` at its grant and `playing` from its `audible` event, when its
        // first frame is heard), give the page a moment to render, then stop.
        let fetched = waitUntil(seconds: 10) {
            answered.reports.withLock {
                $0.dropFirst(before).contains { $0.sources.contains { $0.id == bell && $0.state == "playing" } }
            }
        }
        let html = try page.finish()
        let seen = answered.states(of: bell, after: before)
        try #require(
            fetched, "the page never fetched a status with the bell playing; its state in those fetched since: \(seen)")
        try #require(
            answered.reports.withLock { $0.last?.sources.contains { $0.id == bell && $0.state == "playing" } } == true,
            "the bell had ended before the page's last status fetch (the test stopped the server too late)")

        let row = try #require(
            Self.element(html, from: "<li data-source=\"\(bell)\"", to: "</li>"),
            "no row for the bell \(bell) among the other sources")
        // As the card below: once the server is gone the row says it is unknown, with its last state.
        #expect(
            row.contains("<b>playing</b>") || row.contains("unknown (it last said: playing)</b>"), "bell row: \(row)")
        let kitchen = try #require(
            Self.element(html, from: "data-zone=\"kitchen\"", to: "</article>"),
            "no kitchen zone card")
        // The dump comes once the server is gone: the card says its state is unknown, with the last
        // one (`data-was`) — or that one, if no poll failed before the dump.
        #expect(Self.said(kitchen, "interrupted"), "kitchen card: \(kitchen)")
        #expect(kitchen.contains("interrupted by bell8s (\(bell))"), "kitchen card: \(kitchen)")
        _ = music
        let events = try #require(Self.element(html, from: "<div id=\"events\"", to: "</section>"), "no #events")
        #expect(
            events.split(separator: "</div>").contains {
                $0.contains("ev-granted") && $0.contains(" granted \(bell) ")
            },
            "no granted line for the bell in #events: \(events)")
        let timeline = try #require(
            Self.element(html, from: "<svg id=\"timeline-svg\"", to: "</svg>"), "no timeline svg")
        #expect(
            timeline.contains("<rect class=\"bar\" data-source=\"\(bell)\""),
            "no timeline bar for the bell: \(timeline)")
    }

    /// Music on the virtual card and the kitchen; the card unplugged: the page's card zone says the
    /// music is not heard there (the zone is unavailable), the kitchen's that it plays. (The
    /// `unavailable` state fell through to "playing" on the page.)
    @Test func showsMusicNotHeardInAZoneThatIsUnavailable() throws {
        try #require(access(Self.chromium, X_OK) == 0, "\(Self.chromium) is missing")
        let card = ALSATestRig.makeCard(rate: 48_000, periodFrames: 480, bufferFrames: 1_920)
        let t = try TestDaemon(
            zones: [("card", 48_000, card.name), ("kitchen", 44_100, "baton_null")], deviceClocked: ["card"])
        defer { t.stop() }
        try #require(waitUntil { t.daemon.status().zones.allSatisfy { $0.state == "available" } }, "zones never opened")
        let music = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"sound": "music440", "loop": true}"#).object["id"])
        try #require(waitUntil { t.daemon.status().sources.first { $0.id == music }?.state == "playing" })
        card.send(.unplug)
        try #require(
            waitUntil {
                t.daemon.status().zones.first { $0.name == "card" }.map {
                    $0.state == "unavailable" && $0.audible.isEmpty
                } == true
            },
            "the card zone is not unavailable and silent")
        let page = try OpenPage(t)
        defer { page.close() }
        // Once the page has fetched a status (it does when its event stream opens).
        #expect(waitUntil(seconds: 10) { page.answered.count > 0 }, "the page fetched no status")
        let html = try page.finish()
        let cardZone = try #require(Self.element(html, from: "data-zone=\"card\"", to: "</article>"), "no card zone")
        #expect(cardZone.contains("not heard: the zone is unavailable"), "card zone: \(cardZone)")
        let kitchen = try #require(Self.element(html, from: "data-zone=\"kitchen\"", to: "</article>"), "no kitchen")
        #expect(Self.said(kitchen, "playing"), "kitchen: \(kitchen)")
    }

    /// The `<html>…</html>` Chromium printed, among its log lines.
    static func document(in output: String) -> String? {
        guard let start = output.firstRange(of: "<html"), let end = output.ranges(of: "</html>").last,
            start.lowerBound < end.upperBound
        else { return nil }
        return String(output[start.lowerBound..<end.upperBound])
    }

    /// The text from `start` up to the next `end` (or the end of `text`).
    static func element(_ text: String, from start: String, to end: String) -> String? {
        guard let s = text.firstRange(of: start) else { return nil }
        return String(text[s.lowerBound..<(text[s.upperBound...].firstRange(of: end)?.lowerBound ?? text.endIndex)])
    }
}

/// The status reports the page's server answered, in order.
private final class StatusLog: Sendable {
    let reports = Mutex<[StatusReport]>([])
    var count: Int { reports.withLock { $0.count } }

    /// The state of `source` in each report after the first `after` ("-" where it is not listed).
    func states(of source: String, after: Int) -> [String] {
        reports.withLock { $0.dropFirst(after).map { $0.sources.first { $0.id == source }?.state ?? "-" } }
    }
}

/// Chromium run on a background queue with `Subprocess.run`.
private final class BrowserRun: Sendable {
    private let done = DispatchSemaphore(value: 0)
    private let state = Mutex<(status: Int32, output: String)?>(nil)

    var result: (status: Int32, output: String)? { state.withLock { $0 } }

    func start(_ executable: String, _ arguments: [String]) {
        DispatchQueue.global().async {
            let r = Subprocess.run(executable, arguments, seconds: 60)
            self.state.withLock { $0 = r }
            self.done.signal()
        }
    }

    /// The result, once Chromium has ended within `seconds`.
    func wait(seconds: Double) -> (status: Int32, output: String)? {
        if result == nil { _ = done.wait(timeout: .now() + seconds) }
        return result
    }
}

/// The web app open in headless Chromium, served by a second server on the test's daemon that notes
/// every status it answers (so a test knows what the page has fetched). Chromium's virtual time
/// stands still while a request is pending, and the page's event stream always is: its DOM is dumped
/// once `finish` has stopped that server and the 3 s budget has run out.
private final class OpenPage {
    let answered = StatusLog()
    private let server: HTTPServer
    private let browser = BrowserRun()
    private let profile = TestDirectory.make("chromium")

    /// Serves the page and opens it; returns once it follows the event stream.
    init(_ t: TestDaemon) throws {
        let api = API(daemon: t.daemon)
        let answered = self.answered
        server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 4096) { request in
            let response = api.handle(request)
            if request.path == "/api/v1/status", case .bytes(let body) = response.body,
                let report = try? JSONDecoder().decode(StatusReport.self, from: Data(body))
            {
                answered.reports.withLock { $0.append(report) }
            }
            return response
        }
        browser.start(
            StatusPageTests.chromium,
            [
                "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=\(profile)",
                "--virtual-time-budget=3000", "--dump-dom", "http://127.0.0.1:\(server.port)/",
            ])
        let browser = self.browser
        guard waitUntil(seconds: 30, { t.daemon.events.subscriberCount == 1 || browser.result != nil }),
            browser.result == nil
        else {
            close()
            throw TestSetupError(message: "the page never opened the event stream: \(browser.result?.output ?? "")")
        }
    }

    /// Gives the page a moment to render what it fetched, stops its server and returns the DOM.
    func finish() throws -> String {
        usleep(150_000)
        server.stop()
        let result = try #require(browser.wait(seconds: 30), "chromium did not finish after the server stopped")
        return try #require(
            StatusPageTests.document(in: result.output), "no DOM dumped (exit \(result.status)): \(result.output)")
    }

    /// Stops the server, waits for Chromium, removes its profile (Chromium is done before it goes).
    func close() {
        server.stop()
        _ = browser.wait(seconds: 30)
        _ = Subprocess.run("/bin/rm", ["-rf", profile])
    }
}
