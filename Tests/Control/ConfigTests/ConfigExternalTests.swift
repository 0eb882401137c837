import BatonConfig
import BatonTesting
import Testing

/// `external-sources:` (docs/CONFIG.md, docs/EXTERNAL.md).
@Suite(.ownThread) struct ConfigExternalTests {
    /// The issue's example reads as written: classes, zones, modes, each kind of control, the socket.
    @Test func readsEveryKindOfExternalSource() throws {
        let config = try load(
            minimalZone + """
                external-sources:
                  socket: /run/baton/sources.sock
                  airplay: {class: music, zones: [all], when-interrupted: drop, control: {mpris: org.mpris.MediaPlayer2.ShairportSync, bus: system}}
                  mpd: {class: music, zones: [kitchen], when-interrupted: pause, control: {mpd: 127.0.0.1:6600}}
                  cmd: {when-interrupted: pause, control: {command: {pause: "echo p", resume: "echo r"}}, idle-release: 2s}
                  radio: {class: music, when-interrupted: hold}

                """)
        let external = try #require(config.externalSources)
        #expect(external.socketPath == "/run/baton/sources.sock")
        #expect(external.sources.map(\.name) == ["airplay", "mpd", "cmd", "radio"])
        #expect(
            external.source("airplay")?.control
                == .mpris(busName: "org.mpris.MediaPlayer2.ShairportSync", systemBus: true))
        #expect(external.source("airplay")?.whenInterrupted == .drop)
        #expect(external.source("mpd")?.control == .mpd(host: "127.0.0.1", port: 6600))
        #expect(external.source("mpd")?.zones == ["kitchen"])
        #expect(external.source("cmd")?.control == .command(pause: "echo p", resume: "echo r"))
        #expect(external.source("cmd")?.idleRelease == .seconds(2))
        #expect(external.source("radio")?.whenInterrupted == .hold)
        #expect(external.source("radio")?.idleRelease == .seconds(5))
        #expect(external.source("radio")?.zones == ["all"])
    }

    /// Mistakes are reported where they are: an unknown class, zone, mode or key; pause without a
    /// control; a control of two kinds; a bad MPD address.
    @Test func reportsMistakesInExternalSources() {
        let lines =
            issueLines(
                minimalZone + """
                    external-sources:
                      a: {class: musik}
                      b: {zones: [garage]}
                      c: {when-interrupted: stop}
                      d: {when-interrupted: pause}
                      e: {control: {mpd: localhost, command: {pause: x, resume: y}}}
                      f: {control: {mpd: "127.0.0.1:x"}}
                      g: {volume: 1}
                      h: {control: {mpd: "mpd.lan:6600"}}
                      i: {control: {mpd: "010.0.0.1:6600"}}
                      k: {when-interrupted: pause, control: {mpd: "mpd.lan:6600"}}

                    """) ?? []
        #expect(lines.count == 10, "\(lines)")
        // One error a mistake: a wrong control was said twice ("pause needs a control" too).
        #expect(lines.filter { $0.contains("external-sources.k") }.count == 1, "\(lines)")
        #expect(lines.contains { $0.contains("external-sources.a.class") && $0.contains("musik") })
        #expect(lines.contains { $0.contains("external-sources.b.zones") && $0.contains("garage") })
        #expect(lines.contains { $0.contains("external-sources.c.when-interrupted") })
        #expect(lines.contains { $0.contains("external-sources.d.when-interrupted: pause needs a control") })
        #expect(lines.contains { $0.contains("external-sources.e.control: give exactly one of mpris, mpd, command") })
        #expect(lines.contains { $0.contains("external-sources.f.control.mpd: expected ADDRESS:PORT") })
        // A name (or a leading zero, which inet_pton refuses) passed, and failed at every command
        // at run time ("not an IPv4 address").
        #expect(lines.contains { $0.contains(#"external-sources.i.control.mpd: "010.0.0.1" is not an IPv4 address"#) })
        #expect(
            lines.contains {
                $0.contains(
                    #"external-sources.h.control.mpd: "mpd.lan" is not an IPv4 address or localhost: give MPD's address"#
                )
            })
        #expect(lines.contains { $0.contains("external-sources.g.volume: unknown key") })
    }

    /// An MPRIS name that is not a D-Bus bus name is said where it is written, and the control left
    /// out: `mpv` passed unsaid, and every command then failed ("Pause: Invalid argument"); a `'`
    /// broke the watcher's match rule, which reconnected every second for ever. A warning, not an
    /// error: a file that started must still start (its other zones play).
    @Test(arguments: ["mpv", "org.mpris.MediaPlayer2.mpv'", "org..mpv", ".org.mpv", "org.2mpv", "org.mpris.mpv "])
    func warnsOfAnMPRISNameThatIsNoBusName(name: String) throws {
        let configuration = try load(minimalZone + "external-sources:\n  s: {control: {mpris: \"\(name)\"}}\n")
        #expect(configuration.externalSources?.source("s")?.control == nil)
        #expect(
            configuration.warnings == [
                "test.yaml:5:24: external-sources.s.control.mpris: not a D-Bus bus name (e.g. org.mpris.MediaPlayer2.mpv): the player has no control, Baton cannot pause it"
            ],
            "\(configuration.warnings)")
    }

    /// With `when-interrupted: pause`, the warning says the source works as `hold`: without its
    /// control it is held at an interruption, and nothing said so (the file's `pause` stood).
    @Test func anMPRISNameThatIsNoBusNameSaysAPauseSourceWorksAsHold() throws {
        let configuration = try load(
            minimalZone + "external-sources:\n  s: {when-interrupted: pause, control: {mpris: mpv}}\n")
        let source = try #require(configuration.externalSources?.source("s"))
        #expect(source.control == nil)
        #expect(source.whenInterrupted == .pause)
        #expect(
            configuration.warnings == [
                "test.yaml:5:49: external-sources.s.control.mpris: not a D-Bus bus name (e.g. org.mpris.MediaPlayer2.mpv): the player has no control, Baton cannot pause it; when-interrupted: pause works as hold"
            ],
            "\(configuration.warnings)")
    }

    /// A command pair whose pause and resume are one command is a toggle (playerctl play-pause,
    /// LMS `pause` with no argument): Baton sends the pause at a stop for good, and a player the
    /// user had paused itself (which a command pair cannot see) then starts. Said at `resume`, and
    /// kept (a file that started must still start); two commands that differ are not said.
    @Test(arguments: [
        ("playerctl play-pause", "playerctl play-pause", true), ("a  b", " a b", true), ("a", "b", false),
    ])
    func warnsOfACommandPairThatIsAToggle(pause: String, resume: String, said: Bool) throws {
        let configuration = try load(
            minimalZone + "external-sources:\n  s: {control: {command: {pause: \"\(pause)\", resume: \"\(resume)\"}}}\n"
        )
        #expect(configuration.externalSources?.source("s")?.control == .command(pause: pause, resume: resume))
        let warning =
            "external-sources.s.control.command.resume: pause and resume are the same command: a toggle; Baton may start a player the user paused: give commands that only pause and only play"
        #expect(
            configuration.warnings
                == (said ? ["test.yaml:5:\(46 + pause.utf8.count): \(warning)"] : []),
            "\(configuration.warnings)")
    }

    /// Well-known names as players own them pass: dashes, underscores, digits after the first
    /// character of an element.
    @Test(arguments: ["org.mpris.MediaPlayer2.mpv", "org.mpris.MediaPlayer2.spotifyd", "a-b._c.d9"])
    func acceptsAnMPRISBusName(name: String) throws {
        let external = try #require(
            try load(minimalZone + "external-sources:\n  s: {control: {mpris: \"\(name)\"}}\n").externalSources)
        #expect(external.source("s")?.control == .mpris(busName: name, systemBus: false))
    }

    /// `bus` beside `mpd` or `command` is ignored, as it always was, with a warning at the key: it
    /// was ignored unsaid, then refused, and a file that had started then stopped batond at its
    /// next start (exit 1, which systemd does not restart).
    @Test func aBusBesideMPDIsIgnoredWithAWarning() throws {
        let configuration = try load(
            minimalZone + """
                external-sources:
                  j: {when-interrupted: pause, control: {mpd: "127.0.0.1:6600", bus: system}}
                  c: {control: {command: {pause: "mpc pause", resume: "mpc play"}, bus: 5}}

                """)
        let sources = try #require(configuration.externalSources?.sources)
        #expect(
            sources.map(\.control) == [
                .mpd(host: "127.0.0.1", port: 6600), .command(pause: "mpc pause", resume: "mpc play"),
            ])
        #expect(
            configuration.warnings == [
                "test.yaml:5:65: external-sources.j.control.bus: bus is only for mpris (the D-Bus bus its player is on): ignored beside mpd",
                "test.yaml:6:68: external-sources.c.control.bus: bus is only for mpris (the D-Bus bus its player is on): ignored beside command",
            ], "\(configuration.warnings)")
    }

    /// `socket:` with no value is absent (the default socket), as a null is for every other
    /// optional key: it was refused, "expected a string, found null".
    @Test func aNullSocketIsTheDefault() throws {
        let external = try #require(
            try load(minimalZone + "external-sources:\n  socket:\n  airplay: {}\n").externalSources)
        #expect(external.socket == nil)
        #expect(external.sources.map(\.name) == ["airplay"])
    }

    /// `batond --alsa-snippet` prints one `type baton` PCM per source, with the socket when it is not
    /// the default and the plugin line when asked.
    @Test func printsTheALSASnippet() throws {
        let config = try load(
            minimalZone + """
                external-sources:
                  socket: /tmp/s.sock
                  airplay: {class: music}

                """)
        let snippet = try #require(config.externalSources).alsaSnippet(plugin: "/x/libasound_module_pcm_baton.so")
        #expect(snippet.contains("pcm_type.baton { lib \"/x/libasound_module_pcm_baton.so\" }"))
        #expect(
            snippet.contains("pcm.baton_airplay {\n    type baton\n    source \"airplay\"\n    socket \"/tmp/s.sock\""))
    }
}
