#!/usr/bin/env bash
# Installs whatever the tests need and runs the whole test suite. `.ci/run` calls this.
# Works as root on a fresh Debian 12 / Raspberry Pi OS clone with only the Swift toolchain.
set -uo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh --test || exit 1
swift build --build-tests || exit 1
swift test --skip-build 2>&1 | tee .build/test.log | grep --line-buffered -vE '^(◇|↳ (Testing Library|Target Platform))'
status=${PIPESTATUS[0]}
[ "$status" -eq 0 ] && echo "baton: all tests passed" || echo "baton: tests FAILED (exit $status)" >&2
exit "$status"
