# Sourced by every script that builds Baton in release to run, measure or ship it (build-deb.sh,
# run.sh, bench/build-batond.sh, bench-pipelines.sh): `release_flags` is the one set of `swift build`
# options, so what the benchmarks measure and what run.sh runs is what the package installs, and they
# all share one .build/release (a build with other options recompiles every module, ~8 minutes here).
#
#   --static-swift-stdlib  the Swift runtime, Concurrency, Synchronization and FoundationEssentials
#                          linked into the binary (no libswift*.so on the speaker), dead-stripped
#                          (SwiftPM's release link has --gc-sections): 3.1 MiB less peak RSS than the
#                          toolchain's shared libraries (docs/PERFORMANCE.md, "Build options")
#   -z now                 full RELRO, as Debian's hardening=+bindnow: the GOT read-only once loaded
#
# The static link prints one harmless warning from the toolchain's FoundationEssentials (`the use of
# 'mktemp' is dangerous`); nothing of Baton's.
release_flags=(-c release --static-swift-stdlib -Xlinker -z -Xlinker now)
