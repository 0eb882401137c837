import BatonConfig
import BatonTesting
import Glibc
import Testing

@Suite(.ownThread) struct ConfigLoadingTests {
    /// The shipped config/baton.yaml loads with the two card-less zones, the default API and policy,
    /// and paths resolved against the config directory.
    @Test func loadsDefaultConfigFile() throws {
        let path = repositoryRoot + "/config/baton.yaml"
        let configuration = try BatonConfiguration.load(path: path)
        let configDirectory = repositoryRoot + "/config"

        #expect(configuration.api == APIConfig(listen: ListenAddress(host: "127.0.0.1", port: 8470), maxBody: 65536))
        #expect(
            configuration.zones == [
                ZoneConfig(
                    name: "kitchen", pcm: "baton_kitchen", rate: 44100, channels: 2, format: .s16LE,
                    period: .milliseconds(10), buffer: .milliseconds(40), clock: .system),
                ZoneConfig(name: "patio", pcm: "baton_patio", rate: 48000, channels: 2, format: .s16LE, clock: .system),
            ])
        #expect(configuration.sounds == configDirectory + "/sounds")
        #expect(configuration.alsaConfig == configDirectory + "/alsa/baton-files.conf")
        #expect(configuration.outputDir == configDirectory + "/../out")
        #expect(configuration.resampler == .default)
        #expect(configuration.policy == .default)
        #expect(configuration.zones[0].periodFrames == 441 && configuration.zones[0].bufferFrames == 1764)
        #expect(configuration.zones[1].periodFrames == 480 && configuration.zones[1].bufferFrames == 1920)
    }

    /// Every file in config/examples loads.
    @Test(arguments: exampleFiles())
    func loadsExample(file: String) throws {
        _ = try BatonConfiguration.load(path: repositoryRoot + "/config/examples/" + file)
    }

    /// The HiFiBerry example has one device-clocked zone on the card, with a per-zone resampler.
    @Test func readsHiFiBerryExample() throws {
        let configuration = try BatonConfiguration.load(path: repositoryRoot + "/config/examples/pi-hifiberry.yaml")
        let zone = try #require(configuration.zone(named: "living-room"))
        #expect(zone.pcm == "hw:CARD=sndrpihifiberry,DEV=0")
        #expect(zone.clock == .device)
        #expect(configuration.musicResampler(for: zone) == .soxr(.medium))
        #expect(configuration.sounds == "/var/lib/baton/sounds")
    }

    /// A zone with only a PCM gets every default, and the file gets the default API, resamplers and policy.
    @Test func appliesDefaults() throws {
        let configuration = try load(minimalZone)
        #expect(configuration == BatonConfiguration(zones: [ZoneConfig(name: "kitchen", pcm: "baton_kitchen")]))
        let zone = configuration.zones[0]
        #expect(zone.rate == 48000 && zone.channels == 2 && zone.format == .s16LE && zone.clock == .device)
        #expect(zone.resampler == nil)
        #expect(configuration.musicResampler(for: zone) == .soxr(.high))
        #expect(configuration.api.listen.description == "127.0.0.1:8470")
        #expect(configuration.api.maxBody == 64 * 1024)
    }

    /// The default policy is exactly the documented one.
    @Test func definesDefaultPolicy() throws {
        let policy = try load(minimalZone).policy
        #expect(policy.classes.map(\.name) == ["music", "announcement", "call"])
        #expect(
            policy.class(named: "music")
                == ClassConfig(
                    name: "music", priority: 10, kind: .permanent, lower: .interrupt, same: .replace,
                    duringHigher: .queue, resumeWithin: .seconds(300)))
        #expect(
            policy.class(named: "announcement")
                == ClassConfig(
                    name: "announcement", priority: 50, kind: .transient, lower: .interrupt, same: .queue,
                    duringHigher: .queue, coalesce: .seconds(3), ttl: .seconds(30), queueLimit: 16))
        #expect(
            policy.class(named: "call")
                == ClassConfig(
                    name: "call", priority: 90, kind: .transient, lower: .interrupt, same: .reject,
                    duringHigher: .reject))
        #expect(policy.duck == DuckConfig(level: -15, attack: .milliseconds(50), release: .milliseconds(300)))
    }

    /// Period and buffer in frames are rate × duration, rounded to the nearest frame.
    @Test(arguments: [
        (44100, Duration.milliseconds(10), 441),
        (48000, .milliseconds(10), 480),
        (44100, .milliseconds(40), 1764),
        (22050, .microseconds(1500), 33),  // 33.075
        (8000, .microseconds(1_062_500), 8500),
    ])
    func computesFrames(rate: Int, duration: Duration, frames: Int) {
        let zone = ZoneConfig(name: "z", pcm: "p", rate: rate, period: duration, buffer: duration * 2)
        #expect(zone.periodFrames == frames)
        #expect(ZoneConfig(name: "z", pcm: "p", rate: rate, buffer: duration).bufferFrames == frames)
    }

    /// Relative paths resolve against the config file's directory; absolute paths stay as written.
    @Test(arguments: [
        ("config/baton.yaml", "sounds", "config/sounds"),
        ("baton.yaml", "sounds", "sounds"),
        ("/etc/baton/baton.yaml", "sounds", "/etc/baton/sounds"),
        ("/baton.yaml", "snd", "/snd"),
        ("config/baton.yaml", "/srv/sounds", "/srv/sounds"),
    ])
    func resolvesRelativePaths(file: String, sounds: String, expected: String) throws {
        let configuration = try load(minimalZone + "sounds: \(sounds)\n", file: file)
        #expect(configuration.sounds == expected)
    }

    /// A policy section replaces the default classes wholesale and keeps the default duck when it has none.
    @Test func replacesDefaultClasses() throws {
        let configuration = try load(
            minimalZone + """
                policy:
                  classes:
                    doorbell: {priority: 70, kind: transient, lower: duck}
                    music: {priority: 10, kind: permanent}

                """ + builtInClasses)
        #expect(
            configuration.policy.classes == [
                ClassConfig(name: "doorbell", priority: 70, kind: .transient, lower: .duck),
                ClassConfig(name: "music", priority: 10, kind: .permanent),
                ClassConfig(name: "announcement", priority: 50, kind: .transient),
                ClassConfig(name: "call", priority: 90, kind: .transient),
            ])
        #expect(configuration.policy.duck == .default)
    }

    /// A class batond asks for that the section leaves out is kept at its default (a section
    /// without `announcement` loaded, then refused every doorbell), unless a class given has its
    /// priority: then it stays out, as before.
    @Test func keepsTheClassesBatondAsksForThatAreLeftOut() throws {
        let classes = try load(
            minimalZone + """
                policy:
                  classes:
                    music: {priority: 10, kind: permanent}
                    intercom: {priority: 90, kind: transient}

                """
        ).policy.classes.map(\.name)
        #expect(classes == ["music", "intercom", "announcement"], "call's priority 90 is taken: \(classes)")
    }

    /// A class batond asks for left out because a class given has its priority is warned about,
    /// naming what is then refused: the file loaded without a word, and every doorbell press was
    /// refused at run time ("unknown class").
    @Test func warnsOfTheClassesBatondAsksForThatAreLeftOut() throws {
        let configuration = try load(
            minimalZone + """
                policy:
                  classes:
                    music: {priority: 10, kind: permanent}
                    doorbell: {priority: 50, kind: transient}
                    intercom: {priority: 90, kind: transient}
                gpio:
                  - {chip: gpiochip0, line: 17, announce: {sound: doorbell}}

                """)
        #expect(
            configuration.classWarnings == [
                #"policy.classes: class "announcement" is left out (class "doorbell" has its priority 50): the API's announce and the GPIO buttons are refused ("unknown class")"#,
                #"policy.classes: class "call" is left out (class "intercom" has its priority 90): the API's call/start is refused ("unknown class")"#,
            ])
        #expect(try load(minimalZone).classWarnings.isEmpty)
    }

    /// A policy with only a duck section keeps the default classes.
    @Test func keepsDefaultClassesWithDuckOnly() throws {
        let policy = try load(minimalZone + "policy:\n  duck: {level: -6dB}\n").policy
        #expect(policy.classes == PolicyConfig.defaultClasses)
        #expect(policy.duck == DuckConfig(level: -6))
    }

    /// A configuration path that names an endless source (`/dev/zero`, by a symbolic link gone
    /// wrong) is refused at 4 MiB: it was read without end, batond's memory growing at each reload.
    @Test(.timeLimit(.minutes(1))) func refusesAnEndlessFile() {
        #expect(
            throws: ConfigError(issues: [
                ConfigIssue(
                    file: "/dev/zero", line: nil, column: nil,
                    path: "", message: "cannot read the file: larger than 4 MiB (a configuration is a few kB)")
            ])
        ) {
            try BatonConfiguration.load(path: "/dev/zero")
        }
    }

    /// A file that does not exist is reported with the system's reason and no position.
    @Test func reportsUnreadableFile() {
        #expect(
            throws: ConfigError(issues: [
                ConfigIssue(
                    file: "/nonexistent/baton.yaml", line: nil, column: nil,
                    path: "", message: "cannot read the file: No such file or directory")
            ])
        ) {
            try BatonConfiguration.load(path: "/nonexistent/baton.yaml")
        }
    }

    /// redacted() currently changes nothing, because there are no secrets yet.
    @Test func redactsNothingYet() throws {
        let configuration = try load(minimalZone)
        #expect(configuration.redacted() == configuration)
    }
}

/// The names of the files in config/examples, sorted.
private func exampleFiles() -> [String] {
    guard let directory = opendir(repositoryRoot + "/config/examples") else { return [] }
    defer { closedir(directory) }
    var names: [String] = []
    while let entry = readdir(directory) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        if name.hasSuffix(".yaml") { names.append(name) }
    }
    return names.sorted()
}
