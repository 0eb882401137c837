#!/usr/bin/env bash
# Soak test of a release batond (Tests/Service/ToolTests/SoakTests.swift, through the truth harness
# in Tests/Support/BatonTesting): 2 zones on virtual sound cards (clock: device) next to stress-ng
# loading every core, looping music, an announcement every 10 s, an RTP call every 2 minutes, a
# config reload every 30 s. Every event and a status sample every period are judged against what the
# cards played; prints "samples checked / mismatches / widest disagreement in ms" and fails on any
# xrun, late cycle, mismatch, missing interruption/call/reload, or RSS growth of 1 MiB.
#
#   scripts/soak.sh [MINUTES]     (default 30)
#   BATON_SOAK_FIFO=0 scripts/soak.sh 2     batond without CAP_SYS_NICE (no SCHED_FIFO)
#   BATON_SOAK_STRESS=0 ...                 without stress-ng
#   BATON_SOAK_RENDER_AHEAD=1 ...           zones with a 120 ms buffer and `render-ahead: true`
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:-30}"
. scripts/bench/build-batond.sh
build_batond
command -v stress-ng >/dev/null || echo "$(basename "$0"): stress-ng is missing (scripts/install-deps.sh --test): no load" >&2
echo "$(basename "$0"): release batond at commit $baton_commit; $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
nice -n 10 swift build --build-tests >/dev/null
BATON_SOAK_BATOND="$batond" BATON_SOAK_MINUTES="$minutes" \
  swift test --skip-build --filter 'SoakTests/twoMinuteSoak' 2>&1 | grep -E '^(soak|FAIL)|✔|✘ Test twoMinuteSoak'
exit "${PIPESTATUS[0]}"
