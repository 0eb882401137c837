import BatonTesting
import Glibc
import HTTPServer
import OSThread
import Synchronization
import Testing

@testable import Snapcast

/// The JSON-RPC client against a real snapserver, and against answers snapserver would never give
/// (served by Baton's own HTTP server), which must be reported with the JSON path of the bad value.
@Suite(.ownThread) struct SnapcastControlTests {
    /// Reading the status and moving a stream works against the real server; an unknown group is
    /// the server's JSON-RPC error, named with the method.
    @Test func talksToARealServer() throws {
        let server = try SnapcastServer()
        defer { server.stop() }
        let control = SnapcastControl(control: server.control + "/")
        #expect(control.endpoint == server.control + "/jsonrpc")
        let status = try control.status()
        #expect(Set(status.streams.map(\.id)) == ["upstairs", "other"])
        #expect(throws: SnapcastError.self) { try control.setStream(group: "no-such-group", stream: "upstairs") }
        do throws(SnapcastError) {
            try control.setStream(group: "no-such-group", stream: "upstairs")
        } catch {
            #expect(
                error.description.hasPrefix("snapserver \(server.control)/jsonrpc: Group.SetStream: error "), "\(error)"
            )
            #expect(!error.isTransient)
        }
    }

    /// Malformed answers, HTTP errors and an absent server each give a clear, located error.
    @Test(arguments: [
        (
            200,
            #"{"id":1,"jsonrpc":"2.0","result":{"host":{}}}"#,
            "Server.GetStatus: unexpected answer: result.server: missing"
        ),
        (
            200, #"{"id":1,"jsonrpc":"2.0","result":{"server":{"groups":"none","streams":[]}}}"#,
            "Server.GetStatus: unexpected answer: result.server.groups: expected an array"
        ),
        (
            200,
            #"{"id":1,"jsonrpc":"2.0","result":{"server":{"groups":[],"streams":{"id":"s"}}}}"#,
            "Server.GetStatus: unexpected answer: result.server.streams: expected an array"
        ),
        (
            200, "not json",
            "Server.GetStatus: unexpected answer: (top level): not valid JSON (The given data was not valid JSON.)"
        ),
        (200, #"{"id":1,"jsonrpc":"2.0"}"#, "Server.GetStatus: unexpected answer: neither result nor error"),
        (
            200, #"{"id":1,"jsonrpc":"2.0","error":{"code":-32603,"message":"Internal error","data":{"why":1}}}"#,
            "Server.GetStatus: error -32603: Internal error"
        ),
        (503, "busy", "Server.GetStatus: HTTP 503: busy"),
    ])
    func reportsBadAnswers(status: Int, body: String, problem: String) throws {
        let fake = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 4096) { _ in
            HTTPResponse(
                status: status, headers: [("Content-Type", "application/json")], body: .bytes(Array(body.utf8)))
        }
        defer { fake.stop() }
        let control = SnapcastControl(control: "http://127.0.0.1:\(fake.port)")
        do throws(SnapcastError) {
            _ = try control.status()
            Issue.record("no error for \(body)")
        } catch {
            #expect(error.description == "snapserver http://127.0.0.1:\(fake.port)/jsonrpc: \(problem)")
            #expect(error.isTransient == (status >= 500))
        }
    }

    /// A hostile or broken answer of many entries that cannot be read (2,000 groups `0`) is said in
    /// four lines: the first three and how many more. Each was said: 4 MiB of them made two million
    /// sentences, joined into one problem of about 140 MB at every poll, logged and kept for the
    /// status. A server's error message is cut at 200 characters, as an HTTP error's body is.
    @Test func manyUnreadableEntriesAndALongErrorAreSaidShortly() throws {
        let groups = Array(repeating: "0", count: 2_000).joined(separator: ",")
        let long = String(repeating: "x", count: 100_000)
        let answer = Mutex(#"{"id":1,"jsonrpc":"2.0","result":{"server":{"groups":["# + groups + #"],"streams":[]}}}"#)
        let fake = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 4096) { _ in
            HTTPResponse(
                status: 200, headers: [("Content-Type", "application/json")],
                body: .bytes(Array(answer.withLock { $0 }.utf8)))
        }
        defer { fake.stop() }
        let control = SnapcastControl(control: "http://127.0.0.1:\(fake.port)")
        let status = try control.status()
        let problems = status.problems(of: ["pi1"], stream: "s")
        #expect(problems.count == 4, "\(problems.count) problems")
        #expect(
            problems.first == "result.server.groups[0]: expected an object: a group left out")
        #expect(problems.last == "1997 more of them left out")
        answer.withLock { $0 = #"{"id":1,"jsonrpc":"2.0","error":{"code":-32603,"message":""# + long + #""}}"# }
        #expect {
            try control.status()
        } throws: { error in
            let text = "\(error)"
            return text.contains("error -32603: " + String(repeating: "x", count: 190)) && text.count < 400
        }
    }

    /// A client, group or stream the server describes badly is read as far as it can be (or left
    /// out), and said where and what is taken instead; the rest of the answer stands. The whole
    /// answer was refused: one entry of someone else's stopped every zone's keeper (no regrouping,
    /// no latency, no listeners).
    @Test func aBadlyDescribedClientIsReadAsFarAsItCanBe() throws {
        func client(_ fields: String) -> String { "{\(fields)}" }
        let volume = #""volume":{"muted":false,"percent":10}"#
        let clients = [
            client(#""connected":true"#),
            client(#""id":"c","connected":true,"config":{"latency":0,"volume":{"muted":false,"percent":1.5}}"#),
            client(#""id":"d","connected":"yes","config":{"latency":3,\#(volume)}"#),
            client(#""id":"e","connected":true,"config":{"latency":0,\#(volume)}"#),
        ]
        let body =
            #"{"id":1,"jsonrpc":"2.0","result":{"server":{"groups":[{"id":"g","stream_id":"s","clients":["#
            + clients.joined(separator: ",")
            + #"]},{"id":"h","clients":[]}],"streams":[{"id":"s","status":"idle","uri":{"query":{"sampleformat":48000}}},{"id":"t","status":1}]}}}"#
        let fake = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 4096) { _ in
            HTTPResponse(status: 200, headers: [("Content-Type", "application/json")], body: .bytes(Array(body.utf8)))
        }
        defer { fake.stop() }
        let control = SnapcastControl(control: "http://127.0.0.1:\(fake.port)")
        let status = try control.status()
        #expect(status.groups[0].clients.map(\.id) == ["c", "d", "e"])
        #expect(status.client("c")?.connected == true && status.client("c")?.config == nil)
        #expect(status.client("d")?.connected == false && status.client("d")?.config?.latency == 3)
        #expect(status.client("e")?.problem == nil)
        #expect(status.streams.map(\.id) == ["s", "t"] && status.streams[0].sampleFormat == nil)
        let groupLeftOut = "result.server.groups[1].stream_id: missing: a group left out"
        let format =
            #"stream "s": result.server.streams[0].uri.query.sampleformat: expected a string: its format is not compared"#
        let leftOut = "result.server.groups[0].clients[0].id: missing: a client left out"
        #expect(
            status.problems(of: ["c", "d"], stream: "s") == [
                groupLeftOut, format, leftOut,
                #"client "c": result.server.groups[0].clients[1].config.volume.percent: a number that is not an integer (or too large): its latency is not kept"#,
                #"client "d": result.server.groups[0].clients[2].connected: expected true or false: taken as not connected"#,
            ])
        #expect(
            status.problems(of: ["e"], stream: "t") == [groupLeftOut, leftOut], "another's problems are not this zone's"
        )

        // The keeper of a zone of "e" and "d" keeps them (the group made theirs alone), tells
        // that "e" listens, and says what it could not read about them.
        let listening = Mutex<Bool?>(nil)
        let keeper = GroupKeeper(
            name: "z", zone: SnapcastZone(stream: "s", speakers: [.init(id: "e"), .init(id: "d")]), control: control,
            listeners: { who in listening.withLock { $0 = who == .heard } }
        ) { _, _ in }
        var volumesSet: Set<String> = []
        #expect(
            keeper.pollOnce(volumesSet: &volumesSet)
                == "\(groupLeftOut); \(format); \(leftOut)"
                + #"; client "d": result.server.groups[0].clients[2].connected: expected true or false: taken as not connected"#
        )
        #expect(listening.withLock { $0 } == true)
        #expect(keeper.state.connected == ["e"] && keeper.state.fixes == 1)
    }

    /// One poll of a keeper of a zone of `speaker` (set to `volume` % when it connects, if given)
    /// on `stream`, against a server whose status is `status` and which refuses every other call (a
    /// JSON-RPC error), or takes it (`refuse` false): the problem it says, what it told of who
    /// listens, and the keeper.
    static func pollOnce(
        _ status: String, speaker: String, stream: String, volume: Int? = nil, refuse: Bool = true
    ) throws -> (problem: String?, listening: [GroupKeeper.Listeners], keeper: GroupKeeper) {
        let other =
            refuse
            ? #"{"id":1,"jsonrpc":"2.0","error":{"code":-32603,"message":"Internal error"}}"#
            : #"{"id":1,"jsonrpc":"2.0","result":{}}"#
        let fake = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 4096) { request in
            let body = String(decoding: request.body, as: UTF8.self).contains("Server.GetStatus") ? status : other
            return HTTPResponse(
                status: 200, headers: [("Content-Type", "application/json")], body: .bytes(Array(body.utf8)))
        }
        defer { fake.stop() }
        let listening = Mutex<[GroupKeeper.Listeners]>([])
        let keeper = GroupKeeper(
            name: "z", zone: SnapcastZone(stream: stream, speakers: [.init(id: speaker, volumePercent: volume)]),
            control: SnapcastControl(control: "http://127.0.0.1:\(fake.port)"),
            listeners: { who in listening.withLock { $0.append(who) } }
        ) { _, _ in }
        var volumesSet: Set<String> = []
        let problem = keeper.pollOnce(volumesSet: &volumesSet)
        return (problem, listening.withLock { $0 }, keeper)
    }

    /// A speaker of the zone left in another group on another stream, while the server refuses to
    /// move it: connected, but no listener of the zone (it was counted as one for as long as the
    /// fix failed, and the zone played, available, to nobody; then, taken back after each failed
    /// fix, for a moment at every poll).
    @Test func aSpeakerLeftOnAnotherStreamIsNoListener() throws {
        let status =
            #"{"id":1,"jsonrpc":"2.0","result":{"server":{"groups":[{"id":"g","stream_id":"other","clients":[{"id":"e","connected":true,"config":{"latency":0,"volume":{"muted":false,"percent":10}}}]}],"streams":[{"id":"s","status":"idle"},{"id":"other","status":"idle"}]}}}"#
        let (problem, listening, keeper) = try Self.pollOnce(status, speaker: "e", stream: "s")
        #expect(problem?.contains("Group.SetStream: error -32603: Internal error") == true, "\(problem ?? "none")")
        // Never told as a listener, not even for the moment before the fix failed (the zone read
        // available then, at every poll), nor shown as one.
        #expect(listening == [.elsewhere])
        #expect(keeper.state.connected == [])
    }

    /// The zone's stream missing on the server, its speaker connected and playing another stream:
    /// no listener (nothing moved it — there is nowhere to move it to).
    @Test func aSpeakerOnAnotherStreamWhenTheZonesIsMissingIsNoListener() throws {
        let status =
            #"{"id":1,"jsonrpc":"2.0","result":{"server":{"groups":[{"id":"g","stream_id":"other","clients":[{"id":"e","connected":true,"config":{"latency":0,"volume":{"muted":false,"percent":10}}}]}],"streams":[{"id":"other","status":"idle"}]}}}"#
        let (problem, listening, _) = try Self.pollOnce(status, speaker: "e", stream: "s")
        #expect(problem?.contains(#"stream "s" is not configured on the server"#) == true, "\(problem ?? "none")")
        #expect(listening == [.elsewhere])
    }

    /// A speaker connected on the zone's stream but muted, at 0 %, or in a muted group (Snapweb,
    /// Home Assistant) hears nothing: told as `muted`, not as a listener. It was counted as one
    /// (`muted` was read and not used, the group's not read at all), and the zone read available.
    @Test func aMutedSpeakerIsNoListener() throws {
        func status(groupMuted: String, muted: Bool, percent: Int) -> String {
            #"{"id":1,"jsonrpc":"2.0","result":{"server":{"groups":[{"id":"g","stream_id":"s","muted":\#(groupMuted),"clients":[{"id":"e","connected":true,"config":{"latency":0,"volume":{"muted":\#(muted),"percent":\#(percent)}}}]}],"streams":[{"id":"s","status":"idle"}]}}}"#
        }
        for (group, muted, percent, want) in [
            ("true", false, 50, GroupKeeper.Listeners.muted), ("false", true, 50, .muted), ("false", false, 0, .muted),
            ("false", false, 1, .heard),
        ] {
            let (problem, listening, _) = try Self.pollOnce(
                status(groupMuted: group, muted: muted, percent: percent), speaker: "e", stream: "s")
            #expect(problem == nil, "\(problem ?? "")")
            #expect(listening == [want], "group muted \(group), muted \(muted), \(percent) %")
        }
        // A group's `muted` Baton cannot read is said, and taken as not muted.
        let (problem, listening, _) = try Self.pollOnce(
            status(groupMuted: #""yes""#, muted: false, percent: 50), speaker: "e", stream: "s")
        #expect(
            problem == #"group "g": result.server.groups[0].muted: expected true or false: taken as not muted"#,
            "\(problem ?? "none")")
        #expect(listening == [.heard])
    }

    /// A muted speaker whose configured volume Baton sets when it connects (`Client.SetVolume`
    /// unmutes) hears the zone once that is done — told once, after the call, not as muted for a
    /// poll first; the call refused, it stays muted.
    @Test func aSpeakerBatonUnmutesIsAListenerOnceUnmuted() throws {
        let status =
            #"{"id":1,"jsonrpc":"2.0","result":{"server":{"groups":[{"id":"g","stream_id":"s","muted":false,"clients":[{"id":"e","connected":true,"config":{"latency":0,"volume":{"muted":true,"percent":50}}}]}],"streams":[{"id":"s","status":"idle"}]}}}"#
        let (problem, listening, keeper) = try Self.pollOnce(
            status, speaker: "e", stream: "s", volume: 70, refuse: false)
        #expect(problem == nil && keeper.state.fixes == 1, "\(problem ?? "")")
        #expect(listening == [.heard])
        let refused = try Self.pollOnce(status, speaker: "e", stream: "s", volume: 70)
        #expect(refused.problem?.contains("Client.SetVolume") == true, "\(refused.problem ?? "none")")
        #expect(refused.listening == [.muted])
    }

    /// An answer larger than 4 MiB is an answer: the server runs (what a new connection waits for),
    /// and it is not tried again at once. It was "no answer", transient: a new connection waited,
    /// and the keeper asked every 0.1 s, 4 MiB each time.
    @Test func anAnswerTooLargeIsAnAnswer() throws {
        let huge = [UInt8](repeating: UInt8(ascii: " "), count: 5 << 20)
        let fake = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 4096) { _ in
            HTTPResponse(status: 200, headers: [("Content-Type", "application/json")], body: .bytes(huge))
        }
        defer { fake.stop() }
        do throws(SnapcastError) {
            _ = try SnapcastControl(control: "http://127.0.0.1:\(fake.port)").status()
            Issue.record("no error for 5 MiB")
        } catch {
            #expect(error.serverAnswered && !error.isTransient, "\(error)")
            #expect(error.description.contains("response too large"), "\(error)")
        }
    }

    /// No server: a transient transport error.
    @Test func reportsAnAbsentServer() throws {
        let control = SnapcastControl(control: "http://127.0.0.1:\(try FreePort.next())")
        do throws(SnapcastError) {
            _ = try control.status()
            Issue.record("no error without a server")
        } catch {
            #expect(error.isTransient)
            #expect(error.description.contains("Server.GetStatus"), "\(error)")
        }
    }

    /// The group keeper polls as often as the zone's output needs, and sleeps in between: with an
    /// output that carries audio, once per interval, its thread not running at all between polls
    /// (it used to look at the output every 0.5 s, and before that every 20 ms); when the output
    /// says its connection changed (`look()`) and a new connection waits for an answer, it polls at
    /// once, then every 0.1 s; a stop wakes it at once.
    @Test func keeperPollsAsOftenAsTheOutputNeeds() throws {
        let server = try SnapcastServer()
        defer { server.stop() }
        let need = Mutex(GroupKeeper.OutputNeed.nothing)
        let answers = Mutex<[Int]>([])
        let keeper = GroupKeeper(
            name: "upstairs", zone: SnapcastZone(stream: "upstairs", speakers: []),
            control: SnapcastControl(control: server.control), interval: .seconds(3),
            answered: { at in answers.withLock { $0.append(at) } }, output: { need.withLock { $0 } }
        ) { _, _ in }
        let before = Set(ProcessThreads.named("snapcast"))
        keeper.start()
        defer { keeper.stop() }
        let count = { answers.withLock { $0.count } }
        #expect(waitUntil(seconds: 8) { count() >= 2 })
        let tid = try #require(ProcessThreads.named("snapcast").first { !before.contains($0) }, "the keeper's thread")
        let calm = answers.withLock { $0 }
        let gap = Double(calm[1] - calm[0]) / 1e9
        #expect(gap >= 2.95, "polls one interval apart while the output carries audio (\(gap) s)")
        usleep(200_000)
        let slices = ProcessThreads.timeslices(tid)
        usleep(2_000_000)
        let asleep = ProcessThreads.timeslices(tid) - slices
        #expect(
            asleep == 0 && count() == 2,
            "the keeper's thread ran \(asleep) times between polls (looking every 0.5 s: 4)")

        // Asked just after a poll, the next is a whole interval (3 s) away: an answer within the
        // bound below is the look's, not the next poll's.
        #expect(waitUntil(seconds: 5) { count() >= 3 })
        need.withLock { $0 = .answer }
        let calmCount = count()
        let asked = monotonicNanoseconds()
        keeper.look()
        #expect(waitUntil(seconds: 5) { count() > calmCount })
        let noticed = Double(monotonicNanoseconds() - asked) / 1e9
        // Bounds well above what the keeper takes, well below its intervals (a busy machine
        // delays a real snapserver's answers).
        #expect(noticed < 1, "asked to look, it answers at once (\(noticed) s; the interval is 3 s)")
        let hurried = count()
        let t0 = monotonicNanoseconds()
        #expect(waitUntil(seconds: 5) { count() >= hurried + 5 })
        let five = Double(monotonicNanoseconds() - t0) / 1e9
        #expect(five < 2, "five polls within \(five) s while an answer is awaited")

        need.withLock { $0 = .nothing }
        let stopAt = monotonicNanoseconds()
        keeper.stop()
        let stopped = Double(monotonicNanoseconds() - stopAt) / 1e9
        #expect(stopped < 1.5, "a stop wakes the keeper at once (\(stopped) s; the interval is 3 s)")
    }

    /// What a poll tells the keeper's users when the control answers badly: any HTTP answer (an
    /// HTML page, here) counts as the server answering, which is what a new connection's audio
    /// waits for (it used to take a well-formed status, so a control that answered anything else
    /// kept the zone silent for good); without a status read, who is connected is not known (the
    /// last list stayed; then none was shown connected, as if every speaker were away).
    @Test func aBadAnswerStillCountsAsAnAnswerAndNoAnswerLeavesNoSpeakerConnected() throws {
        let mode = Mutex("good")
        let good =
            #"{"id":1,"jsonrpc":"2.0","result":{"server":{"groups":[{"id":"g","stream_id":"upstairs","clients":[{"id":"pi1","connected":true,"config":{"latency":0,"volume":{"muted":false,"percent":100}}}]}],"streams":[{"id":"upstairs","status":"idle"}]}}}"#
        let fake = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 4096) { _ in
            let body = mode.withLock { $0 } == "good" ? good : "<html>hello"
            return HTTPResponse(status: 200, headers: [("Content-Type", "text/html")], body: .bytes(Array(body.utf8)))
        }
        let port = fake.port
        let answers = Mutex(0)
        let keeper = GroupKeeper(
            name: "upstairs",
            zone: SnapcastZone(
                stream: "upstairs", speakers: [.init(id: "pi1", volumePercent: nil, latencyMilliseconds: nil)]),
            control: SnapcastControl(control: "http://127.0.0.1:\(port)"),
            answered: { _ in answers.withLock { $0 += 1 } }
        ) { _, _ in }
        var volumes: Set<String> = []
        #expect(keeper.pollOnce(volumesSet: &volumes) == nil)
        #expect(keeper.state.connected == ["pi1"] && answers.withLock { $0 } == 1)
        mode.withLock { $0 = "garbage" }
        let garbled = keeper.pollOnce(volumesSet: &volumes) ?? ""
        #expect(garbled.contains("not valid JSON"), "\(garbled)")
        #expect(answers.withLock { $0 } == 2, "an answer, if not a good one")
        #expect(
            keeper.state.connected == nil, "no evidence of a speaker: \(String(describing: keeper.state.connected))")
        fake.stop()
        let gone = keeper.pollOnce(volumesSet: &volumes) ?? ""
        #expect(gone.contains("Server.GetStatus"), "\(gone)")
        #expect(answers.withLock { $0 } == 2, "no answer")
        #expect(keeper.state.connected == nil, "\(String(describing: keeper.state.connected))")
    }

    /// Keepers waiting on a server that never answers stop at once, together: the call they
    /// waited in ran to its 3 s timeout, one keeper after another — two zones past systemd's 5 s
    /// for the whole stop (batond killed: no fade-out, no last save).
    @Test func keepersWaitingOnAHungServerStopAtOnce() throws {
        let hung = try HeldHTTPServer()
        defer { hung.close() }
        let zone = SnapcastZone(stream: "s", speakers: [.init(id: "pi1", volumePercent: nil, latencyMilliseconds: nil)])
        let keepers = (0..<2).map { k in
            GroupKeeper(name: "z\(k)", zone: zone, control: SnapcastControl(control: hung.url)) { _, _ in }
        }
        for keeper in keepers { keeper.start() }
        #expect(waitUntil(seconds: 5, every: 0.01) { hung.holding("jsonrpc") == 2 }, "both wait on the server")
        let stopAt = monotonicNanoseconds()
        for keeper in keepers { keeper.askToStop() }
        for keeper in keepers { keeper.stop() }
        let stopped = Double(monotonicNanoseconds() - stopAt) / 1e9
        #expect(stopped < 1.5, "stopped in \(stopped) s (a call's timeout is 3 s)")
    }

    /// A server that never answers is one problem, told once: libcurl's text carries the time it
    /// waited ("after 201 milliseconds"), and each poll was told as a new problem — a warning
    /// every poll for as long as the server hung.
    @Test func aHungServerIsToldOnce() throws {
        let hung = try HeldHTTPServer()
        defer { hung.close() }
        let warnings = Mutex<[String]>([])
        let keeper = GroupKeeper(
            name: "z",
            zone: SnapcastZone(stream: "s", speakers: [.init(id: "pi1", volumePercent: nil, latencyMilliseconds: nil)]),
            control: SnapcastControl(control: hung.url, timeout: .milliseconds(200)), interval: .milliseconds(50)
        ) { isError, message in if isError { warnings.withLock { $0.append(message) } } }
        keeper.start()
        #expect(waitUntil(seconds: 10, every: 0.01) { hung.count("jsonrpc") >= 10 }, "ten polls")
        keeper.stop()
        #expect(warnings.withLock { $0 }.count == 1, "\(warnings.withLock { $0 })")
        // Only the time waited is left out: another speaker, another status, is another problem.
        #expect(
            GroupKeeper.shape("Operation timed out after 3001 milliseconds")
                == GroupKeeper.shape("Operation timed out after 2999 milliseconds"))
        #expect(
            GroupKeeper.shape("speaker \"pi1\" has never connected")
                != GroupKeeper.shape("speaker \"pi2\" has never connected"))
        #expect(GroupKeeper.shape("HTTP 401") != GroupKeeper.shape("HTTP 500"))
    }

    /// A speaker configured at 500 ms on a server whose own buffer is 400 ms: the server holds the
    /// latency to 400 and says so in its answer. The keeper asks once, and says what to set,
    /// not again while the server reads 400 ms for it. It asked every poll (a log line each time,
    /// every 2 s for ever), and the status said no problem.
    @Test func aLatencyTheServerHoldsLowerIsAskedOnceAndSaid() throws {
        let status =
            #"{"id":1,"jsonrpc":"2.0","result":{"server":{"groups":[{"id":"g","stream_id":"s","clients":[{"id":"pi1","connected":true,"config":{"latency":400,"volume":{"muted":false,"percent":50}}}]}],"streams":[{"id":"s","status":"idle"}]}}}"#
        let latencyCalls = Mutex(0)
        let fake = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 4096) { request in
            let text = String(decoding: request.body, as: UTF8.self)
            if text.contains("Client.SetLatency") { latencyCalls.withLock { $0 += 1 } }
            let body =
                text.contains("Server.GetStatus") ? status : #"{"id":1,"jsonrpc":"2.0","result":{"latency":400}}"#
            return HTTPResponse(
                status: 200, headers: [("Content-Type", "application/json")], body: .bytes(Array(body.utf8)))
        }
        defer { fake.stop() }
        let keeper = GroupKeeper(
            name: "z", zone: SnapcastZone(stream: "s", speakers: [.init(id: "pi1", latencyMilliseconds: 500)]),
            control: SnapcastControl(control: "http://127.0.0.1:\(fake.port)")
        ) { _, _ in }
        var volumesSet: Set<String> = []
        let said = SnapcastZone.latencyHeld("pi1", asked: 500, held: 400)
        #expect(said.contains("plays 400 ms earlier, not the 500 ms asked"), "\(said)")
        #expect(keeper.pollOnce(volumesSet: &volumesSet) == said)
        #expect(keeper.pollOnce(volumesSet: &volumesSet) == said)
        #expect(latencyCalls.withLock { $0 } == 1)
        #expect(keeper.state.fixes == 1 && keeper.state.latenciesHeld == ["pi1": 400])
    }

    /// The same against the real snapserver (a 300 ms buffer) with a real speaker: asked 500 ms,
    /// it takes 300, and the keeper asks once.
    @Test func aRealServerHoldsALatencyToItsBuffer() throws {
        let server = try SnapcastServer(bufferMilliseconds: 300)
        defer { server.stop() }
        let speaker = try SnapcastClientTap(id: "pi1", server: server)
        defer { speaker.stop() }
        let control = SnapcastControl(control: server.control)
        try #require(
            waitUntil(seconds: 10, every: 0.02) { (try? control.status())?.client("pi1")?.connected == true },
            "the snapclient did not connect")
        let fixes = Mutex<[String]>([])
        let keeper = GroupKeeper(
            name: "z",
            zone: SnapcastZone(stream: server.stream, speakers: [.init(id: "pi1", latencyMilliseconds: 500)]),
            control: control
        ) { isError, message in if !isError { fixes.withLock { $0.append(message) } } }
        var volumesSet: Set<String> = []
        let said = SnapcastZone.latencyHeld("pi1", asked: 500, held: 300)
        #expect(keeper.pollOnce(volumesSet: &volumesSet) == said)
        #expect(keeper.pollOnce(volumesSet: &volumesSet) == said)
        let latencies = fixes.withLock { $0 }.filter { $0.contains("SetLatency") }
        #expect(latencies == ["zone z: snapcast: Client.SetLatency pi1 500 ms"])
        #expect((try? control.status())?.client("pi1")?.config?.latency == 300)
    }

    /// A poll whose status read answers, and whose fix then gets no answer (the server drops
    /// the connection on `Group.SetStream`), tells that the server answered: a new connection
    /// carries audio. Only the fix's error was looked at, so a new connection waited, and the zone
    /// read unavailable "waiting for its JSON-RPC to answer" while it answered.
    @Test func aStatusReadIsAnAnswerWhenAFixAfterItGetsNone() throws {
        let status =
            #"{"id":1,"jsonrpc":"2.0","result":{"server":{"groups":[{"id":"g","stream_id":"other","clients":[{"id":"pi1","connected":true,"config":{"latency":0,"volume":{"muted":false,"percent":50}}}]}],"streams":[{"id":"s","status":"idle"},{"id":"other","status":"idle"}]}}}"#
        let listener = try Listener()
        let fd = listener.fd
        let server = OSThread.start(name: "dropping-rpc") {
            while true {
                let client = accept(fd, nil, nil)
                guard client >= 0 else { return }
                var request: [UInt8] = []
                var chunk = [UInt8](repeating: 0, count: 4096)
                // The head, then the body its Content-Length says.
                while true {
                    let n = recv(client, &chunk, chunk.count, 0)
                    guard n > 0 else { break }
                    request += chunk[..<n]
                    let text = String(decoding: request, as: UTF8.self)
                    guard let end = text.firstRange(of: "\r\n\r\n"),
                        let length = text.firstMatch(of: #/[Cc]ontent-[Ll]ength: (\d+)/#).flatMap({ Int($0.1) })
                    else { continue }
                    if text.utf8.count - text.utf8.distance(from: text.startIndex, to: end.upperBound) >= length {
                        break
                    }
                }
                if String(decoding: request, as: UTF8.self).contains("Server.GetStatus") {
                    let answer =
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(status.utf8.count)\r\nConnection: close\r\n\r\n\(status)"
                    _ = answer.withCString { send(client, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
                }
                close(client)  // anything else: dropped unanswered
            }
        }
        defer {
            shutdown(fd, Int32(SHUT_RDWR))  // its accept ends
            server.join()
            close(fd)
        }
        let answers = Mutex(0)
        let keeper = GroupKeeper(
            name: "z", zone: SnapcastZone(stream: "s", speakers: [.init(id: "pi1")]),
            control: SnapcastControl(control: "http://127.0.0.1:\(listener.port)"),
            answered: { _ in answers.withLock { $0 += 1 } }
        ) { _, _ in }
        var volumesSet: Set<String> = []
        let problem = keeper.pollOnce(volumesSet: &volumesSet) ?? ""
        #expect(problem.contains("Group.SetStream"), "\(problem)")
        #expect(answers.withLock { $0 } == 1)
    }

    /// A password in the control URL stays out of what is said: it went to the log and the zone's
    /// `problem` in the status as written.
    @Test func aPasswordInTheControlURLIsNotSaid() throws {
        let error = SnapcastError(
            endpoint: "http://baton:s3cret@127.0.0.1:1780/jsonrpc", method: "Server.GetStatus", problem: "refused")
        #expect(!error.description.contains("s3cret"), "\(error)")
        #expect(error.description.contains("127.0.0.1:1780/jsonrpc"))
        #expect(!SnapcastControl.shown("http://baton:s3cret@pi:1780").contains("s3cret"))
    }
}
