#!/usr/bin/env bash
# Installs whatever the tests need and runs the whole test suite. `.ci/run` calls this.
# Works as root on a fresh Debian 12 / Raspberry Pi OS clone with only the Swift toolchain.
set -uo pipefail
cd "$(dirname "$0")/.."

# What each step took, printed as it ends (CI shows only the whole run's time).
mark=$SECONDS
took() { echo "baton: $1 took $((SECONDS - mark)) s (${SECONDS} s in all)"; mark=$SECONDS; }
scripts/install-deps.sh --test || exit 1
took "installing what is missing"
# The format (.swift-format: 4 spaces, 120 columns) as a lint: `swift format -i -r -p Sources Tests
# Package.swift fuzz/Sources fuzz/Package.swift` fixes what it reports.
swift format lint --strict -r -p Sources Tests Package.swift fuzz/Sources fuzz/Package.swift || {
  echo "baton: swift format lint failed (run: swift format -i -r -p Sources Tests Package.swift fuzz/Sources fuzz/Package.swift)" >&2
  exit 1
}
# Every module imports only what Package.swift declares for it (the layer rules, docs/ARCHITECTURE.md).
# And no compiler warnings: a fresh clone compiles every file, so each warning is printed here
# (`path:line:col: warning: …`; SwiftPM's own "warning: you may be able to install …" hints are not
# the code's).
build_log=$(mktemp)
swift build --build-tests --explicit-target-dependency-import-check error 2>&1 | tee "$build_log"
[ "${PIPESTATUS[0]}" -eq 0 ] || exit 1
if grep -E '^/[^ ]+:[0-9]+:[0-9]+: warning: ' "$build_log" | sort -u >&2; then
  echo "baton: the build has compiler warnings (above); the project builds without any" >&2
  exit 1
fi
rm -f "$build_log"
took "the format lint and the debug build"
# The test processes' directories (/tmp/baton-tests-PID-XXXXXX: PCM files, card records, every test's
# files; ~0.4 GiB a run) of processes that have ended: the last run's stay for reading until the next run.
for d in /tmp/baton-tests-*; do
  [ -d "$d" ] || continue
  pid=${d#/tmp/baton-tests-}
  kill -0 "${pid%%-*}" 2>/dev/null || rm -rf -- "$d"
done
# The real Subsonic server the music tests stream from (Supysonic on 127.0.0.1, library made by ffmpeg).
# Two more on other ports for the fault tests (the client's and the daemon's), which kill and
# restart theirs, so tests running in parallel against the first are never disturbed.
servers=("4533 /tmp/baton-subsonic.env" "4534 /tmp/baton-subsonic-faults.env" "4535 /tmp/baton-subsonic-daemon-faults.env")
stop_servers() {
  for s in "${servers[@]}"; do
    set -- $s
    BATON_SUBSONIC_PORT=$1 BATON_SUBSONIC_ENV=$2 scripts/subsonic-server.sh stop >/dev/null 2>&1 || true
  done
}
# Before the first start: a second that fails (its port taken) stops the first too, not left to be
# reused by the next run with an older library.
trap stop_servers EXIT
for s in "${servers[@]}"; do
  set -- $s
  BATON_SUBSONIC_PORT=$1 BATON_SUBSONIC_ENV=$2 scripts/subsonic-server.sh start || exit 1
done
took "starting the Subsonic servers"
swift test --skip-build --skip SoakTests --skip SnapcastHouseTests 2>&1 | tee .build/test.log | grep --line-buffered -vE '^(◇|↳ (Testing Library|Target Platform))'
status=${PIPESTATUS[0]}
took "the parallel suites"
# The Snapcast house alone: snapserver and the snapclients are not real-time programs, and beside the
# ~100 parallel suites on two cores they read late and stamp their own late reads into the latency
# (a first doorbell 50 ms late, speakers 4 ms apart) — the test would measure the suite, not Baton.
swift test --skip-build --filter SnapcastHouseTests 2>&1 | tee .build/test-snapcast.log | grep --line-buffered -vE '^(◇|↳ (Testing Library|Target Platform))'
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
took "the Snapcast house"
# The 2-minute soak alone afterwards: it loads both cores with stress-ng itself and requires 0 xruns
# on its virtual cards; beside the rest of the suite it measured the other tests, not batond.
swift test --skip-build --filter SoakTests 2>&1 | tee .build/soak.log | grep --line-buffered -vE '^(◇|↳ (Testing Library|Target Platform))'
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
took "the soak"
# The web app in a real browser (Selenium, chromium-driver) against the real batond and the first
# Subsonic server; it prints 'webapp: N passed, N failed'.
scripts/test-webapp.sh 2>&1 | tee .build/test-webapp.log | grep --line-buffered -vE '^(#[0-9]+ 0x|Stacktrace:)'
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
took "the web app"
# The .deb installed into a fresh Debian 12 root, and lintian (docs/PACKAGING.md), packaged from the
# debug binaries just tested so the suite builds nothing twice.
if [ "$(id -u)" -eq 0 ]; then
  BATON_BIN_DIR=$(swift build --show-bin-path) scripts/test-deb.sh || status=1
else
  echo "baton: scripts/test-deb.sh skipped: it needs root (debootstrap, chroot)" >&2
fi
took "the .deb"
[ "$status" -eq 0 ] && echo "baton: all tests passed" || echo "baton: tests FAILED (exit $status)" >&2
exit "$status"
