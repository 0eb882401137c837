#!/usr/bin/env bash
# Installs whatever the tests need and runs the whole test suite. `.ci/run` calls this.
# Works as root on a fresh Debian 12 / Raspberry Pi OS clone with only the Swift toolchain.
set -uo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh --test || exit 1
swift build --build-tests || exit 1
# The real Subsonic server the music tests stream from (Supysonic on 127.0.0.1, library made by ffmpeg).
# A second one on another port for the fault tests, which kill and restart it.
scripts/subsonic-server.sh start || exit 1
BATON_SUBSONIC_PORT=4534 BATON_SUBSONIC_ENV=/tmp/baton-subsonic-faults.env scripts/subsonic-server.sh start || exit 1
stop_servers() {
  scripts/subsonic-server.sh stop >/dev/null 2>&1 || true
  BATON_SUBSONIC_PORT=4534 BATON_SUBSONIC_ENV=/tmp/baton-subsonic-faults.env scripts/subsonic-server.sh stop >/dev/null 2>&1 || true
}
trap stop_servers EXIT
swift test --skip-build 2>&1 | tee .build/test.log | grep --line-buffered -vE '^(◇|↳ (Testing Library|Target Platform))'
status=${PIPESTATUS[0]}
[ "$status" -eq 0 ] && echo "baton: all tests passed" || echo "baton: tests FAILED (exit $status)" >&2
exit "$status"
