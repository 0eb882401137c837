// swift-tools-version:6.0
// SPDX-License-Identifier: MIT
// Baton: a multi-zone audio router for embedded Linux speakers.
//
// The folders are the layers (docs/ARCHITECTURE.md), bottom up:
//   Sources/System/    each Debian C library (.systemLibrary, shims in shim.h) with its one Swift
//                      wrapper, the only importer of it; OSThread (threads, clock, files, logging),
//                      the one wrapper of CGlibc (a C target: glibc's GNU extensions)
//   Sources/Audio/     AudioCore (rings, DSP, resampler protocol), Engine (output threads), Media
//   Sources/Network/   Subsonic, Intercom (RTP), Snapcast: the protocols Baton speaks
//   Sources/Arbiter/   the pure policy
//   Sources/Players/   the sources layer: every kind of source, one protocol
//   Sources/Control/   BatonConfig; ControlParts (zones, events, domain error, peripherals) and the
//                      control plane (BatonDaemon): admit, route, report
//   Sources/Service/   the transports (HTTP API, MQTT, GPIO) and the process around the control plane
//   Sources/Programs/  batond, batonctl, baton-bench
// Tests/ mirrors the same folders; Tests/Support holds the test rigs and the virtual sound card.
import PackageDescription

/// A Debian C library reached through pkg-config, with the apt package that provides it, in
/// `Sources/System/<group>/`.
func cLibrary(_ name: String, in group: String, pkgConfig: String, apt: [String]) -> Target {
    .systemLibrary(name: name, path: "Sources/System/\(group)/\(name)", pkgConfig: pkgConfig, providers: [.apt(apt)])
}

let swiftSettings: [SwiftSetting] = [.swiftLanguageMode(.v6)]

/// The real-time modules (what the output thread runs) are optimized in every build configuration:
/// unoptimized Swift allocates coroutine frames when it reads atomics stored in classes, and the
/// output thread must never allocate, in a debug build of the tests as in the shipped daemon.
let realtimeSwiftSettings: [SwiftSetting] = swiftSettings + [.unsafeFlags(["-O"])]

/// The one Swift wrapper of a C library, beside it in `Sources/System/<group>/`.
func wrapper(
    _ name: String, in group: String, _ dependencies: [Target.Dependency],
    settings: [SwiftSetting] = swiftSettings
) -> Target {
    .target(name: name, dependencies: dependencies, path: "Sources/System/\(group)/\(name)", swiftSettings: settings)
}

/// A module of the layer `folder` (`Sources/<folder>/<name>`, or `Sources/<folder>` when it is the layer).
func module(
    _ name: String, _ folder: String, _ dependencies: [Target.Dependency],
    settings: [SwiftSetting] = swiftSettings, resources: [Resource]? = nil
) -> Target {
    .target(
        name: name, dependencies: dependencies, path: "Sources/\(folder)", resources: resources, swiftSettings: settings
    )
}

/// A test target at `Tests/<path>`.
func tests(_ name: String, _ path: String, _ dependencies: [Target.Dependency]) -> Target {
    .testTarget(name: name, dependencies: dependencies, path: "Tests/\(path)", swiftSettings: swiftSettings)
}

let package = Package(
    name: "Baton",
    products: [
        .executable(name: "batond", targets: ["batond"]),
        .executable(name: "batonctl", targets: ["batonctl"]),
        .executable(name: "baton-bench", targets: ["baton-bench"]),
        // Libraries for the fuzzers in fuzz/ (a separate package that depends on this one by path).
        .library(name: "BatonConfig", targets: ["BatonConfig"]),
        .library(name: "Subsonic", targets: ["Subsonic"]),
        .library(name: "Intercom", targets: ["Intercom"]),
        .library(name: "OpusCodec", targets: ["OpusCodec"]),
        .library(name: "AudioCore", targets: ["AudioCore"]),
        .library(name: "OSThread", targets: ["OSThread"]),
        .library(name: "Media", targets: ["Media"]),
        .library(name: "HTTPServer", targets: ["HTTPServer"]),
        .library(name: "ControlParts", targets: ["ControlParts"]),
        .library(name: "BatonDaemon", targets: ["BatonDaemon"]),
        .library(name: "BatonService", targets: ["BatonService"]),
    ],
    targets: [
        // System: C libraries, each with its wrapper; the OS.
        cLibrary("CALSA", in: "ALSA", pkgConfig: "alsa", apt: ["libasound2-dev"]),
        wrapper("ALSA", in: "ALSA", ["CALSA"], settings: realtimeSwiftSettings),
        cLibrary("CSampleRate", in: "SampleRate", pkgConfig: "samplerate", apt: ["libsamplerate0-dev"]),
        wrapper("SampleRate", in: "SampleRate", ["CSampleRate", "AudioCore"]),
        cLibrary("CSoxr", in: "Soxr", pkgConfig: "soxr", apt: ["libsoxr-dev"]),
        wrapper("Soxr", in: "Soxr", ["CSoxr", "AudioCore"]),
        cLibrary("COpus", in: "Opus", pkgConfig: "opus", apt: ["libopus-dev"]),
        cLibrary("COpusFile", in: "Opus", pkgConfig: "opusfile", apt: ["libopusfile-dev"]),
        wrapper("OpusCodec", in: "Opus", ["COpus", "COpusFile", "AudioCore"]),
        cLibrary("CYAML", in: "YAML", pkgConfig: "yaml-0.1", apt: ["libyaml-dev"]),
        wrapper("YAML", in: "YAML", ["CYAML"]),
        cLibrary("CMicroHTTPD", in: "HTTPServer", pkgConfig: "libmicrohttpd", apt: ["libmicrohttpd-dev"]),
        wrapper("HTTPServer", in: "HTTPServer", ["CMicroHTTPD", "OSThread"]),
        cLibrary("CCurl", in: "Curl", pkgConfig: "libcurl", apt: ["libcurl4-openssl-dev"]),
        wrapper("Curl", in: "Curl", ["CCurl", "OSThread"]),
        cLibrary("CFLAC", in: "FLAC", pkgConfig: "flac", apt: ["libflac-dev"]),
        wrapper("FLACCodec", in: "FLAC", ["CFLAC", "AudioCore"]),
        cLibrary("CMPG123", in: "MPG123", pkgConfig: "libmpg123", apt: ["libmpg123-dev"]),
        wrapper("MP3Codec", in: "MPG123", ["CMPG123", "AudioCore"]),
        cLibrary("CSystemd", in: "Systemd", pkgConfig: "libsystemd", apt: ["libsystemd-dev"]),
        wrapper("Systemd", in: "Systemd", ["CSystemd"]),
        cLibrary("CMosquitto", in: "Mosquitto", pkgConfig: "libmosquitto", apt: ["libmosquitto-dev"]),
        wrapper("MQTT", in: "Mosquitto", ["CMosquitto", "OSThread"]),
        cLibrary("CGPIOD", in: "GPIOD", pkgConfig: "libgpiod", apt: ["libgpiod-dev"]),
        wrapper("GPIO", in: "GPIOD", ["CGPIOD", "OSThread"]),
        // Dedicated OS threads, the monotonic clock, whole-file I/O and the logger.
        // glibc's GNU extensions (sem_clockwait, closefrom for posix_spawn), which Swift's Glibc hides.
        .target(name: "CGlibc", path: "Sources/System/CGlibc"),
        module("OSThread", "System/OSThread", ["CGlibc"], settings: realtimeSwiftSettings),

        // Audio: rings and DSP, the output threads, decoding and the track renderer.
        module("AudioCore", "Audio/AudioCore", ["OSThread"], settings: realtimeSwiftSettings),
        module("Engine", "Audio/Engine", ["ALSA", "AudioCore", "OSThread"], settings: realtimeSwiftSettings),
        module(
            "Media", "Audio/Media",
            ["OpusCodec", "FLACCodec", "MP3Codec", "AudioCore", "OSThread", "SampleRate", "Soxr"]),

        // Network: the protocols Baton speaks.
        module("Subsonic", "Network/Subsonic", ["Curl", "OSThread"]),
        module("Intercom", "Network/Intercom", ["OpusCodec", "AudioCore", "OSThread"]),
        // Snapcast zones: snapserver's JSON-RPC control (groups, speaker volume and latency).
        module("Snapcast", "Network/Snapcast", ["Curl", "OSThread"]),

        // The pure arbitration policy.
        module("Arbiter", "Arbiter", []),
        // The sources layer: every kind of source the control plane admits (sound, URL, server music, call,
        // external player).
        module(
            "Players", "Players",
            ["AudioCore", "Curl", "Engine", "Intercom", "Media", "OSThread", "Subsonic", "Systemd"]),
        // Configuration, and the control plane (admit, route, report; domain errors, no transport).
        // Snapcast: a control URL is read as the server it reaches, as the client reads it.
        module("BatonConfig", "Control/BatonConfig", ["AudioCore", "OSThread", "Snapcast", "YAML"]),
        // What the control plane is made of beside its decisions: the zones built from the config, the
        // domain error, the event log, and the peripherals it drives (state file, mixer controls, speech,
        // Snapcast speakers, the intercom line, the music server, cover art, the external-sources socket).
        module(
            "ControlParts", "Control/ControlParts",
            [
                "ALSA", "Arbiter", "AudioCore", "BatonConfig", "Engine", "Intercom", "Media", "OSThread", "Players",
                "Snapcast", "Subsonic",
            ]),
        // The control plane itself: one admit path, the arbiter's effects on the slots, the monitor, what is
        // heard, status and reload; the fronts that make sources (announcer, music, calls, external players).
        module(
            "BatonDaemon", "Control/BatonDaemon",
            [
                "Arbiter", "AudioCore", "BatonConfig", "ControlParts", "Engine", "Media", "OSThread", "Players",
                "Subsonic",
            ]),
        // The service: the control plane's transports (HTTP API, MQTT, GPIO) and the process around it.
        module(
            "BatonService", "Service",
            [
                "ALSA", "Arbiter", "BatonConfig", "BatonDaemon", "ControlParts", "GPIO", "HTTPServer", "MQTT",
                "OSThread",
                "Subsonic",
                "Systemd",
            ],
            // The web app, compiled into batond (PackageResources.index_html, …).
            resources: ["index.html", "app.css", "app.js"].map { .embedInCode("WebApp/\($0)") }),

        // Programs.
        .executableTarget(
            name: "batond", dependencies: ["BatonConfig", "BatonDaemon", "BatonService", "OSThread"],
            path: "Sources/Programs/batond", swiftSettings: swiftSettings),
        // batonctl depends on no module of the daemon, by design: a small client of the HTTP API.
        .executableTarget(name: "batonctl", path: "Sources/Programs/batonctl", swiftSettings: swiftSettings),
        .executableTarget(
            name: "baton-bench",
            dependencies: ["ALSA", "AudioCore", "Engine", "Media", "OSThread", "BenchFloor", "CAllocCounter"],
            path: "Sources/Programs/baton-bench", swiftSettings: swiftSettings),
        // The benchmark's floor: the same resampling by the bare C libraries (never in the daemon).
        .target(
            name: "BenchFloor", path: "Sources/Programs/BenchFloor",
            linkerSettings: [
                .linkedLibrary("soxr"), .linkedLibrary("samplerate"), .linkedLibrary("opus"), .linkedLibrary("m"),
            ]),

        // Test support. CAllocCounter replaces malloc for the whole process: only the tests and
        // baton-bench link it, never the daemon.
        .target(name: "CAllocCounter", path: "Tests/Support/CAllocCounter"),
        // CThreadAffinity pins the harness's own threads (glibc's affinity calls need _GNU_SOURCE).
        .target(name: "CThreadAffinity", path: "Tests/Support/CThreadAffinity"),
        // CNetworkNamespace gives a test a network of its own (unshare and setns need _GNU_SOURCE).
        .target(name: "CNetworkNamespace", path: "Tests/Support/CNetworkNamespace"),
        .target(
            name: "BatonTesting",
            dependencies: ["ALSA", "AudioCore", "CAllocCounter", "CNetworkNamespace", "CThreadAffinity", "OSThread"],
            path: "Tests/Support/BatonTesting", swiftSettings: swiftSettings),

        // Tests, by layer; each wrapper's in a target named after it.
        tests("ALSATests", "System/ALSATests", ["ALSA"]),
        tests("CurlTests", "System/CurlTests", ["Curl", "BatonTesting", "OSThread"]),
        tests("HTTPServerTests", "System/HTTPServerTests", ["HTTPServer", "BatonTesting"]),
        tests("YAMLTests", "System/YAMLTests", ["YAML"]),
        tests("MQTTTests", "System/MQTTTests", ["MQTT", "BatonTesting"]),
        tests("GPIOTests", "System/GPIOTests", ["GPIO"]),
        tests("AudioCoreTests", "Audio/AudioCoreTests", ["AudioCore", "BatonTesting", "SampleRate", "Soxr"]),
        tests("EngineTests", "Audio/EngineTests", ["Engine", "ALSA", "AudioCore", "BatonTesting", "Media"]),
        tests(
            "CodecTests", "Audio/CodecTests",
            ["Media", "FLACCodec", "MP3Codec", "OpusCodec", "AudioCore", "BatonTesting", "OSThread"]),
        tests("SubsonicTests", "Network/SubsonicTests", ["Subsonic", "Curl", "BatonTesting", "HTTPServer"]),
        tests("IntercomTests", "Network/IntercomTests", ["Intercom", "OpusCodec", "AudioCore", "BatonTesting"]),
        tests(
            "SnapcastTests", "Network/SnapcastTests",
            [
                "Snapcast", "BatonDaemon", "ControlParts", "BatonConfig", "Engine", "AudioCore", "BatonTesting",
                "HTTPServer", "OSThread", "Players", "Curl",
            ]),
        tests("ArbiterTests", "Arbiter", ["Arbiter"]),
        tests("ConfigTests", "Control/ConfigTests", ["AudioCore", "BatonConfig", "BatonTesting", "YAML"]),
        tests(
            "DaemonTests", "Service/DaemonTests",
            [
                "BatonDaemon", "ControlParts", "BatonService", "BatonConfig", "BatonTesting", "AudioCore", "Engine",
                "GPIO",
                "HTTPServer", "Media",
                "OSThread", "Players", "Snapcast", "Subsonic",
            ]),
        tests("ToolTests", "Service/ToolTests", ["BatonTesting", "CThreadAffinity", "OSThread", "Systemd"]),
    ]
)

// MARK: - The virtual sound card for tests (issue 14 §1; kept in one block for merging)
// CBatonTestCard is an alsa-lib ioplug PCM plugin (`type batontest`); the dynamic library product
// libasound_module_pcm_batontest.so is what alsa-lib dlopen()s through the rig's `pcm_type.batontest`.
package.products += [
    .library(name: "asound_module_pcm_batontest", type: .dynamic, targets: ["CBatonTestCard"])
]
package.targets += [
    .target(
        name: "CBatonTestCard", path: "Tests/Support/BatonTestCard",
        cSettings: [.unsafeFlags(["-Wall", "-Wextra"])], linkerSettings: [.linkedLibrary("asound")]),
    .testTarget(
        name: "BatonTestCardTests",
        dependencies: ["ALSA", "BatonTesting", "CALSA", "CBatonTestCard", "CThreadAffinity", "OSThread"],
        path: "Tests/Support/BatonTestCardTests", swiftSettings: swiftSettings),
]

// MARK: - The `baton` ALSA PCM type (issue 13; kept in one block for merging)
// CBatonPCM is an alsa-lib ioplug plugin: every ALSA program that writes to a `type baton` PCM plays
// through batond as an external source. Plain C, linked to alsa-lib only (never the Swift runtime):
// the dynamic library product libasound_module_pcm_baton.so is what alsa-lib dlopen()s, and what
// scripts/build-deb.sh installs into the alsa-lib plugin directory.
package.products += [
    .library(name: "asound_module_pcm_baton", type: .dynamic, targets: ["CBatonPCM"])
]
package.targets += [
    .target(
        name: "CBatonPCM", path: "Sources/Plugins/ALSABaton",
        cSettings: [.unsafeFlags(["-Wall", "-Wextra"])],
        // The Swift driver links every product: -nostartfiles leaves out its start-up object (swiftrt.o,
        // which references the runtime), and -static-stdlib turns its -lswiftCore into an archive from
        // which nothing is taken. So the plugin needs alsa-lib and libc only (`ldd` shows no Swift;
        // ExternalTests checks it), and any program can load it.
        linkerSettings: [.linkedLibrary("asound"), .unsafeFlags(["-nostartfiles", "-static-stdlib"])])
]
package.targets += [
    // aplay, MPD and the others through the real plugin and the real batond.
    .testTarget(
        name: "ExternalTests", dependencies: ["BatonTesting"], path: "Tests/Players/ExternalTests",
        swiftSettings: swiftSettings)
]
