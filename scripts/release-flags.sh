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
#   -function-sections     every function in a section of its own (as the static Swift runtime's are),
#   lld, --symbol-ordering-file  so that the linker puts the code batond runs together, in the order of
#                          scripts/batond-symbol-order.txt (made by scripts/text-order.sh): a page of
#                          code is resident once anything on it runs, and the kernel maps 64 KiB
#                          around every fault (docs/PERFORMANCE.md, "Code laid out by use"); the
#                          toolchain's lld (gold's --section-ordering-file missed more of the runtime)
#   -z pack-relative-relocs  the 42,000 relative relocations, read once at start and then resident,
#                          as an 8 KiB DT_RELR table instead of 1 MiB of .rela.dyn (glibc >= 2.36:
#                          Debian 12; dpkg-shlibdeps makes the package depend on it)
#   --no-export-dynamic    the toolchain's static-stdlib-args.lnk links executables with
#                          -export-dynamic, which puts every public symbol of Baton's modules (7,300)
#                          in the executable's dynamic symbol table; the executable heads the
#                          lookup scope, so the dynamic linker searched that table first for every
#                          symbol it bound in any library, most of them at start, and its .dynsym,
#                          .dynstr and .gnu.hash (600 KiB) were resident. Nothing looks
#                          Baton's symbols up at run time (the Swift runtime finds its metadata by
#                          section; the ALSA plugins are shared libraries, which export regardless).
#
# The static link prints one harmless warning from the toolchain's FoundationEssentials (`the use of
# 'mktemp' is dangerous`); nothing of Baton's.
release_flags=(-c release --static-swift-stdlib -Xlinker -z -Xlinker now -Xswiftc -Xfrontend -Xswiftc -function-sections
  -Xswiftc -use-ld=lld -Xlinker -z -Xlinker pack-relative-relocs -Xlinker --no-export-dynamic -Xlinker --no-warn-symbol-ordering
  -Xlinker "--symbol-ordering-file=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/batond-symbol-order.txt")
