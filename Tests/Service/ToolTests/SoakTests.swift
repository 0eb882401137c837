import BatonTesting
import FoundationEssentials
import Glibc
import OSThread
import Testing

/// The soak (scripts/soak.sh runs it for 30 minutes and more; the suite for 2): the real batond with
/// two zones on virtual sound cards (`clock: device`: the card paces the zone, underruns when fed
/// late) while stress-ng loads every core; looping music, an announcement every 10 s, an RTP call
/// from ffmpeg every 2 minutes, a config reload every 30 s. The truth harness records every event
/// and a status sample every period; each is judged against what the cards played.
///
/// Passes when: no xrun (the card's own record and batond's count) and no late cycle — except where
/// a witness accounts for it (`StallWitness`: the host took the VM's CPU, the card's own write of
/// its record held batond's output thread, or the machine held the harness's own SCHED_FIFO thread
/// above batond's, each at least 20 ms just before it) — those are named in the summary; every
/// state sample of every zone checked, none further than a period + ramp from the audio; every
/// event on its frame; at least the scheduled interruptions, calls and reloads, each call heard;
/// anonymous memory growth under 1 MiB after the warm-up; rendering ahead, no `render-ahead-off`
/// (the cards take back: an xrun is never taken for a refusal).
///
/// Environment: BATON_SOAK_MINUTES (2), BATON_SOAK_BATOND (the debug build's batond),
/// BATON_SOAK_FIFO=0 to run batond without CAP_SYS_NICE (no SCHED_FIFO), BATON_SOAK_STRESS=0 to
/// leave stress-ng out, BATON_SOAK_RENDER_AHEAD=1 for zones with a 120 ms buffer that render ahead
/// (`render-ahead: true`, docs/CONFIG.md).
@Suite(.ownThread) struct SoakTests {
    static func env(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }

    @Test func twoMinuteSoak() throws {
        let soak = Soak(
            batond: Self.env("BATON_SOAK_BATOND") ?? Subprocess.buildDirectory + "/batond",
            minutes: Double(Self.env("BATON_SOAK_MINUTES") ?? "") ?? 2,
            fifo: Self.env("BATON_SOAK_FIFO") != "0", stress: Self.env("BATON_SOAK_STRESS") != "0",
            renderAhead: Self.env("BATON_SOAK_RENDER_AHEAD") == "1")
        let result = try soak.run()
        print(result.summary)
        for p in result.problems { print("FAIL: \(p)") }
        #expect(result.problems.isEmpty, "\(result.summary)\n\(result.problems.joined(separator: "\n"))")
    }
}

/// One soak run (see ``SoakTests``).
struct Soak {
    var batond: String
    var minutes: Double
    var fifo: Bool
    var stress: Bool
    var renderAhead = false

    struct Result {
        var summary: String
        var problems: [String]
    }

    func monotonic() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// The process's resident memory in KiB: anonymous (heap, rings, stacks: what a leak grows)
    /// and file-backed (the executable's and libraries' pages, resident once first used).
    struct Resident {
        let anonymous: Int
        let file: Int
        var total: Int { anonymous + file }

        init(_ pid: pid_t) {
            let kib = ProcessStatus.kib(of: pid)
            anonymous = kib["RssAnon"] ?? 0
            file = (kib["RssFile"] ?? 0) + (kib["RssShmem"] ?? 0)
        }
    }

    /// The major page faults (a page read from disk: what stalls a real-time thread) so far, per
    /// thread of the process, by thread id, with the thread's name; id 0: the whole process's,
    /// threads that ended included.
    func majorFaults(_ pid: pid_t) -> [Int: (name: String, faults: Int)] {
        var out: [Int: (name: String, faults: Int)] = [:]
        out[0] = ("", faultsField(of: "/proc/\(pid)/stat").faults)
        for tid in ProcessThreads.ids(process: "\(pid)") where tid > 0 {
            out[tid] = faultsField(of: "/proc/\(pid)/task/\(tid)/stat")
        }
        return out
    }

    /// The name and major faults (field 12) of a `stat` file.
    func faultsField(of path: String) -> (name: String, faults: Int) {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        guard let open = text.firstIndex(of: "("), let close = text.lastIndex(of: ")") else { return ("", 0) }
        let fields = text[text.index(after: close)...].split(separator: " ")
        return (String(text[text.index(after: open)..<close]), fields.count > 9 ? Int(fields[9]) ?? 0 : 0)
    }

    /// The major faults since `before`, as "thread N" for each thread that had any; `seen`: the
    /// threads' counts read along the way, so that a thread that ended since is named too.
    func majorFaultsSince(
        _ before: [Int: (name: String, faults: Int)], _ pid: pid_t, seen: [Int: (name: String, faults: Int)] = [:]
    ) -> (total: Int, threads: String) {
        let now = seen.merging(majorFaults(pid)) { _, latest in latest }
        let new = now.compactMap { id, t -> (String, Int)? in
            let n = t.faults - (before[id]?.faults ?? 0)
            return id > 0 && n > 0 ? (t.name, n) : nil
        }.sorted { $0.0 < $1.0 }
        let total = (now[0]?.faults ?? 0) - (before[0]?.faults ?? 0)
        return (total, new.map { "\($0.0) \($0.1)" }.joined(separator: ", "))
    }

    func tenths(_ x: Double) -> String { Stalls.tenths(x) }

    func run() throws -> Result {
        let duration = minutes * 60
        let dir = TestDirectory.make("soak")
        let sounds = dir + "/sounds"
        mkdir(sounds, 0o755)
        WAVWriter.write(
            Signals.sine(frequency: 440, rate: 48_000, frames: 48_000, channels: 1, amplitude: 0.3), rate: 48_000,
            channels: 1, to: sounds + "/music.wav")
        WAVWriter.write(
            Signals.sine(frequency: 1500, rate: 48_000, frames: 28_800, channels: 1, amplitude: 0.5), rate: 48_000,
            channels: 1, to: sounds + "/bell.wav")
        // Rendering ahead: a 120 ms buffer kept full, woken when 30 ms are left.
        let periods = renderAhead ? 12 : 4
        let kitchen = ALSATestRig.makeCard(rate: 44_100, periodFrames: 441, bufferFrames: 441 * periods)
        let patio = ALSATestRig.makeCard(rate: 48_000, periodFrames: 480, bufferFrames: 480 * periods)
        let timing = renderAhead ? ", buffer: 120ms, render-ahead: true" : ""
        let api = try FreePort.next()
        let rtp = try FreePort.next(kind: Int32(SOCK_DGRAM.rawValue))
        let configPath = dir + "/baton.yaml"
        func writeConfig(coalesce: String) {
            let text = """
                api: {listen: 127.0.0.1:\(api)}
                zones:
                  kitchen: {pcm: "\(kitchen.name)", rate: 44100, channels: 2, clock: device\(timing)}
                  patio: {pcm: "\(patio.name)", rate: 48000, channels: 2, clock: device\(timing)}
                alsa-config: \(ALSATestRig.directory)/asound.conf
                sounds: \(sounds)
                intercom: {rtp: {listen: 127.0.0.1:\(rtp), zones: [all], silence-timeout: 1s}}
                policy:
                  classes:
                    music:        {priority: 10, kind: permanent, same: replace, resume-within: 5m}
                    announcement: {priority: 50, kind: transient, lower: interrupt, same: queue, during-higher: queue, coalesce: \(coalesce), ttl: 30s, queue-limit: 16}
                    call:         {priority: 90, kind: transient, lower: interrupt, same: reject, during-higher: reject}

                """
            let f = fopen(configPath, "w")!
            fputs(text, f)
            fclose(f)
        }
        writeConfig(coalesce: "3s")
        let log = dir + "/batond.log"
        let daemon =
            fifo
            ? try BackgroundProcess(batond, ["--config", configPath], outputPath: log)
            : try BackgroundProcess(
                "/usr/bin/setpriv",
                ["--inh-caps=-sys_nice", "--bounding-set=-sys_nice", batond, "--config", configPath],
                outputPath: log)
        defer { _ = daemon.stop() }
        func post(_ path: String, _ body: String) -> Int {
            guard let c = try? RawClient(port: api) else { return 0 }
            c.send(
                "POST \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\n"
                    + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)")
            return (try? c.readResponse().status) ?? 0
        }
        func status() -> TruthRecorder.Sample? { TruthRecorder.status(port: api) }
        /// The zones' slot rings in memory, in KiB (0 when the API does not answer).
        func ringKiB() -> Int { (status()?.zones.reduce(0) { $0 + $1.ringBytes } ?? 0) / 1_024 }
        guard waitUntil(seconds: 15, { status()?.zones.allSatisfy { $0.state == "available" } == true }) else {
            return Result(summary: "batond did not start", problems: ["batond did not start: \(daemon.output)"])
        }
        let realtime =
            (try? RawClient(port: api)).flatMap { c -> Bool? in
                c.send("GET /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                return (try? c.readResponse())?.text.contains("\"realtime\":true")
            } ?? false
        let load: BackgroundProcess? =
            stress && access("/usr/bin/stress-ng", X_OK) == 0
            ? try BackgroundProcess(
                "/usr/bin/stress-ng", ["--cpu", "2", "--timeout", "\(Int(duration) + 5)s", "--quiet"],
                outputPath: dir + "/stress.log") : nil
        defer { _ = load?.stop() }

        let witness = StallWitness()
        witness.start()
        let recorder = TruthRecorder(port: api, intervalMilliseconds: 10)
        recorder.start()
        var problems: [String] = []
        if post("/api/v1/music/play", #"{"sound": "music", "loop": true}"#) != 202 {
            problems.append("music/play failed")
        }
        let start = monotonic()
        let seconds = { monotonic() - start }
        let warmup = min(60, duration / 4)
        var nextBell = 5.0
        var nextCall = 30.0
        var nextReload = 15.0
        var reloads = 0
        var calls: [BackgroundProcess] = []
        var rssAfterWarmup: Resident?
        var ringsAfterWarmup = 0
        var stealAfterWarmup = HostSteal.now()
        var faultsAfterWarmup: [Int: (name: String, faults: Int)] = [:]
        var faultsSeen: [Int: (name: String, faults: Int)] = [:]
        var nextFaultReading = 0.0
        while seconds() < duration {
            let now = seconds()
            if now >= nextBell {
                _ = post("/api/v1/announce", #"{"sound": "bell"}"#)
                nextBell += 10
            }
            if now >= nextCall {
                calls.append(
                    try BackgroundProcess(
                        "/usr/bin/ffmpeg",
                        [
                            "-hide_banner", "-loglevel", "error", "-nostdin", "-re", "-f", "lavfi", "-i",
                            "sine=frequency=880:sample_rate=48000:duration=3", "-c:a", "libopus", "-b:a", "64k", "-f",
                            "rtp", "rtp://127.0.0.1:\(rtp)",
                        ], outputPath: dir + "/call\(calls.count).log"))
                nextCall += 120
            }
            if now >= nextReload {
                reloads += 1
                writeConfig(coalesce: reloads % 2 == 0 ? "3s" : "2s")  // a policy change each time
                kill(daemon.pid, SIGHUP)
                nextReload += 30
            }
            if rssAfterWarmup == nil && now >= warmup {
                rssAfterWarmup = Resident(daemon.pid)
                ringsAfterWarmup = ringKiB()
                stealAfterWarmup = HostSteal.now()
                faultsAfterWarmup = majorFaults(daemon.pid)
            }
            // Each thread's count once a second: one that ends before the run does is still named.
            if rssAfterWarmup != nil && now >= nextFaultReading {
                faultsSeen.merge(majorFaults(daemon.pid)) { _, latest in latest }
                nextFaultReading = now + 1
            }
            usleep(50_000)
        }
        for c in calls { _ = c.wait(seconds: 10) }
        usleep(300_000)
        let rssEnd = Resident(daemon.pid)
        let ringsEnd = ringKiB()
        let steal = HostSteal.now() - stealAfterWarmup
        let faults = majorFaultsSince(faultsAfterWarmup, daemon.pid, seen: faultsSeen)
        let recording = recorder.stop()
        let stalls = witness.stop()
        let final = status()
        _ = daemon.stop()

        // What the cards played: the left channel, frame n = the zone's frame n while no xrun.
        func left(_ card: TestCard) -> [Float] {
            let bytes = card.recordedBytes()
            return bytes.withUnsafeBytes { raw in
                let s = raw.bindMemory(to: Int16.self)
                return stride(from: 0, to: s.count - 1, by: 2).map { Float(s[$0]) / 32_768 }
            }
        }
        // Tones far enough apart for one-period windows (100 Hz bins at 44.1 kHz): 440, 880, 1500.
        let judge = TruthJudge(tones: ["music": 440, "announcement": 1500, "call": 880])
        let verdict = judge.judge(
            recording,
            zones: [
                .init(name: "kitchen", rate: 44_100, periodFrames: 441, rampFrames: 441, left: left(kitchen)),
                .init(name: "patio", rate: 48_000, periodFrames: 480, rampFrames: 480, left: left(patio)),
            ])

        let events = recording.events
        let xruns = final?.zones.map(\.xruns).reduce(0, +) ?? -1
        let late = final?.zones.map(\.lateCycles).reduce(0, +) ?? -1
        // Each underrun the cards recorded and each late cycle (between the two status samples whose
        // counts differ), judged by the witnesses' one rule (`StallWitness`). Each card's sidecar
        // (a line a period: 180 000 in 30 minutes) is read once.
        let sidecars = [("kitchen", kitchen.events()), ("patio", patio.events())]
        let judged = sidecars.flatMap { stalls.underruns(in: $1, name: $0) }
        let cardXruns = judged.count
        var excused = judged.filter(\.excused).map(\.text)
        var unexcused = judged.filter { !$0.excused }.map(\.text)
        let slowest = sidecars.map { Stalls.slowestWrite(in: $1) }.max() ?? 0
        var lateLocated = 0
        for name in ["kitchen", "patio"] {
            var previous: TruthRecorder.Sample?
            for sample in recording.samples {
                defer { previous = sample }
                guard let before = previous, let was = before.zones.first(where: { $0.name == name }),
                    let now = sample.zones.first(where: { $0.name == name }), now.lateCycles > was.lateCycles,
                    let from = before.takenAt, let to = sample.takenAt
                else { continue }
                lateLocated += now.lateCycles - was.lateCycles
                let j = stalls.judge(
                    "\(name) late cycle at uptime \(tenths(Double(sample.uptimeMs) / 1000)) s", from: from, to: to)
                if j.excused { excused.append(j.text) } else { unexcused.append(j.text) }
            }
        }
        if xruns != cardXruns || !unexcused.isEmpty || lateLocated < late {
            problems.append(
                "\(xruns) xruns (the cards saw \(cardXruns)), \(late) late cycles (\(lateLocated) found between "
                    + "status samples); not while the host took the CPU: "
                    + (unexcused.isEmpty ? "none" : unexcused.joined(separator: "; ")))
        }
        // A leak grows anonymous memory. File-backed pages grow too after the warm-up, by code first
        // run then (a reload's, a call's paths): bounded by the binaries, reported, not judged
        // (with both together the warm-up's own growth nearly reached the limit: +1 012 KiB in 30 min).
        // A slot ring is paged in when its slot is first used (a call over a bell): the daemon
        // reports those bytes, and they are not a leak.
        func signed(_ kib: Int) -> String { (kib >= 0 ? "+" : "") + "\(kib)" }
        let warm = rssAfterWarmup ?? rssEnd
        let ringGrowth = ringsEnd - ringsAfterWarmup
        let growth = rssEnd.anonymous - warm.anonymous - ringGrowth
        let fileGrowth = signed(rssEnd.file - warm.file)
        if growth >= 1_024 {
            problems.append(
                "anonymous memory grew by \(growth) KiB after the warm-up (besides \(ringGrowth) KiB of rings)")
        }
        let zoneSamples = recording.samples.count * 2
        if verdict.samplesChecked + verdict.samplesSkipped != zoneSamples || verdict.samplesSkipped > 20 {
            problems.append(
                "\(verdict.samplesChecked) of \(zoneSamples) zone samples checked (\(verdict.samplesSkipped) past the end)"
            )
        }
        if verdict.mismatches > 0 || verdict.eventMismatches > 0 { problems += verdict.problems }
        var open: [String: Int] = [:]
        for e in events where e.type == "interruption-began" || e.type == "interruption-ended" {
            let source = e.source ?? ""
            if e.type == "interruption-began" {
                open[source, default: 0] += 1
            } else {
                if open[source] != 1 {
                    problems.append("interruption-ended without one began: \(source) (seq \(e.seq))")
                }
                open[source] = 0
            }
        }
        if open.values.contains(where: { $0 > 0 }) {
            problems.append("began without ended: \(open.filter { $0.value > 0 })")
        }
        let interruptions = events.filter { $0.type == "interruption-began" }.count
        let expectedBells = Int((duration - 5) / 10) + 1
        // Bells during a call are rejected or queued; each one heard interrupts the music.
        if interruptions < expectedBells / 2 {
            problems.append("\(interruptions) interruptions, expected \(expectedBells / 2) at least")
        }
        // Rendering ahead on cards that take back: a take-back never taken for a refusal.
        if renderAhead, let off = events.first(where: { $0.type == "render-ahead-off" }) {
            problems.append("render-ahead turned off in \(off.zones ?? []) (seq \(off.seq))")
        }
        let reloaded = events.filter { $0.type == "reloaded" }.count
        if reloaded < reloads { problems.append("\(reloads) SIGHUPs but \(reloaded) reloaded events") }
        let expectedCalls = Int((duration - 30) / 120) + 1
        var classOf: [String: String] = [:]
        for s in recording.samples { for src in s.sources { classOf[src.id] = src.class } }
        let callIDs = Set(
            events.compactMap { e in e.type == "granted" && classOf[e.source ?? ""] == "call" ? e.source : nil })
        let heardCalls = callIDs.filter { id in
            ["kitchen", "patio"].allSatisfy { zone in
                events.contains { $0.type == "audible" && $0.source == id && $0.zoneFrames?[zone] != nil }
            }
        }
        if heardCalls.count < expectedCalls {
            problems.append(
                "\(callIDs.count) calls granted, \(heardCalls.count) heard in both zones, expected \(expectedCalls)")
        }
        let summary =
            "soak \(minutes) min (clock: device\(renderAhead ? ", render-ahead 120 ms" : ""), \(stress && load != nil ? "stress-ng --cpu 2" : "no load"), "
            + "SCHED_FIFO \(realtime ? "on" : "off")): \(verdict.summary); \(recording.samples.count) status samples "
            + "(\(recording.failedSamples) failed), \(events.count) events; \(interruptions) interruptions, "
            + "\(heardCalls.count) calls heard, \(reloads) reloads; RSS \(warm.total) KiB after warm-up → "
            + "\(rssEnd.total) KiB (anonymous \(signed(growth)) besides slot rings paged in \(signed(ringGrowth)), file-backed \(fileGrowth) KiB); xruns \(xruns) (cards \(cardXruns)), late cycles \(late)"
        let machine =
            "; after the warm-up the hypervisor stole \(tenths(steal)) s of CPU, batond had \(faults.total) major faults"
            + (faults.threads.isEmpty ? "" : " (\(faults.threads))")
            + ", the cards' slowest own write \(slowest) ms, "
            + stalls.canarySummary
            + (excused.isEmpty
                ? ""
                : "; while the host took >= 20 ms of the VM's CPU, a card's own write took >= 20 ms or the "
                    + "machine held the harness's real-time canary >= 20 ms (not counted): "
                    + excused.joined(separator: "; "))
            // In the summary too: a CI log may keep this line and cut the failures after it.
            + (unexcused.isEmpty ? "" : "; counted: " + unexcused.joined(separator: "; "))
        return Result(summary: summary + machine, problems: problems)
    }
}
