// swift-tools-version:6.0
// Baton: a multi-zone audio router for embedded Linux speakers.
//
// Layers (see docs/ARCHITECTURE.md):
//   C modules (C*)            .systemLibrary targets, one per Debian library, shims in shim.h
//   wrapper modules           the only importers of their C module; typed errors, no C pointers above
//   AudioCore, Arbiter        pure Swift: DSP kernels, rings, resampler protocol; the arbitration policy
//   Engine, Media, BatonConfig  output threads, sound decoding, configuration
//   BatonDaemon               wiring: API, announcer, zones
import PackageDescription

/// A Debian C library reached through pkg-config, with the apt package that provides it.
func cLibrary(_ name: String, pkgConfig: String, apt: [String]) -> Target {
    .systemLibrary(name: name, path: "Sources/CModules/\(name)", pkgConfig: pkgConfig,
                   providers: [.apt(apt)])
}

let swiftSettings: [SwiftSetting] = [.swiftLanguageMode(.v6)]

/// The real-time modules (what the output thread runs) are optimized in every build configuration:
/// unoptimized Swift allocates coroutine frames when it reads atomics stored in classes, and the
/// output thread must never allocate, in a debug build of the tests as in the shipped daemon.
let realtimeSwiftSettings: [SwiftSetting] = swiftSettings + [.unsafeFlags(["-O"])]

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
        .library(name: "BatonDaemon", targets: ["BatonDaemon"]),
        .library(name: "BatonService", targets: ["BatonService"]),
    ],
    targets: [
        // C libraries.
        cLibrary("CALSA", pkgConfig: "alsa", apt: ["libasound2-dev"]),
        cLibrary("CSampleRate", pkgConfig: "samplerate", apt: ["libsamplerate0-dev"]),
        cLibrary("CSoxr", pkgConfig: "soxr", apt: ["libsoxr-dev"]),
        cLibrary("COpus", pkgConfig: "opus", apt: ["libopus-dev"]),
        cLibrary("COpusFile", pkgConfig: "opusfile", apt: ["libopusfile-dev"]),
        cLibrary("CYAML", pkgConfig: "yaml-0.1", apt: ["libyaml-dev"]),
        cLibrary("CMicroHTTPD", pkgConfig: "libmicrohttpd", apt: ["libmicrohttpd-dev"]),
        cLibrary("CCurl", pkgConfig: "libcurl", apt: ["libcurl4-openssl-dev"]),
        cLibrary("CFLAC", pkgConfig: "flac", apt: ["libflac-dev"]),
        cLibrary("CMPG123", pkgConfig: "libmpg123", apt: ["libmpg123-dev"]),
        cLibrary("CSystemd", pkgConfig: "libsystemd", apt: ["libsystemd-dev"]),
        cLibrary("CMosquitto", pkgConfig: "libmosquitto", apt: ["libmosquitto-dev"]),
        cLibrary("CGPIOD", pkgConfig: "libgpiod", apt: ["libgpiod-dev"]),

        // One wrapper module per C library.
        .target(name: "ALSA", dependencies: ["CALSA"], swiftSettings: realtimeSwiftSettings),
        .target(name: "SampleRate", dependencies: ["CSampleRate", "AudioCore"], swiftSettings: swiftSettings),
        .target(name: "Soxr", dependencies: ["CSoxr", "AudioCore"], swiftSettings: swiftSettings),
        .target(name: "OpusCodec", dependencies: ["COpus", "COpusFile", "AudioCore"], swiftSettings: swiftSettings),
        .target(name: "YAML", dependencies: ["CYAML"], swiftSettings: swiftSettings),
        .target(name: "HTTPServer", dependencies: ["CMicroHTTPD"], swiftSettings: swiftSettings),
        .target(name: "Curl", dependencies: ["CCurl"], swiftSettings: swiftSettings),
        .target(name: "FLACCodec", dependencies: ["CFLAC", "AudioCore"], swiftSettings: swiftSettings),
        .target(name: "MP3Codec", dependencies: ["CMPG123", "AudioCore"], swiftSettings: swiftSettings),
        .target(name: "Systemd", dependencies: ["CSystemd"], swiftSettings: swiftSettings),
        .target(name: "MQTT", dependencies: ["CMosquitto", "OSThread"], swiftSettings: swiftSettings),
        .target(name: "GPIO", dependencies: ["CGPIOD", "OSThread"], swiftSettings: swiftSettings),

        // Pure Swift.
        .target(name: "AudioCore", dependencies: ["OSThread"], swiftSettings: realtimeSwiftSettings),
        // Dedicated OS threads and the monotonic clock, for every module that runs its own threads.
        .target(name: "OSThread", swiftSettings: realtimeSwiftSettings),
        .target(name: "Arbiter", swiftSettings: swiftSettings),

        // Mechanism.
        .target(name: "Engine", dependencies: ["ALSA", "AudioCore"], swiftSettings: realtimeSwiftSettings),
        .target(name: "Media", dependencies: ["OpusCodec", "FLACCodec", "MP3Codec", "AudioCore", "SampleRate", "Soxr"],
                swiftSettings: swiftSettings),
        .target(name: "BatonConfig", dependencies: ["AudioCore", "YAML"], swiftSettings: swiftSettings),
        .target(name: "Subsonic", dependencies: ["Curl"], swiftSettings: swiftSettings),
        .target(name: "Intercom", dependencies: ["OpusCodec", "AudioCore"], swiftSettings: swiftSettings),
        // Snapcast zones: snapserver's JSON-RPC control (groups, speaker volume and latency).
        .target(name: "Snapcast", dependencies: ["Curl", "OSThread"], swiftSettings: swiftSettings),

        // The sources layer: every kind of source the control plane admits (sound, server music, call).
        .target(name: "Players", dependencies: ["AudioCore", "Engine", "Intercom", "Media", "OSThread", "Subsonic"],
                swiftSettings: swiftSettings),
        // The control plane (admit, route, report; domain errors, no transport).
        .target(name: "BatonDaemon",
                dependencies: ["ALSA", "Arbiter", "AudioCore", "BatonConfig", "Engine", "Intercom", "Media", "OSThread",
                               "Players", "Snapcast", "Subsonic"],
                swiftSettings: swiftSettings),
        // The service: the control plane's transports (HTTP API, MQTT, GPIO) and the process around it.
        .target(name: "BatonService",
                dependencies: ["ALSA", "Arbiter", "BatonConfig", "BatonDaemon", "GPIO", "HTTPServer", "MQTT", "OSThread",
                               "Systemd"],
                swiftSettings: swiftSettings),
        .executableTarget(name: "batond", dependencies: ["BatonConfig", "BatonDaemon", "BatonService", "OSThread"],
                          swiftSettings: swiftSettings),
        .executableTarget(name: "batonctl", swiftSettings: swiftSettings),
        .executableTarget(name: "baton-bench",
                          dependencies: ["ALSA", "AudioCore", "Engine", "Media", "BenchFloor", "CAllocCounter"],
                          swiftSettings: swiftSettings),
        // The benchmark's floor: the same resampling by the bare C libraries (never in the daemon).
        .target(name: "BenchFloor", linkerSettings: [.linkedLibrary("soxr"), .linkedLibrary("samplerate"),
                                                     .linkedLibrary("m")]),

        // CAllocCounter replaces malloc for the whole process: only the tests and baton-bench link it,
        // never the daemon.
        .target(name: "CAllocCounter", path: "Tests/CAllocCounter"),
        .target(name: "BatonTesting", dependencies: ["ALSA", "AudioCore", "CAllocCounter"], path: "Tests/BatonTesting",
                swiftSettings: swiftSettings),
        .testTarget(name: "ArbiterTests", dependencies: ["Arbiter"], swiftSettings: swiftSettings),
        .testTarget(name: "AudioCoreTests", dependencies: ["AudioCore", "BatonTesting", "SampleRate", "Soxr"],
                    swiftSettings: swiftSettings),
        .testTarget(name: "ConfigTests", dependencies: ["AudioCore", "BatonConfig", "YAML"], swiftSettings: swiftSettings),
        .testTarget(name: "EngineTests", dependencies: ["Engine", "ALSA", "BatonTesting", "Media"],
                    swiftSettings: swiftSettings),
        .testTarget(name: "DaemonTests", dependencies: ["BatonDaemon", "BatonService", "BatonTesting", "GPIO"],
                    swiftSettings: swiftSettings),
        .testTarget(name: "SubsonicTests", dependencies: ["Subsonic", "Curl", "BatonTesting"], swiftSettings: swiftSettings),
        .testTarget(name: "CodecTests", dependencies: ["Media", "FLACCodec", "MP3Codec", "OpusCodec", "BatonTesting"],
                    swiftSettings: swiftSettings),
        .testTarget(name: "IntercomTests", dependencies: ["Intercom", "OpusCodec", "AudioCore", "BatonTesting"],
                    swiftSettings: swiftSettings),
        .testTarget(name: "MQTTTests", dependencies: ["MQTT", "BatonTesting"], swiftSettings: swiftSettings),
        .testTarget(name: "GPIOTests", dependencies: ["GPIO"], swiftSettings: swiftSettings),
        .testTarget(name: "SnapcastTests",
                    dependencies: ["Snapcast", "BatonDaemon", "BatonConfig", "Engine", "AudioCore", "BatonTesting", "HTTPServer", "OSThread"],
                    swiftSettings: swiftSettings),
        .testTarget(name: "ToolTests", dependencies: ["BatonTesting", "Systemd"], swiftSettings: swiftSettings),
    ]
)

// MARK: - The virtual sound card for tests (issue 14 §1; kept in one block for merging)
// CBatonTestCard is an alsa-lib ioplug PCM plugin (`type batontest`); the dynamic library product
// libasound_module_pcm_batontest.so is what alsa-lib dlopen()s through the rig's `pcm_type.batontest`.
package.products += [
    .library(name: "asound_module_pcm_batontest", type: .dynamic, targets: ["CBatonTestCard"]),
]
package.targets += [
    .target(name: "CBatonTestCard", path: "Tests/Support/BatonTestCard",
            cSettings: [.unsafeFlags(["-Wall", "-Wextra"])], linkerSettings: [.linkedLibrary("asound")]),
    .testTarget(name: "BatonTestCardTests", dependencies: ["ALSA", "BatonTesting", "CBatonTestCard"],
                path: "Tests/Support/BatonTestCardTests", swiftSettings: swiftSettings),
]
