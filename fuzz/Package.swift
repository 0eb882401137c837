// swift-tools-version:6.0
// Baton's fuzzers: libFuzzer executables over the parsers that take bytes from outside.
//
// A separate package so that the normal `swift build` and `swift test` of Baton never build them.
// Build and run with scripts/fuzz.sh; by hand:
//
//   swift build --package-path fuzz -c release -Xswiftc -sanitize=fuzzer,address -Xswiftc -enable-testing
//   fuzz/.build/release/FuzzConfig fuzz/corpus/FuzzConfig -max_total_time=60
//
// `-Xswiftc` flags reach every Swift module of the build, Baton's own included, so the modules under
// test carry the coverage instrumentation and AddressSanitizer too. `-enable-testing` lets the fuzzers
// reach the few internal entry points that have no public door (`@testable import`).
import PackageDescription

/// A fuzzer: an executable whose `@main` runs libFuzzer's driver on its `LLVMFuzzerTestOneInput`
/// (see Sources/CLibFuzzer/include/CLibFuzzer.h for why not libFuzzer's own `main`).
func fuzzer(_ name: String, _ products: [String]) -> Target {
    .executableTarget(
        name: name, dependencies: ["FuzzSupport"] + products.map { .product(name: $0, package: "Baton") },
        swiftSettings: [.swiftLanguageMode(.v6), .unsafeFlags(["-parse-as-library"])])
}

let package = Package(
    name: "BatonFuzz",
    dependencies: [.package(name: "Baton", path: "..")],
    targets: [
        .target(name: "CLibFuzzer"),
        .target(name: "FuzzSupport", dependencies: ["CLibFuzzer"], swiftSettings: [.swiftLanguageMode(.v6)]),
        fuzzer("FuzzConfig", ["BatonConfig"]),
        fuzzer("FuzzSubsonic", ["Subsonic"]),
        fuzzer("FuzzRTP", ["Intercom", "OpusCodec"]),
        fuzzer("FuzzAPI", ["BatonDaemon", "BatonService", "BatonConfig", "HTTPServer", "OSThread"]),
        fuzzer("FuzzDecoders", ["Media", "AudioCore"]),
    ]
)
