/// `reload`, `sounds` and `config`.
enum InfoCommands {
    static let reload = Command(
        name: "reload", synopsis: "",
        summary: "make batond re-read its configuration file",
        details:
            "Sends `POST /api/v1/reload`. batond checks the file first; an invalid file is refused and the running configuration stays.",
        options: [.flag("json", "print batond's JSON answer as is")],
        run: { invocation throws(Failure) in
            let body = try invocation.client.post("/api/v1/reload")
            if invocation.printRaw(body) { return }
            let text = String(decoding: body, as: UTF8.self).trimmed
            Console.out(text.isEmpty || text == "{}" ? "reloaded" : text)
        })

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
