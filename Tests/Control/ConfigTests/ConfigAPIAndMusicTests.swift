import BatonConfig
import BatonTesting
import FoundationEssentials
import Testing

@Suite(.ownThread) struct ConfigAPITests {
    /// Loopback is localhost, 127.0.0.0/8 and ::1 in any spelling; everything else reaches the network.
    @Test(arguments: [
        ("127.0.0.1", true), ("127.1.2.3", true), ("localhost", true), ("LocalHost", true), ("::1", true),
        ("0:0:0:0:0:0:0:1", true), ("0::1", true), ("0000::0001", true),
        ("0.0.0.0", false), ("192.168.1.2", false), ("128.0.0.1", false), ("::", false), ("my-pi.local", false),
        ("::ffff:127.0.0.1", false), ("1::1", false), ("fe80::1", false),
    ])
    func recognisesLoopback(host: String, isLoopback: Bool) {
        #expect(ListenAddress(host: host, port: 8470).isLoopback == isLoopback)
        #expect(APIConfig(listen: ListenAddress(host: host, port: 8470)).requiresToken == !isLoopback)
    }

    /// Listening beyond loopback without a token file is an error saying why, at the api key.
    @Test(arguments: ["0.0.0.0:8470", "192.168.1.20:80", #""[::]:8470""#])
    func requiresTokenOffLoopback(listen: String) {
        let shown = listen.replacing("\"", with: "")
        #expect(
            issueLines(minimalZone + "api:\n  listen: \(listen)\n") == [
                #"test.yaml:4:1: api: missing required key "token-file": api.listen \#(shown) is not a loopback address, so clients must send a token (anyone who can reach it could otherwise control the speakers)"#
            ])
    }

    /// The token file's path is resolved like other paths; its content is never read by the loader.
    @Test func readsTokenFile() throws {
        let api = try load(
            minimalZone + "api:\n  listen: 0.0.0.0:8470\n  token-file: secrets/api.token\n",
            file: "config/baton.yaml"
        ).api
        #expect(api.tokenFile == "config/secrets/api.token")
        #expect(api.requiresToken)
        #expect(try load(minimalZone).api.tokenFile == nil)
    }

    /// A loopback API may have a token file too.
    @Test func acceptsTokenOnLoopback() throws {
        let api = try load(minimalZone + "api:\n  token-file: /etc/baton/api.token\n").api
        #expect(api.tokenFile == "/etc/baton/api.token" && !api.requiresToken)
    }

    /// state-dir is optional and resolved against the config directory.
    @Test(arguments: [
        ("state-dir: state\n", "config/state"), ("state-dir: /var/lib/baton\n", "/var/lib/baton"),
        ("", nil),
    ])
    func resolvesStateDir(snippet: String, expected: String?) throws {
        #expect(try load(minimalZone + snippet, file: "config/baton.yaml").stateDir == expected)
    }

    /// redacted() keeps secret paths (the daemon reads them) and there are no secret values to hide.
    @Test func keepsSecretPathsWhenRedacting() throws {
        let configuration = try load(minimalZone + "api:\n  listen: 0.0.0.0:1\n  token-file: /t\n" + musicSection)
        #expect(configuration.redacted() == configuration)
        #expect(configuration.redacted().api.tokenFile == "/t")
    }
}

/// A valid music section after minimalZone (lines 4...8).
private let musicSection = """
    music:
      subsonic:
        url: http://127.0.0.1:4533
        user: baton
        password-env: SUBSONIC_PASSWORD

    """

@Suite(.ownThread) struct ConfigMusicTests {
    /// Without a music section there is no music configuration.
    @Test func leavesMusicOutWhenAbsent() throws {
        #expect(try load(minimalZone).music == nil)
        #expect(try BatonConfiguration.load(path: repositoryRoot + "/config/baton.yaml").music == nil)
    }

    /// A minimal music section gets the documented defaults.
    @Test func appliesMusicDefaults() throws {
        let music = try #require(try load(minimalZone + musicSection).music)
        #expect(
            music
                == MusicConfig(
                    subsonic: SubsonicConfig(
                        url: "http://127.0.0.1:4533", user: "baton",
                        password: .environment("SUBSONIC_PASSWORD"))))
        #expect(music.replayGain == .track && music.zones == ["all"] && music.retryLimit == .seconds(120))
        #expect(music.subsonic.format == .opus && music.subsonic.maxBitrate == 128 && music.subsonic.apiKeyFile == nil)
    }

    /// Every key is read; file paths are resolved against the config directory.
    @Test func readsEveryMusicKey() throws {
        let text =
            minimalZone + """
                groups:
                  inside: [kitchen]
                music:
                  subsonic:
                    url: https://music.example.com/navidrome
                    user: baton
                    password-file: secrets/subsonic.password
                    format: flac
                    max-bitrate: 1411
                    api-key-file: /etc/baton/subsonic.key
                  replay-gain: album
                  zones: [inside]
                  retry: {limit: 30s}

                """
        let music = try #require(try load(text, file: "config/baton.yaml").music)
        #expect(
            music
                == MusicConfig(
                    subsonic: SubsonicConfig(
                        url: "https://music.example.com/navidrome", user: "baton",
                        password: .file("config/secrets/subsonic.password"), format: .flac,
                        maxBitrate: 1411, apiKeyFile: "/etc/baton/subsonic.key"),
                    replayGain: .album, zones: ["inside"], retryLimit: .seconds(30)))
    }

    /// Subsonic URLs are http(s) with a host, optional port and path, and nothing else.
    @Test(arguments: [
        ("http://127.0.0.1:4533", true), ("https://music.example.com/navidrome", true), ("http://[::1]:4533/", true),
        ("http://my-nas", true), ("https://host:443/sub/dir", true), ("http://[::1]", true),
        ("ftp://host", false), ("http://", false), ("http://user:pw@host", false), ("http://host:0", false),
        ("http://host/path?q=1", false), ("http://host/#x", false), ("127.0.0.1:4533", false), ("https://[::1", false),
        ("http://a b", false), ("HTTP://host", false), ("http://host:", false),
    ])
    func checksURL(url: String, isValid: Bool) {
        #expect(SubsonicConfig.isValidURL(url) == isValid)
    }

    /// The scheme in upper case (`HTTP://`, as some write it: schemes are case-insensitive) is read,
    /// in lower case; the rest as written. It was refused, "not an http(s) URL".
    @Test func aSchemeInUpperCaseIsRead() throws {
        let music = try #require(
            try load(
                minimalZone + musicSection.replacing("http://127.0.0.1:4533", with: "HTTPS://NAS.example:4533/Music")
            )
            .music)
        #expect(music.subsonic.url == "https://NAS.example:4533/Music")
    }

    /// Bad music values each give one exact message.
    @Test(arguments: [
        (
            musicSection.replacing("http://127.0.0.1:4533", with: "ftp://x"),
            #"test.yaml:6:10: music.subsonic.url: "ftp://x" is not an http(s) URL (expected http://host[:port][/path], e.g. http://127.0.0.1:4533)"#
        ),
        (
            musicSection.replacing("    password-env: SUBSONIC_PASSWORD\n", with: ""),
            #"test.yaml:5:3: music.subsonic: missing required key "password-file" or "password-env" (the password itself is never written in this file)"#
        ),
        (
            musicSection + "    password-file: pw\n",
            "test.yaml:8:5: music.subsonic.password-env: password-file and password-env are both set; set exactly one"
        ),
        (
            musicSection.replacing("SUBSONIC_PASSWORD", with: "my-pass"),
            #"test.yaml:8:19: music.subsonic.password-env: "my-pass" is not an environment variable name (expected letters, digits and _, not starting with a digit)"#
        ),
        (
            musicSection.replacing("    user: baton\n", with: ""),
            #"test.yaml:5:3: music.subsonic: missing required key "user""#
        ),
        (
            musicSection + "    format: aac\n",
            #"test.yaml:9:13: music.subsonic.format: "aac" is not a supported format (expected opus, raw, mp3 or flac)"#
        ),
        (
            musicSection + "    max-bitrate: 2000\n",
            "test.yaml:9:18: music.subsonic.max-bitrate: 2000 is out of range (expected 32...1411)"
        ),
        (
            musicSection + "    passwd: x\n",
            "test.yaml:9:5: music.subsonic.passwd: unknown key (expected one of: url, user, password-file, password-env, format, max-bitrate, api-key-file)"
        ),
        (
            musicSection + "  replay-gain: on\n",
            #"test.yaml:9:16: music.replay-gain: "on" is not a supported replay-gain mode (expected off, track or album)"#
        ),
        (
            musicSection + "  zones: [kitchn]\n",
            #"test.yaml:9:11: music.zones: unknown zone or group "kitchn"; did you mean "kitchen"?"#
        ),
        (
            musicSection + "  zones: [garage]\n",
            #"test.yaml:9:11: music.zones: unknown zone or group "garage" (expected one of: all, kitchen)"#
        ),
        (musicSection + "  zones: []\n", "test.yaml:9:10: music.zones: at least one zone or group is required"),
        (musicSection + "  zones: all\n", "test.yaml:9:10: music.zones: expected a sequence, found a scalar"),
        (
            musicSection + "  retry: {limit: 2d}\n",
            #"test.yaml:9:18: music.retry.limit: "2d" is not a duration (expected e.g. 500us, 10ms, 1.5s, 5m or 1h)"#
        ),
        (
            musicSection + "  retry: {limit: 90m}\n",
            "test.yaml:9:18: music.retry.limit: 90m is out of range (expected 0ms...1h)"
        ),
        ("music:\n  replay-gain: off\n", #"test.yaml:4:1: music: missing required key "subsonic""#),
        ("music:\n  subsonic:\n", "test.yaml:5:12: music.subsonic: a value is required"),
    ])
    func reportsBadMusic(snippet: String, expected: String) {
        #expect(issueLines(minimalZone + snippet) == [expected])
    }

    /// Music zones may name zones, groups and all, and they expand without error.
    @Test func expandsMusicZones() throws {
        let configuration = try load(
            minimalZone + "  patio:\n    pcm: p\ngroups:\n  outside: [patio]\n"
                + musicSection + "  zones: [outside, kitchen]\n")
        let music = try #require(configuration.music)
        #expect(try configuration.expand(music.zones) == ["kitchen", "patio"])
    }
}

@Suite(.ownThread) struct ConfigRoundTripTests {
    /// A configuration using every new key reads back equal from its JSON (paths are already resolved).
    @Test func roundTripsNewKeysThroughJSON() throws {
        let text = """
            api: {listen: "0.0.0.0:8470", token-file: /etc/baton/api.token}
            zones:
              kitchen: {pcm: amp, channels: [left], volume: 85.5%, max-volume: 90%}
              patio: {pcm: amp, channels: [right], device-channels: 2}
              den: {pcm: usb, channels: [center, lfe], device-channels: 8, mixer: Digital}
            groups:
              outside: [patio]
            state-dir: /var/lib/baton
            music:
              subsonic: {url: "http://nas:4533", user: u, password-file: /p, api-key-file: /k, format: mp3}
              zones: [outside]
              replay-gain: "off"

            """
        let configuration = try load(text)
        let json = String(decoding: try JSONEncoder().encode(configuration), as: UTF8.self)
        let reread = try BatonConfiguration.parse(text: json, file: "effective.json", baseDirectory: "")
        var sortedConfiguration = configuration
        sortedConfiguration.zones.sort { $0.name < $1.name }
        var sortedReread = reread
        sortedReread.zones.sort { $0.name < $1.name }
        sortedReread.policy.classes.sort { $0.name < $1.name }
        sortedConfiguration.policy.classes.sort { $0.name < $1.name }
        #expect(sortedReread == sortedConfiguration)
        #expect(json.contains(#""channels":["left"]"#) && json.contains(#""volume":"0.855""#))
    }
}
