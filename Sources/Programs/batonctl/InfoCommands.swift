/// `reload`, `sounds` and `config`.
enum InfoCommands {
    static let reload = Command(
        name: "reload", synopsis: "[--json]",
        summary: "make batond re-read its configuration file",
        details: """
            Sends `POST /api/v1/reload`. batond checks the file first; an invalid file is refused (its
            errors are printed, one per line, exit 1) and the running configuration stays. A reload
            applied prints `reloaded`, then the zones added, removed and changed (reopened: what played
            there stopped), the top-level sections of the file that differ from the ones running
            (`none`: the file changed nothing), and the settings that need a restart of batond to take
            effect.
            """,
        options: [.flag("json", "print batond's JSON answer (its reload report) as is")],
        run: { invocation throws(Failure) in
            // 422: refused, with the same report (its errors) as a reload applied.
            let (status, body) = try invocation.client.post(
                "/api/v1/reload", [String: String](), alsoAccepting: [422])
            let refused = "batond refused the configuration; the running one stays"
            if invocation.printRaw(body) {
                if status == 422 { throw .failed(refused) }
                return
            }
            let report = try invocation.client.decode(ReloadReport.self, body, what: "/api/v1/reload")
            guard report.applied && status != 422 else {
                let errors = report.errors ?? []
                throw .failed(
                    refused + (errors.isEmpty ? "" : ":\n" + errors.map { "  " + $0 }.joined(separator: "\n")))
            }
            Console.out(report.lines.joined(separator: "\n"))
        })

    /// batond's answer to a reload (`ReloadReport` in Sources/Control): the fields batonctl shows.
    struct ReloadReport: Decodable {
        var applied: Bool
        var errors: [String]?
        var zonesAdded: [String]?
        var zonesRemoved: [String]?
        var zonesChanged: [String]?
        var sectionsChanged: [String]?
        var needsRestart: [String]?
        var warnings: [String]?

        /// `reloaded`, then one line per kind of change there was, and one per warning. The sections
        /// changed are said even when there are none (`none`): a reload of a group or `speech:`
        /// alone printed `reloaded` and nothing else, as of a file that changed nothing.
        var lines: [String] {
            var lines = ["reloaded"]
            let changes = [
                ("zones added", zonesAdded), ("zones removed", zonesRemoved),
                ("zones changed (reopened)", zonesChanged),
                ("sections changed", sectionsChanged.map { $0.isEmpty ? ["none"] : $0 }),
                ("restart needed for", needsRestart),
            ]
            for (what, names) in changes {
                if let names, !names.isEmpty { lines.append("\(what): \(names.joined(separator: ", "))") }
            }
            lines += (warnings ?? []).map { "warning: \($0)" }
            return lines
        }
    }

    static let sounds = Command(
        name: "sounds", synopsis: "[--json]",
        summary: "list the announcement sounds (names for `announce` and `play`)",
        options: [.flag("json", "print batond's JSON answer as is")],
        run: { invocation throws(Failure) in
            let body = try invocation.client.get("/api/v1/sounds")
            if invocation.printRaw(body) { return }
            struct Answer: Decodable { var sounds: [String] }
            let answer = try invocation.client.decode(Answer.self, body, what: "/api/v1/sounds")
            Console.out(answer.sounds.isEmpty ? "no sounds" : answer.sounds.joined(separator: "\n"))
        })

    static let config = Command(
        name: "config", synopsis: "[--json]",
        summary: "print the configuration batond runs with (YAML; secrets redacted)",
        details:
            "The effective configuration: defaults filled in, paths resolved. The YAML is itself a valid configuration file.",
        options: [.flag("json", "print batond's JSON answer as is")],
        run: { invocation throws(Failure) in
            let body = try invocation.client.get("/api/v1/config")
            if invocation.printRaw(body) { return }
            Console.out(try invocation.client.decode(JSONValue.self, body, what: "/api/v1/config").yaml())
        })
}
